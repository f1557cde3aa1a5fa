//! Memory by use: a ring's memory is committed as it is written, within the
//! region's budget, never by a page fault on the measuring thread.
//!
//! The container cases run in a private 64 MiB `/dev/shm` (Docker's
//! default): this test binary runs again, one `#[ignore]`d case at a time,
//! inside `unshare -m` with a tmpfs of that size mounted on `/dev/shm`, as
//! an unchanged program would under `LATTE_REGION`.

mod common;
use latte::internals::ffi::*;
use latte::layout::*;
use latte::reader::{latte_cursor, latte_raw_sample, latte_slot_info};
use std::ffi::{CStr, CString};
use std::process::Command;

/// Set in the environment of a case run inside the private `/dev/shm`.
const CHILD_ENV: &str = "LATTE_TEST_SMALL_SHM";
/// The region's name in the private `/dev/shm`.
const REGION: &str = "/latte-test-mbu";

/// Runs `case` of this binary inside a mount namespace of its own with a
/// 64 MiB tmpfs on `/dev/shm`, under `LATTE_REGION`, and asserts it passed.
fn in_small_shm(case: &str) {
    in_small_shm_with(case, None)
}

/// `in_small_shm` with `LATTE_BUDGET_MIB` set to `budget_mib`.
fn in_small_shm_with(case: &str, budget_mib: Option<u32>) {
    let exe = std::env::current_exe().unwrap();
    let script = r#"mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$0" "$@""#;
    // Root (or CAP_SYS_ADMIN) makes a mount namespace; elsewhere a user
    // namespace gives one.
    for flags in ["-m", "-rm"] {
        let out = Command::new("unshare")
            .args([flags, "sh", "-c", script])
            .arg(&exe)
            .args(["--ignored", "--exact", case, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .env("LATTE_REGION", REGION)
            .env("LATTE_BUDGET_MIB", budget_mib.map(|m| m.to_string()).unwrap_or_default())
            .output()
            .expect("unshare(1) runs");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if !out.status.success() && (stderr.contains("Operation not permitted") || stderr.contains("Permission denied")) && flags == "-m" {
            continue;
        }
        assert!(out.status.success() && stdout.contains("1 passed"), "{case} in a private 64 MiB /dev/shm:\n{stdout}\n{stderr}");
        print!("{stdout}");
        return;
    }
    panic!("no mount namespace can be made here (unshare -m and -rm refused): {case} cannot run");
}

/// Asserts this is the case's run inside the private `/dev/shm`, of 64 MiB.
fn inside_small_shm() {
    assert!(std::env::var_os(CHILD_ENV).is_some(), "run through in_small_shm");
    // SAFETY: an all-zero statvfs is valid to fill.
    let mut st: libc::statvfs = unsafe { core::mem::zeroed() };
    // SAFETY: a valid path and buffer.
    assert_eq!(unsafe { libc::statvfs(c"/dev/shm".as_ptr(), &mut st) }, 0);
    assert_eq!(st.f_blocks as u64 * st.f_frsize as u64, 64 << 20, "/dev/shm is the private 64 MiB tmpfs");
}

/// `n` distinct IDs that live for the rest of the process.
fn ids(prefix: &str, n: usize) -> Vec<&'static CStr> {
    (0..n).map(|i| &*Box::leak(CString::new(format!("{prefix}.{i}")).unwrap().into_boxed_c_str())).collect()
}

/// `threads` threads, all alive together as a service's are, each
/// recording `spans` Fast spans of every ID of `ids`, round-robin over the
/// IDs; `then` runs while they are all still alive.
fn record(threads: usize, ids: &[&'static CStr], spans: usize, then: impl FnOnce()) {
    let (started, done) = (std::sync::Barrier::new(threads + 1), std::sync::Barrier::new(threads + 1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                started.wait();
                for _ in 0..spans {
                    for id in ids {
                        latte_start(id.as_ptr(), LATTE_MODE_FAST);
                        latte_stop(core::ptr::null(), LATTE_MODE_FAST);
                    }
                }
                done.wait();
                done.wait();
            });
        }
        started.wait();
        done.wait();
        then();
        done.wait();
    });
}

