//! The edges of a region that grows: a flush while new IDs are made, a fork
//! child that grows its copy, an object that keeps growing under a lying
//! header, an object full of empty names, a reader that mapped a chunk
//! before it was published. Each case runs in a child process of its own
//! (a process installs one shared region, and a case may crash).

mod common;
use common::*;
use latte::layout::*;
use latte::reader::Mapping;
use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

fn region_name(what: &str) -> String {
    format!("/latte-growth-edge-{what}-{}", std::process::id())
}

/// A flush taken while threads keep making new IDs (fresh rings and
/// exited threads' rings handed on) writes an image every reader opens: the
/// image names every token its captured slots carry (the names are counted
/// after the slots are captured).
#[test]
fn a_flush_while_new_ids_are_made_writes_a_readable_image() {
    let name = region_name("flushrace");
    let path = std::env::temp_dir().join(format!("latte-growth-edge-flushrace-{}.img", std::process::id()));
    let path2 = path.clone();
    in_child(move || {
        latte::internals::recorder::install_shared(name.as_bytes(), &small_rings(16)).unwrap();
        let done = AtomicBool::new(false);
        let (bad, flushes) = std::thread::scope(|s| {
            s.spawn(|| {
                // Short threads, each with an ID of its own: once exited
                // threads hold half the region their rings are reused.
                // IDs stay valid while recorded under: kept to the end.
                let mut ids = Vec::new();
                let mut k = 0;
                while !done.load(Ordering::Acquire) && k < 50_000 {
                    ids.push(CString::new(format!("race.{k}")).unwrap());
                    let id = ids.last().unwrap();
                    std::thread::scope(|t| {
                        t.spawn(|| span(id, LATTE_MODE_FAST, LATTE_MODE_FAST));
                    });
                    k += 1;
                }
            });
            let mut bad = Vec::new();
            let mut flushes = 0;
            while flushes < 500 && bad.is_empty() {
                let f = std::fs::File::create(&path2).unwrap();
                latte::internals::flush::flush_sync(f.as_raw_fd(), LATTE_UNIT_CYCLE).unwrap();
                drop(f);
                flushes += 1;
                if let Err(e) = Mapping::open_file(&path2) {
                    bad.push(format!("{e:?}"));
                }
            }
            done.store(true, Ordering::Release);
            (bad, flushes)
        });
        eprintln!("flushes {flushes}, unreadable images {}: {:?}", bad.len(), bad);
        latte::shm::unlink(name.as_bytes()).unwrap();
        bad.is_empty()
    });
    let _ = std::fs::remove_file(&path);
}

