//! The fault table (src/fault.rs) grows with the mappings it protects: a
//! reader past its first chunk (64 entries) is opened and protected like
//! the first, entries freed by closed readers are reused, threads opening
//! readers at once each get an entry, and every reader survives its object
//! shrinking.

use latte::layout::*;
use latte::reader::Mapping;

#[test]
fn readers_beyond_a_chunk_of_the_fault_table_are_protected_and_entries_are_reused() {
    // SAFETY: fork; the child only uses latte and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = std::panic::catch_unwind(child).map(|_| 0).unwrap_or(101);
        // SAFETY: leave the child at once.
        unsafe { libc::_exit(code) };
    }
    let mut st = 0;
    // SAFETY: our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert!(libc::WIFEXITED(st), "the child was killed by signal {}", libc::WTERMSIG(st));
    assert_eq!(libc::WEXITSTATUS(st), 0);
}

fn child() {
    let name = format!("/latte-test-faults-{}", std::process::id());
    let cfg = latte::internals::region::latte_region_config { slot_capacity: 2, samples_per_slot: 1024, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
    latte::internals::recorder::install_shared(name.as_bytes(), &cfg).unwrap();
    for _ in 0..100 {
        latte::internals::ffi::latte_start(c"faults.a".as_ptr(), LATTE_MODE_FAST);
        latte::internals::ffi::latte_stop(core::ptr::null(), LATTE_MODE_FAST);
    }
    // The producer's own mapping holds an entry; 300 readers take five
    // chunks in all.
    let before = latte::internals::fault::registered();
    let mut readers: Vec<Mapping> = (0..300).map(|_| Mapping::open_shm(name.as_bytes()).unwrap()).collect();
    assert_eq!(latte::internals::fault::registered(), before + 300);
    // Closing readers frees their entries; new ones reuse them.
    readers.truncate(100);
    assert_eq!(latte::internals::fault::registered(), before + 100);
    let chunks_before = latte::internals::fault::chunks();
    readers.extend((0..200).map(|_| Mapping::open_shm(name.as_bytes()).unwrap()));
    assert_eq!(latte::internals::fault::registered(), before + 300);
    assert_eq!(latte::internals::fault::chunks(), chunks_before, "freed entries reused, no new chunk");
    // Eight threads opening 40 readers each at once: they race to claim
    // entries and to append chunks; each reader gets an entry of its own.
    let more: Vec<Mapping> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8).map(|_| s.spawn(|| (0..40).map(|_| Mapping::open_shm(name.as_bytes()).unwrap()).collect::<Vec<_>>())).collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(latte::internals::fault::registered(), before + 300 + 320);
    assert!(latte::internals::fault::chunks() * 64 >= before + 620);
    drop(more);
    assert_eq!(latte::internals::fault::registered(), before + 300);
    // Shrink the object under every reader (and the producer), then read
    // through each: zeros or an error, never a SIGBUS.
    let c = std::ffi::CString::new(name.clone()).unwrap();
    // SAFETY: a valid name; a descriptor we close at once.
    unsafe {
        let fd = libc::shm_open(c.as_ptr(), libc::O_RDWR, 0);
        assert!(fd >= 0);
        assert_eq!(libc::ftruncate(fd, 4096), 0);
        libc::close(fd);
    }
    for m in &readers {
        let mut cur = Default::default();
        let mut out = Vec::new();
        let r = m.view().read_slot(0, &mut cur, &mut out, latte::ReadMode::Live);
        assert!(r.is_err(), "a truncated object read as healthy");
    }
    latte::shm::unlink(name.as_bytes()).unwrap();
}
