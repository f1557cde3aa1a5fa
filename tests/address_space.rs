//! A process whose address space is capped (`ulimit -v`) below the
//! private region's default reservation records what fits; one where no
//! region fits at all says so once and reports the reason rather than zero
//! counters; and a `LATTE_REGION` that cannot be made is tried and said
//! once, not at every call. One test, so that this process has made no
//! region before its children do.

mod common;
use common::*;
use latte::counters::latte_counters;
use latte::internals::ffi::latte_region_get_counters;
use latte::layout::*;
use std::ffi::CString;

/// The current address-space size of this process, in bytes.
fn vm_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = s.lines().find_map(|l| l.strip_prefix("VmSize:")).unwrap().trim().trim_end_matches(" kB").trim().parse().unwrap();
    kib * 1024
}

/// Caps this process's address space at what it maps now plus `spare` bytes.
fn cap_address_space(spare: u64) {
    let cap = libc::rlimit { rlim_cur: vm_bytes() + spare, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &cap) }, 0);
}

/// Standard error of this (child) process into `path`.
fn stderr_to(path: &std::path::Path) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::create(path).unwrap();
    // SAFETY: both descriptors are open; fd 2 is replaced in this child only.
    unsafe { libc::dup2(f.as_raw_fd(), 2) };
}

#[test]
fn a_capped_address_space_records_what_fits_and_says_once_when_nothing_does() {
    let pid = std::process::id();
    let err = std::env::temp_dir().join(format!("latte-address-space-{pid}.err"));
    // Below the default private region's 256 MiB of address space (256
    // rings of 1 MiB), room for a few rings: the region is made smaller.
    in_child(|| {
        cap_address_space(48 << 20);
        span(c"capped.first", LATTE_MODE_FAST, LATTE_MODE_FAST);
        // The region took at most a quarter of what the cap left: the
        // program can still allocate 30 MiB of its own.
        // SAFETY: malloc and free of a block of our own.
        let own = unsafe { libc::malloc(30 << 20) };
        let fits = !own.is_null();
        // SAFETY: as above (free of NULL does nothing).
        unsafe { libc::free(own) };
        let ids: Vec<CString> = (0..3).map(|k| CString::new(format!("capped.{k}")).unwrap()).collect();
        for _ in 0..1000 {
            for id in &ids {
                span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
            }
        }
        let kept: Vec<usize> = ids.iter().map(|id| snapshot(id).len()).collect();
        eprintln!("under a cap of +48 MiB: kept {kept:?}, 30 MiB of the program's own fits: {fits}");
        fits && kept == [1000, 1000, 1000]
    });
    // Room for no region at all, and LATTE_REGION naming an object that is
    // not a region: each said once (not at each of the 1,000 spans), and
    // the counters are refused with the reason, not given as zeros.
    let foreign = format!("/latte-test-addr-foreign-{pid}");
    let path = format!("/dev/shm{foreign}");
    std::fs::write(&path, b"not a region").unwrap();
    in_child(|| {
        stderr_to(&err);
        std::env::set_var("LATTE_REGION", &foreign);
        cap_address_space(256 << 10);
        for _ in 0..1000 {
            span(c"nowhere", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        let mut c = latte_counters::default();
        let rc = latte_region_get_counters(&mut c);
        // SAFETY: no limit: lift the cap before reading the file.
        unsafe { libc::setrlimit(libc::RLIMIT_AS, &libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY }) };
        let told = std::fs::read_to_string(&err).unwrap();
        let env_lines = told.lines().filter(|l| l.contains("LATTE_REGION")).count();
        let none_lines = told.lines().filter(|l| l.contains("no memory for a region")).count();
        rc == -libc::ENOMEM && env_lines == 1 && none_lines == 1 && told.lines().count() == 2
    });
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&err);
    memory_gone_before_a_threads_first_span_is_counted_and_said_once(&err);
    let _ = std::fs::remove_file(&err);
}

/// Memory runs out (the heap and the address space both) before a thread's
/// first span: the memory for its recording state cannot be had. Its spans
/// are counted as no-slot drops and said once, and the program goes on;
/// once memory is back, the thread records.
fn memory_gone_before_a_threads_first_span_is_counted_and_said_once(err: &std::path::Path) {
    in_child(|| {
        stderr_to(err);
        // The region exists first, made without a cap.
        assert_ne!(latte::internals::ffi::latte_intern_id(c"oom.warm".as_ptr()), LATTE_INVALID_ID);
        let mut hog: Vec<*mut libc::c_void> = Vec::with_capacity(1 << 20);
        cap_address_space(0);
        // The heap taken, 1 KiB at a time, until nothing more comes...
        while hog.len() < hog.capacity() {
            // SAFETY: a block of our own, freed below.
            let p = unsafe { libc::malloc(1024) };
            if p.is_null() {
                break;
            }
            hog.push(p);
        }
        // ...then a few blocks apart given back: small allocations (the C
        // library's own) still fit, the thread's state (kilobytes) does not.
        for p in hog.iter_mut().step_by(64).take(32) {
            // SAFETY: ours, from malloc above.
            unsafe { libc::free(*p) };
            *p = core::ptr::null_mut();
        }
        for _ in 0..100 {
            span(c"oom.first", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        // One more opened now and closed once memory is back: counted once.
        latte::internals::ffi::latte_start(c"oom.open".as_ptr(), LATTE_MODE_FAST);
        let mut during = latte_counters::default();
        let rc = latte_region_get_counters(&mut during);
        for p in hog.drain(..) {
            // SAFETY: ours (free of NULL does nothing).
            unsafe { libc::free(p) };
        }
        // SAFETY: no limit: memory is back.
        unsafe { libc::setrlimit(libc::RLIMIT_AS, &libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY }) };
        latte::internals::ffi::latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        for _ in 0..100 {
            span(c"oom.after", LATTE_MODE_FAST, LATTE_MODE_FAST);
        }
        let mut after_all = latte_counters::default();
        latte_region_get_counters(&mut after_all);
        let told = std::fs::read_to_string(err).unwrap();
        let said = told.lines().filter(|l| l.contains("out of memory for the recorder")).count();
        let (first, after) = (snapshot(c"oom.first").len(), snapshot(c"oom.after").len());
        eprintln!(
            "memory gone: rc {rc}, no-slot drops {}, kept {first}; memory back: kept {after}, orphan Stops {}; said {said} times",
            during.no_slot_drops, after_all.orphan_stops
        );
        rc == 0 && during.no_slot_drops == 101 && after_all.no_slot_drops == 101 && after_all.orphan_stops == 0 && first == 0 && after == 100 && said == 1
    });
}