/// A fork child's copy of a shared region is private memory, and grows
/// like a private region when the child needs rings past the chunks made
/// before the fork.
#[test]
fn a_fork_child_of_a_shared_region_can_grow_it() {
    let name = region_name("forkgrow");
    in_child(move || {
        latte::internals::recorder::install_shared(name.as_bytes(), &small_rings(2)).unwrap();
        span(c"parent.only", LATTE_MODE_FAST, LATTE_MODE_FAST);
        // SAFETY: the child records, reports through its exit code and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ids: Vec<CString> = (0..20).map(|k| CString::new(format!("child.{k}")).unwrap()).collect();
            for id in &ids {
                span(id, LATTE_MODE_FAST, LATTE_MODE_FAST);
            }
            let c = counters();
            let recorded = ids.iter().filter(|id| snapshot(id).len() == 1).count();
            eprintln!("fork child: recorded {recorded}/20 no_slot_drops {} unfit {}", c.no_slot_drops, c.unfit_id_drops);
            // SAFETY: leave the child at once.
            unsafe { libc::_exit(if recorded == 20 && c.no_slot_drops == 0 { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        latte::shm::unlink(name.as_bytes()).unwrap();
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    });
}

/// A header that passes every check before `total_size`, with a
/// `total_size` past any object.
fn lying_header() -> Vec<u8> {
    use core::mem::offset_of as o;
    type H = latte_region_header;
    let mut b = vec![0u8; 4096];
    let g = Geometry::new(1, 64).unwrap();
    b[0..8].copy_from_slice(&LATTE_MAGIC);
    let p32 = |b: &mut Vec<u8>, off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_le_bytes());
    let p64 = |b: &mut Vec<u8>, off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_le_bytes());
    p32(&mut b, o!(H, version), LATTE_LAYOUT_VERSION);
    p32(&mut b, o!(H, header_size), LATTE_HEADER_SIZE);
    p32(&mut b, o!(H, slot_header_size), LATTE_SLOT_HEADER_SIZE);
    p32(&mut b, o!(H, sample_size), LATTE_SAMPLE_SIZE);
    p32(&mut b, o!(H, first_name_bytes), LATTE_FIRST_NAME_BYTES);
    p32(&mut b, o!(H, first_slots), 1);
    p32(&mut b, o!(H, samples_per_slot), 64);
    p64(&mut b, o!(H, slot_stride), g.slot_stride);
    p64(&mut b, o!(H, total_size), 1u64 << 50);
    b
}

/// An object whose header claims more than it holds while someone keeps
/// growing it: the reader measures it again a few times, then returns
/// LATTE_ERR_TRUNCATED (never recurses without bound).
#[test]
fn an_object_that_keeps_growing_under_a_lying_header_is_refused() {
    let name = region_name("lyinggrow");
    in_child(move || {
        let c = CString::new(name.clone()).unwrap();
        // SAFETY: a valid C string; a fresh object of ours.
        let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR, 0o600) };
        assert!(fd >= 0);
        let h = lying_header();
        // SAFETY: fd is open; h is readable for its length.
        unsafe { libc::pwrite(fd, h.as_ptr() as *const libc::c_void, h.len(), 0) };
        let stop = AtomicBool::new(false);
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                // Grows the (sparse) object a page at a time, up to 64 GiB.
                let mut len: i64 = 4096;
                while !stop.load(Ordering::Relaxed) && len < (64i64 << 30) {
                    len += 4096;
                    // SAFETY: fd is open.
                    unsafe { libc::ftruncate(fd, len) };
                }
            });
            // A reader on a thread with the default 2 MiB stack.
            let r = std::thread::Builder::new().stack_size(2 << 20).spawn_scoped(s, || Mapping::open_shm(name.as_bytes()).map(|_| ())).unwrap().join().unwrap();
            stop.store(true, Ordering::Relaxed);
            r
        });
        eprintln!("open under a growing lying object: {r:?}");
        latte::shm::unlink(name.as_bytes()).unwrap();
        r.is_err()
    });
}

/// Peak resident memory of this process (KiB).
fn hwm_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).unwrap().parse().unwrap()
}

/// Opening an object full of empty names walks them without keeping them:
/// a hostile object in `/dev/shm` costs a reader no memory in proportion to
/// its name count. The bound here (4 x the object) is generous.
#[test]
fn opening_an_object_full_of_empty_names_keeps_none_of_them() {
    let name = region_name("names");
    in_child(move || {
        use core::mem::offset_of as o;
        type H = latte_region_header;
        let mut h = lying_header();
        // Name chunks 0..=8 back to back after the header page: 32 MiB of records.
        let mut off = 4096u64;
        for k in 0..9u32 {
            let e = o!(H, name_chunks) + 8 * k as usize;
            h[e..e + 8].copy_from_slice(&off.to_le_bytes());
            off += name_chunk_bytes(k);
        }
        let total = off;
        let records = (total - 4096) / 4;
        h[o!(H, total_size)..o!(H, total_size) + 8].copy_from_slice(&total.to_le_bytes());
        h[o!(H, ids_used)..o!(H, ids_used) + 4].copy_from_slice(&(records as u32).to_le_bytes());
        let c = CString::new(name.clone()).unwrap();
        // SAFETY: a valid C string; a fresh object of ours.
        let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR, 0o600) };
        assert!(fd >= 0);
        let mut body = h;
        // Every record: length word 1 (an empty name).
        body.extend(std::iter::repeat_n(1u32.to_le_bytes(), records as usize).flatten());
        // SAFETY: fd is open; body is readable for its length.
        assert_eq!(unsafe { libc::pwrite(fd, body.as_ptr() as *const libc::c_void, body.len(), 0) }, body.len() as isize);
        drop(body);
        let before = hwm_kib();
        let r = Mapping::open_shm(name.as_bytes()).map(|m| m.view().ids_used());
        let grew = hwm_kib().saturating_sub(before);
        eprintln!("object {} MiB, {records} empty names: open {r:?}, peak memory grew {} MiB", total >> 20, grew >> 10);
        latte::shm::unlink(name.as_bytes()).unwrap();
        grew < 4 * (total >> 10)
    });
}