/// What a reader of the region finds, every slot read to its end through
/// the C reader API: (samples recorded, as the slots count them; read;
/// lost; held: what the rings' current generations hold, at most a whole
/// ring each).
fn read_all(name: &str) -> (u64, u64, u64, u64) {
    let c = CString::new(name).unwrap();
    let mut r = core::ptr::null_mut();
    assert_eq!(latte_reader_open(c.as_ptr(), &mut r), 0);
    assert_eq!(latte_reader_set_min_interval(r, 0), 0);
    // The recording threads have returned, but their exit (W4: a ring
    // CLOSED) runs in their thread-exit destructors, which a scope's end
    // does not wait for: wait for it, so that every ring is final and a
    // reader returns all it holds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let slots = loop {
        let mut n = 0usize;
        let _ = latte_reader_slots(r, core::ptr::null_mut(), 0, &mut n);
        let mut slots = vec![latte_slot_info::default(); n];
        assert_eq!(latte_reader_slots(r, slots.as_mut_ptr(), n, &mut n), 0);
        slots.truncate(n);
        if slots.iter().all(|s| s.state != LATTE_SLOT_LIVE) {
            break slots;
        }
        assert!(std::time::Instant::now() < deadline, "rings still live 10 s after their threads returned");
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    let mut buf = vec![latte_raw_sample::default(); 1 << 16];
    let (mut recorded, mut read, mut lost, mut held) = (0, 0, 0, 0);
    for s in &slots {
        let mut cur = latte_cursor::default();
        loop {
            let mut got = 0usize;
            assert_eq!(latte_reader_read(r, s.index, &mut cur, buf.as_mut_ptr(), buf.len(), &mut got), 0);
            if got == 0 {
                break;
            }
        }
        read += cur.read;
        lost += cur.lost + cur.lost_before;
        recorded += s.gen_base + s.write_idx;
        held += s.write_idx.min(LATTE_DEFAULT_SAMPLES as u64);
    }
    latte_reader_close(r);
    (recorded, read, lost, held)
}

#[test]
fn sixteen_threads_of_fifty_ids_fit_a_container_shm() {
    in_small_shm("case_sixteen_threads_of_fifty_ids");
}

#[test]
#[ignore = "run by sixteen_threads_of_fifty_ids_fit_a_container_shm"]
fn case_sixteen_threads_of_fifty_ids() {
    inside_small_shm();
    let ids = ids("svc", 50);
    let mut c = Default::default();
    record(16, &ids, 1000, || c = common::counters());
    assert_eq!((c.slots_used, c.no_slot_drops, c.unfit_id_drops, c.early_laps), (800, 0, 0, 0), "every (thread, ID) got a ring: {c:?}");
    // Memory by use: at most twice what each ring holds (it grows by
    // doubling) and its header's pages, not 1 MiB a ring.
    assert!(
        c.committed_bytes <= 800 * (2 * 1000 * LATTE_SAMPLE_SIZE as u64 + (8 << 10)),
        "committed {} bytes for 800 rings of 1,000 samples",
        c.committed_bytes
    );
    let (recorded, read, lost, held) = read_all(REGION);
    assert_eq!((recorded, read, lost, held), (800_000, 800_000, 0, 800_000), "recorded, read, lost, held");
}

#[test]
fn a_region_at_its_budget_keeps_recording() {
    in_small_shm("case_eight_threads_of_twenty_ids");
}

#[test]
#[ignore = "run by a_region_at_its_budget_keeps_recording"]
fn case_eight_threads_of_twenty_ids() {
    inside_small_shm();
    let ids = ids("busy", 20);
    let mut c = Default::default();
    record(8, &ids, 200_000, || c = common::counters());
    assert_eq!((c.slots_used, c.no_slot_drops, c.unfit_id_drops), (160, 0, 0), "every (thread, ID) got a ring: {c:?}");
    // 160 whole rings would take 160 MiB: the budget (what the 64 MiB
    // /dev/shm had free, less 8 MiB) stopped them, and they went on at the
    // size they had.
    assert!(c.budget_bytes <= 56 << 20 && c.committed_bytes <= c.budget_bytes + c.slots_used as u64 * 8192, "{c:?}");
    assert!(c.early_laps > 0, "rings lapped at the size they reached: {c:?}");
    let (recorded, read, lost, held) = read_all(REGION);
    assert_eq!(recorded, 8 * 20 * 200_000, "every span is counted in its ring");
    assert_eq!(read + lost, recorded, "read + lost == recorded");
    // Read after the threads exited: every sample the rings hold now is read.
    assert_eq!(read, held, "the rings' samples are all read");
}

