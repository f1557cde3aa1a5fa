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
}