/// A reader that mapped the object after the producer reserved a chunk
/// (the object already larger) but before it published `total_size` sees
/// that chunk after a refresh: `Mapping::grown` compares the published size
/// with the size the view validated, not with the mapping's. The state is
/// made by hand here from a real region: chunk 1 reserved and its directory
/// entry stored, `total_size` not yet; then published.
#[test]
fn a_reader_that_mapped_a_reserved_chunk_before_it_was_published_sees_it_after_refresh() {
    use core::mem::offset_of as o;
    type H = latte_region_header;
    let name = region_name("racechunk");
    let copy = region_name("racechunk-copy");
    in_child(move || {
        latte::internals::recorder::install_shared(name.as_bytes(), &small_rings(2)).unwrap();
        // Two rings: slot chunk 0 (2 slots) full.
        std::thread::scope(|s| {
            s.spawn(|| span(c"race.a", LATTE_MODE_FAST, LATTE_MODE_FAST)).join().unwrap();
        });
        span(c"race.b", LATTE_MODE_FAST, LATTE_MODE_FAST);
        let m = Mapping::open_shm(name.as_bytes()).unwrap();
        let total = m.view().published_size();
        // SAFETY: the mapping is readable for its published size.
        let mut bytes = unsafe { std::slice::from_raw_parts(m.view().base(), total as usize) }.to_vec();
        assert_eq!(m.view().slots().unwrap().len(), 2);
        let geo = m.view().geo();
        drop(m);
        // The copy, with chunk 1 reserved after it and its entry stored,
        // total_size not yet moved (the producer between the two stores).
        let chunk = geo.slot_chunk_bytes(1).unwrap();
        bytes[o!(H, slot_chunks) + 8..o!(H, slot_chunks) + 16].copy_from_slice(&total.to_le_bytes());
        let c = CString::new(copy.clone()).unwrap();
        // SAFETY: a valid C string; a fresh object of ours.
        let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR, 0o600) };
        assert!(fd >= 0);
        // SAFETY: fd is open; bytes readable for their length.
        unsafe {
            assert_eq!(libc::posix_fallocate(fd, 0, (total + chunk) as libc::off_t), 0);
            assert_eq!(libc::pwrite(fd, bytes.as_ptr() as *const libc::c_void, bytes.len(), 0), bytes.len() as isize);
        }
        let mut reader = Mapping::open_shm(copy.as_bytes()).unwrap();
        let before = reader.view().slots().unwrap().len();
        // The producer publishes the chunk, then hands out slot 2 in it.
        // SAFETY: a fresh shared mapping of our object, written by this thread only.
        let w = unsafe { libc::mmap(core::ptr::null_mut(), (total + chunk) as usize, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) } as *mut u8;
        assert!(w as isize != -1);
        // SAFETY: inside the mapping; the reader maps it read-only and reads atomically.
        unsafe {
            (w.add(o!(H, total_size)) as *mut u64).write_volatile(total + chunk);
            let slot2 = w.add(total as usize);
            type S = latte_slot_header;
            (slot2.add(o!(S, id_token)) as *mut u32).write_volatile(0);
            (slot2.add(o!(S, state)) as *mut u32).write_volatile(LATTE_SLOT_LIVE);
            (slot2.add(o!(S, generation)) as *mut u32).write_volatile(1);
            (w.add(o!(H, slots_used)) as *mut u32).write_volatile(3);
        }
        let refreshed = reader.refresh().unwrap();
        let after = reader.view().slots().unwrap().len();
        let fresh = Mapping::open_shm(copy.as_bytes()).unwrap().view().slots().unwrap().len();
        eprintln!("slots before {before}; after refresh (remapped {refreshed}) {after}; a new reader sees {fresh}");
        latte::shm::unlink(name.as_bytes()).unwrap();
        latte::shm::unlink(copy.as_bytes()).unwrap();
        before == 2 && fresh == 3 && after == 3
    });
}
