//! The `latte` command against hostile objects in /dev/shm (anyone can make
//! one there), each made in a private mount namespace with a tmpfs of its
//! own on /dev/shm, never in the machine's: a command always ends, in
//! bounded time and memory, with an error or a valid output; it never
//! aborts on a header's claims, never grows an object by reading its
//! holes, never hangs on a FIFO, never prints a name's control characters
//! raw, and reports a region truncated under a live producer.

use common::LATTE;
use latte::layout::*;
use std::mem::offset_of;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

/// Runs `latte args`, killed after 10 s; returns (exit code or -signal, stdout, stderr, seconds).
fn latte(args: &[&str]) -> (i32, String, String, f64) {
    let r = common::latte(args);
    (r.code, r.stdout, r.stderr, r.secs)
}

/// Bytes of data the tmpfs on /dev/shm holds.
fn shm_used() -> u64 {
    // SAFETY: an all-zero statvfs is a valid out-parameter.
    let mut st: libc::statvfs = unsafe { core::mem::zeroed() };
    // SAFETY: a valid path and out-parameter.
    assert_eq!(unsafe { libc::statvfs(c"/dev/shm".as_ptr(), &mut st) }, 0);
    (st.f_blocks - st.f_bfree) * st.f_frsize
}

/// A header claiming `geo`, `slots_used` slots handed out and one ID, in
/// a sparse object as large as its first name chunk and first slot chunk;
/// slot 0 says it holds `write_idx` samples of ID 0.
fn hostile(path: &str, geo: Geometry, slots_used: u32, write_idx: u64) {
    let f = std::fs::OpenOptions::new().create(true).write(true).truncate(true).open(path).unwrap();
    let names_at = LATTE_PAGE_SIZE;
    let slots_at = names_at + name_chunk_bytes(0);
    f.set_len(slots_at + geo.slot_chunk_bytes(0).unwrap()).unwrap();
    let mut h = vec![0u8; LATTE_PAGE_SIZE as usize];
    let put32 = |b: &mut Vec<u8>, o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_le_bytes());
    let put64 = |b: &mut Vec<u8>, o: usize, v: u64| b[o..o + 8].copy_from_slice(&v.to_le_bytes());
    type H = latte_region_header;
    h[..8].copy_from_slice(&LATTE_MAGIC);
    put32(&mut h, offset_of!(H, version), LATTE_LAYOUT_VERSION);
    put32(&mut h, offset_of!(H, header_size), LATTE_HEADER_SIZE);
    put32(&mut h, offset_of!(H, slot_header_size), LATTE_SLOT_HEADER_SIZE);
    put32(&mut h, offset_of!(H, sample_size), LATTE_SAMPLE_SIZE);
    put32(&mut h, offset_of!(H, first_slots), geo.first_slots);
    put32(&mut h, offset_of!(H, first_name_bytes), LATTE_FIRST_NAME_BYTES);
    put32(&mut h, offset_of!(H, samples_per_slot), geo.samples_per_slot);
    put64(&mut h, offset_of!(H, slot_stride), geo.slot_stride);
    put64(&mut h, offset_of!(H, total_size), slots_at + geo.slot_chunk_bytes(0).unwrap());
    put64(&mut h, offset_of!(H, name_chunks), names_at);
    put64(&mut h, offset_of!(H, slot_chunks), slots_at);
    put32(&mut h, offset_of!(H, ids_used), 1);
    put32(&mut h, offset_of!(H, slots_used), slots_used);
    use std::os::unix::fs::FileExt;
    f.write_all_at(&h, 0).unwrap();
    let mut rec = 5u32.to_le_bytes().to_vec(); // "evil": length 4, stored as 4 + 1
    rec.extend_from_slice(b"evil");
    f.write_all_at(&rec, names_at).unwrap();
    let mut s = vec![0u8; LATTE_SLOT_HEADER_SIZE as usize];
    type S = latte_slot_header;
    put64(&mut s, offset_of!(S, write_idx), write_idx);
    put32(&mut s, offset_of!(S, generation), 1);
    put32(&mut s, offset_of!(S, state), LATTE_SLOT_CLOSED);
    f.write_all_at(&s, slots_at).unwrap();
}

