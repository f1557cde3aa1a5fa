//! Failing calls release what they took: descriptors, mappings' fault-table
//! entries, temporary shared-memory names. Each failure is repeated, and
//! the counts before and after must be equal (one test in this binary, so
//! no other test opens anything meanwhile).

use latte::internals::fault;
use latte::internals::recorder::install_shared;
use latte::internals::region::{latte_region_config, Region};
use latte::{Error, Mapping};
use std::ffi::CString;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Temporary names this process made in /dev/shm (`/.latte-new-PID-N`).
fn temp_names() -> usize {
    let prefix = format!(".latte-new-{}-", std::process::id());
    std::fs::read_dir("/dev/shm").unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(&prefix)).count()
}

fn cfg(ids: u32) -> latte_region_config {
    latte_region_config { slot_capacity: 4, samples_per_slot: 1024, id_capacity: ids, mode: 0, if_taken: 0, budget_mib: 0 }
}

fn state() -> (usize, usize, usize) {
    (open_fds(), fault::registered(), temp_names())
}

#[test]
fn failing_calls_leave_nothing_behind() {
    let pid = std::process::id();
    // More IDs interned (in the default private region) than a small table
    // holds: installing a shared region with it fails after the object was
    // made, mapped, protected and published.
    for k in 0..10 {
        let n = CString::new(format!("leak.{k}")).unwrap();
        // SAFETY: a NUL-terminated string.
        assert_ne!(unsafe { latte::internals::recorder::intern_id(n.as_ptr()) }, latte::layout::LATTE_INVALID_ID);
    }
    let before = state();
    for k in 0..5 {
        let name = format!("/latte-leak-{pid}-{k}");
        assert_eq!(install_shared(name.as_bytes(), &cfg(4)), Err(Error::NOSPC));
        assert!(Mapping::open_shm(name.as_bytes()).is_err(), "the failed region's name was removed");
        assert_eq!(state(), before, "after failed install {k}: (fds, fault entries, temporary names)");
    }

    // A name taken by something that is not a latte region: the new object
    // is made, locked, sized, mapped and protected, then publishing fails.
    let taken = format!("/latte-leak-{pid}-taken");
    let path = format!("/dev/shm{taken}");
    std::fs::write(&path, b"not a region").unwrap();
    for _ in 0..5 {
        assert_eq!(Region::create_shared(taken.as_bytes(), &cfg(0), &mut |_| None).err(), Some(Error::Os(libc::EEXIST)));
        assert_eq!(state(), before, "after a failed publish");
    }
    std::fs::remove_file(&path).unwrap();

    // Readers refused by validation unmap and close what they opened.
    let bad = std::env::temp_dir().join(format!("latte-leak-{pid}.img"));
    for content in [&b"LATTEREG"[..], &[0u8; 4096][..], &b"short"[..]] {
        std::fs::write(&bad, content).unwrap();
        for _ in 0..5 {
            assert!(Mapping::open_file(&bad).is_err());
        }
        assert_eq!(state(), before, "after refused readers");
    }
    std::fs::remove_file(&bad).unwrap();

    // A region that was made and then dropped (never installed) gives back
    // its descriptor, lock, protection and mapping; `discard` its name.
    let made = format!("/latte-leak-{pid}-made");
    for _ in 0..5 {
        let r = Region::create_shared(made.as_bytes(), &cfg(0), &mut |_| None).unwrap();
        assert_eq!(fault::registered(), before.1 + 3, "the header page, the first name chunk and the first slot chunk");
        r.discard();
        assert_eq!(state(), before, "after a dropped region");
        assert!(Mapping::open_shm(made.as_bytes()).is_err());
    }

    // An install that fails after the region was made and published (the
    // sink ring cannot be mapped: the address space is capped just above
    // the region) removes the region's name again. In a child process, so
    // that the cap and the failed install stay there.
    let capped = format!("/latte-leak-{pid}-capped");
    // SAFETY: fork in a test binary with one test; the child only calls
    // async-signal-safe code and latte, then _exit.
    let child = unsafe { libc::fork() };
    if child == 0 {
        let vm_kib: u64 = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("VmSize:").map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap()))
            .unwrap();
        let cfg = latte_region_config { slot_capacity: 64, samples_per_slot: 65536, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
        let region =
            latte::layout::LATTE_PAGE_SIZE + latte::layout::name_chunk_bytes(0) + latte::layout::Geometry::new(64, 65536).unwrap().slot_chunk_bytes(0).unwrap();
        // Room for the region and a little more, not for a 1 MiB sink too.
        let cap = libc::rlimit { rlim_cur: vm_kib * 1024 + region + (256 << 10), rlim_max: libc::RLIM_INFINITY };
        // SAFETY: a valid rlimit.
        unsafe { libc::setrlimit(libc::RLIMIT_AS, &cap) };
        let r = install_shared(capped.as_bytes(), &cfg);
        // SAFETY: ends the child without running the parent's atexit handlers.
        unsafe {
            libc::_exit(match r {
                Err(Error::NOMEM) => 0,
                Ok(()) => 1,
                Err(e) => 10 + (-e.code()).min(200),
            })
        };
    }
    let mut status = 0;
    // SAFETY: our child.
    unsafe { libc::waitpid(child, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the capped install did not fail with ENOMEM as set up: exit {}",
        libc::WEXITSTATUS(status)
    );
    assert!(Mapping::open_shm(capped.as_bytes()).is_err(), "a failed install left its region's name in /dev/shm");
    assert_eq!(temp_names(), 0);
}
