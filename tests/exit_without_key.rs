//! A process that holds every pthread key glibc has when latte's first
//! thread state is made: threads are retired at their end all the same, by
//! a thread-local guard, and spans of thread-local destructors that run
//! after it are counted as late drops, never lost silently. Its own
//! process: the key is tried once per process.

mod common;
use common::*;
use latte::internals::extract::own_view;
use latte::internals::ffi::*;
use latte::layout::*;
use std::ffi::CStr;

/// The slot states of `name`'s rings.
fn states_of(name: &[u8]) -> Vec<u32> {
    let v = own_view().unwrap();
    let tok = v.ids().unwrap().into_iter().find(|i| latte::name::name_bytes(&i.name) == name).unwrap().token;
    v.slots().unwrap().iter().filter(|s| s.id_token == tok).map(|s| s.state).collect()
}

#[test]
fn without_a_key_a_thread_local_guard_retires_threads() {
    let mut keys = Vec::new();
    loop {
        let mut k: libc::pthread_key_t = 0;
        // SAFETY: a valid out-pointer, no destructor.
        if unsafe { libc::pthread_key_create(&mut k, None) } != 0 {
            break;
        }
        keys.push(k);
    }
    assert!(!keys.is_empty(), "glibc gave no key at all");

    struct RecordsOnDrop(&'static CStr);
    impl Drop for RecordsOnDrop {
        fn drop(&mut self) {
            latte_start(self.0.as_ptr(), LATTE_MODE_FAST);
            latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        }
    }
    thread_local! {
        static LATE: RecordsOnDrop = const { RecordsOnDrop(c"nokey.late") };
    }
    std::thread::spawn(|| {
        LATE.with(|_| ()); // registered before latte's guard: destroyed after it
        span(c"nokey.body", LATTE_MODE_FAST, LATTE_MODE_FAST);
    })
    .join()
    .unwrap();
    let c = counters();
    assert_eq!(c.late_drops, 1, "the destructor's span after the guard is counted");
    assert!(snapshot(c"nokey.late").is_empty());
    assert_eq!(snapshot(c"nokey.body").len(), 1);
    assert_eq!(states_of(b"nokey.body"), [LATTE_SLOT_CLOSED], "the thread was retired");

    for k in keys {
        // SAFETY: keys this test made; nothing uses them.
        unsafe { libc::pthread_key_delete(k) };
    }
    // latte does not try again: the guard still serves.
    std::thread::spawn(|| span(c"nokey.after", LATTE_MODE_FAST, LATTE_MODE_FAST)).join().unwrap();
    assert_eq!(states_of(b"nokey.after"), [LATTE_SLOT_CLOSED]);
}