/// A real region made by a process that recorded and exited; returns its bytes.
fn real_region(name: &str, ids: &[&std::ffi::CStr]) -> Vec<u8> {
    // SAFETY: fork; the child installs, records and _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let cfg =
            latte::internals::region::latte_region_config { slot_capacity: 4, samples_per_slot: 256, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
        let ok = latte::internals::recorder::install_shared(name.as_bytes(), &cfg).is_ok();
        for id in ids {
            for _ in 0..100 {
                latte::internals::ffi::latte_start(id.as_ptr(), LATTE_MODE_FAST);
                latte::internals::ffi::latte_stop(core::ptr::null(), LATTE_MODE_FAST);
            }
        }
        // SAFETY: leave the child.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut st = 0;
    // SAFETY: our child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0);
    std::fs::read(format!("/dev/shm{name}")).unwrap()
}

fn scenario() {
    let mut failed = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failed.push(what);
        }
    };
    let ended = |r: &(i32, String, String, f64)| r.3 < 10.0 && r.0 >= 0;

    // A FIFO: every open is non-blocking and refuses it.
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(c"/dev/shm/fifo".as_ptr(), 0o600) }, 0);
    for args in [&["ls"][..], &["stats", "/fifo"], &["trace", "/fifo", "-o", "/tmp/latte-hostile-fifo.json"], &["watch", "/fifo", "--plain", "--count", "1"]] {
        let r = latte(args);
        check(ended(&r) && (args[0] == "ls") == (r.0 == 0), format!("FIFO: latte {args:?} -> {} in {:.1}s: {}", r.0, r.3, r.2));
    }
    std::fs::remove_file("/dev/shm/fifo").unwrap();

    // 2^31 samples per slot, one slot claiming them all: no 32 GiB allocation.
    let big = Geometry::new(1, 1 << 31).unwrap();
    hostile("/dev/shm/big", big, 1, 1 << 31);
    for args in [&["stats", "/big"][..], &["trace", "/big", "-o", "/tmp/latte-hostile-big.json"], &["watch", "/big", "--plain", "--count", "1"]] {
        let r = latte(args);
        check(ended(&r) && r.0 != 0 && r.2.contains("corrupt"), format!("2^31 samples: latte {args:?} -> {} in {:.1}s: {}", r.0, r.3, r.2));
    }
    std::fs::remove_file("/dev/shm/big").unwrap();

    // 2^32 - 1 slots, all claimed handed out, in an object of 4 KiB of
    // data: no 160 GiB of cursors, no walk through its holes.
    let many = Geometry::new(u32::MAX, 2).unwrap();
    hostile("/dev/shm/many", many, u32::MAX, 1);
    let before = shm_used();
    for args in [&["ls"][..], &["stats", "/many"], &["watch", "/many", "--plain", "--count", "1"]] {
        let r = latte(args);
        check(ended(&r) && (args[0] == "ls" || r.2.contains("corrupt")), format!("2^32-1 slots: latte {args:?} -> {} in {:.1}s: {}", r.0, r.3, r.2));
    }
    let grown = shm_used().saturating_sub(before);
    check(grown < (1 << 20), format!("reading grew /dev/shm by {grown} bytes"));
    std::fs::remove_file("/dev/shm/many").unwrap();

    // A tiny cycles-per-ns figure: the trace stays valid JSON.
    let mut img = real_region("/tiny", &[c"tiny.a"]);
    let o = offset_of!(latte_region_header, cycles_per_ns_bits);
    img[o..o + 8].copy_from_slice(&1e-300f64.to_bits().to_le_bytes());
    std::fs::write("/dev/shm/tiny", &img).unwrap();
    let r = latte(&["trace", "/tiny", "-o", "/tmp/latte-hostile-tiny.json"]);
    let text = std::fs::read_to_string("/tmp/latte-hostile-tiny.json").unwrap_or_default();
    check(
        r.0 == 0 && serde_json::from_str::<serde_json::Value>(&text).is_ok() && !text.contains("inf"),
        format!("tiny cycles per ns: trace -> {} {}; valid JSON: {}", r.0, r.2, serde_json::from_str::<serde_json::Value>(&text).is_ok()),
    );
    let _ = std::fs::remove_file("/tmp/latte-hostile-tiny.json");
    std::fs::remove_file("/dev/shm/tiny").unwrap();

    // Control characters in names (an ID's and a region's) are never printed raw.
    let img = real_region("/esc", &[c"\x1b[2Jred\nforged line"]);
    std::fs::write("/dev/shm/\x1b[31mx", &img).unwrap();
    for args in [&["ls"][..], &["stats", "/esc"], &["watch", "/esc", "--plain", "--count", "1"]] {
        let r = latte(&[args, &["--color", "never"]].concat());
        check(ended(&r) && !r.1.contains('\x1b') && !r.1.contains("\nforged"), format!("escapes: latte {args:?} printed {:?}", r.1));
    }
    std::fs::remove_file("/dev/shm/esc").unwrap();
    std::fs::remove_file("/dev/shm/\x1b[31mx").unwrap();

    // A region name is never taken for a directory of that name.
    let r = latte(&["stats", "/srv"]);
    check(r.0 != 0 && r.2.contains("region"), format!("/srv: {} {}", r.0, r.2));

    // Truncated under a live producer: watch reports it, never "idle".
    // SAFETY: fork; the child records until killed.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let cfg =
            latte::internals::region::latte_region_config { slot_capacity: 4, samples_per_slot: 1024, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
        latte::internals::recorder::install_shared(b"/trunc", &cfg).unwrap();
        let mut site = latte_pulse_site::new();
        loop {
            latte::internals::ffi::latte_pulse(&mut site, c"trunc.live".as_ptr());
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    while !std::path::Path::new("/dev/shm/trunc").exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    let watcher = Command::new(LATTE)
        .args(["watch", "/trunc", "--plain", "--interval", "0.05"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::OpenOptions::new().write(true).open("/dev/shm/trunc").unwrap().set_len(4096).unwrap();
    let t0 = Instant::now();
    let mut watcher = watcher;
    let status = loop {
        if let Some(s) = watcher.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > Duration::from_secs(5) {
            let _ = watcher.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = watcher.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    check(status.is_some_and(|s| !s.success()) && err.contains("truncated"), format!("truncation under watch: {status:?}, {err}"));
    // SAFETY: our child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, core::ptr::null_mut(), 0);
    }
    let _ = std::fs::remove_file("/dev/shm/trunc");

    for f in &failed {
        eprintln!("FAILED: {f}");
    }
    assert!(failed.is_empty(), "{} hostile cases failed", failed.len());
}

#[test]
fn hostile_objects_in_a_private_dev_shm() {
    common::in_private_shm(scenario);
}