#[test]
fn rings_that_grow_and_lap_early_are_followed_exactly() {
    in_small_shm_with("case_followed_while_growing", Some(4));
}

#[test]
#[ignore = "run by rings_that_grow_and_lap_early_are_followed_exactly"]
fn case_followed_while_growing() {
    use latte::follow::{FollowOptions, Follower};
    inside_small_shm();
    // The region exists (LATTE_REGION), with a 4 MiB budget: 4 threads x
    // 20 rings of 100,000 spans grow until it is reached, then lap early.
    latte_start(c"mbu.follow.init".as_ptr(), LATTE_MODE_FAST);
    latte_stop(core::ptr::null(), LATTE_MODE_FAST);
    // A view of the region's chunks as they are: taken again at each look,
    // since the region grows by chunks as the 80 rings are handed out.
    let view = || latte::internals::extract::own_view().unwrap();
    let mut f = Follower::new(FollowOptions::default());
    let mut sink = |_: &latte::follow::Incarnation, _: &[latte_raw_sample]| {};
    let ids = ids("grow", 20);
    // Following begins before the rings exist: all they record is followed.
    f.poll(&view(), &mut sink).unwrap();
    let done = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..100_000 {
                    for id in &ids {
                        latte_start(id.as_ptr(), LATTE_MODE_FAST);
                        latte_stop(core::ptr::null(), LATTE_MODE_FAST);
                    }
                }
                done.fetch_add(1, std::sync::atomic::Ordering::Release);
            });
        }
        while done.load(std::sync::atomic::Ordering::Acquire) < 4 {
            let wait = f.poll(&view(), &mut sink).unwrap();
            std::thread::sleep(std::time::Duration::from_nanos(wait.min(1_000_000)));
        }
    });
    let v = view();
    f.drain(&v, &mut sink).unwrap();
    let c = common::counters();
    // Growth stops at the budget; a new ring's first pages (two at most)
    // are taken outside it.
    assert!(c.early_laps > 0 && c.committed_bytes <= (4 << 20) + c.slots_used as u64 * 8192, "{c:?}");
    assert_eq!((c.slots_used, c.no_slot_drops, c.slot_reuses), (81, 0, 0), "every (thread, ID) got a ring of its own: {c:?}");
    let grow: Vec<u32> = v.ids().unwrap().into_iter().filter(|i| latte::name::name_bytes(&i.name).starts_with(b"grow.")).map(|i| i.token).collect();
    let incs: Vec<_> = f.incarnations().into_iter().filter(|i| grow.contains(&i.id_token)).collect();
    let (read, lost, recorded): (u64, u64, u64) = incs.iter().fold((0, 0, 0), |a, i| (a.0 + i.read, a.1 + i.lost, a.2 + i.recorded()));
    assert_eq!(read + lost, recorded, "read + lost == recorded over {} incarnations", incs.len());
    assert_eq!(recorded, 4 * 20 * 100_000, "every span followed, read or counted lost");
    assert!(incs.len() > 80, "early laps are new generations: {} incarnations of 80 rings", incs.len());
    eprintln!("followed: {read} read, {lost} lost of {recorded} in {} incarnations, {} early laps", incs.len(), c.early_laps);
}

#[test]
fn a_full_shm_stops_growth_not_new_rings() {
    in_small_shm_with("case_budget_past_the_shm", Some(1000));
}

#[test]
#[ignore = "run by a_full_shm_stops_growth_not_new_rings"]
fn case_budget_past_the_shm() {
    inside_small_shm();
    // A budget /dev/shm cannot hold: growth stops where fallocate fails
    // (ENOSPC) and rings lap early; a ring handed out after that still
    // gets its first pages while /dev/shm has room for them, and only the
    // spans of the rings that find none are dropped, counted.
    let (early, late) = (ids("full.a", 20), ids("full.b", 20));
    let mut c = Default::default();
    // The same 8 threads (alive throughout: no ring of an exited thread to
    // hand out) take the later IDs' rings just after growth failed.
    let spans = |ids: &[&'static CStr], n: usize| {
        for _ in 0..n {
            for id in ids {
                latte_start(id.as_ptr(), LATTE_MODE_FAST);
                latte_stop(core::ptr::null(), LATTE_MODE_FAST);
            }
        }
    };
    let done = std::sync::Barrier::new(9);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                spans(&early, 100_000);
                spans(&late, 1_000);
                done.wait();
                done.wait();
            });
        }
        done.wait();
        c = common::counters();
        done.wait();
    });
    assert!(c.early_laps > 0, "growth stopped where /dev/shm was full: {c:?}");
    // 160 rings of the first IDs, then those of the later ones that fit.
    let late_rings = c.slots_used as u64 - 160;
    eprintln!("rings handed out after growth failed that got their first pages: {late_rings} of 160");
    assert_eq!((c.no_slot_drops, c.unfit_id_drops), ((160 - late_rings) * 1_000, 0), "only the rings that found no room dropped their spans: {c:?}");
    let (recorded, read, lost, held) = read_all(REGION);
    assert_eq!(recorded, 8 * 20 * 100_000 + late_rings * 1_000, "every span of a ring is counted in it");
    assert_eq!((read + lost, read), (recorded, held), "read + lost == recorded, every sample held read");
}

/// A count of the calling thread's page faults, taken in user space (a
/// perf software counter, `PERF_COUNT_SW_PAGE_FAULTS`): the faults its own
/// loads and stores trap into. The pages a slow path commits in bulk
/// (`MADV_POPULATE_WRITE`) are not among them: `getrusage` counts those
/// too, though no instruction of the thread waits on a trap for them.
struct PageFaults(std::os::fd::OwnedFd);

impl PageFaults {
    fn open() -> PageFaults {
        // `struct perf_event_attr`, PERF_ATTR_SIZE_VER8 (136 bytes): type
        // PERF_TYPE_SOFTWARE, config PERF_COUNT_SW_PAGE_FAULTS, flags
        // exclude_kernel | exclude_hv (what perf_event_paranoid 2 allows).
        let mut attr = [0u64; 17];
        attr[0] = 1 | (136 << 32);
        attr[1] = 2;
        attr[5] = (1 << 5) | (1 << 6);
        // SAFETY: perf_event_open reads 136 bytes of `attr`; pid 0, cpu -1:
        // this thread on any CPU.
        let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 0) };
        assert!(fd >= 0, "perf_event_open: {}", std::io::Error::last_os_error());
        // SAFETY: a descriptor the kernel just gave us.
        PageFaults(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd as i32) })
    }

    fn count(&self) -> u64 {
        let mut v = 0u64;
        // SAFETY: reads the counter's 8 bytes into `v`.
        let n = unsafe { libc::read(std::os::fd::AsRawFd::as_raw_fd(&self.0), &mut v as *mut u64 as *mut libc::c_void, 8) };
        assert_eq!(n, 8);
        v
    }
}

#[test]
fn no_page_fault_on_start_or_stop_after_an_ids_first_use() {
    // A thread of its own, whose first ID is used through a whole ring's
    // growth first, so that the code of every slow path is paged in.
    std::thread::spawn(|| {
        let faults = PageFaults::open();
        for _ in 0..70_000 {
            latte_start(c"mbu.warm".as_ptr(), LATTE_MODE_FAST);
            latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        }
        for id in [c"mbu.faults.a", c"mbu.faults.b"] {
            // The ID's first use: its ring is handed out and its first
            // pages committed (the slow path pays here).
            latte_start(id.as_ptr(), LATTE_MODE_FAST);
            latte_stop(core::ptr::null(), LATTE_MODE_FAST);
            let before = faults.count();
            // Through the ring's growth to its whole 65,536 samples, and a lap.
            for _ in 0..70_000 {
                latte_start(id.as_ptr(), LATTE_MODE_FAST);
                latte_stop(core::ptr::null(), LATTE_MODE_MID);
            }
            let after = faults.count();
            assert_eq!(after - before, 0, "{id:?}: page faults on the measuring thread after the ID's first use");
        }
    })
    .join()
    .unwrap();
}
