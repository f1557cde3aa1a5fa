//! `latte serve`'s reading thread: a pass over every region once per
//! interval, the paced looks at busy rings between passes, and a look at
//! the names when /dev/shm changes (`export` says what each reads and
//! counts).

use crate::export::{lock, State};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// After a change in /dev/shm, how long the reader lets the burst settle
/// before it looks at the names.
const CHANGE_SETTLE: Duration = Duration::from_millis(2);

/// The read pass, once per `every` (never two back to back after a slow
/// one), and at once, with a look at the names, when /dev/shm changes
/// (`ShmWatch`): a region is opened when it is published and read one last
/// time when its name goes or is taken over, however fast a service
/// restarts. Between passes, each ring is read again when its writer may
/// have filled a quarter of it (`State::follow`), so that a thread
/// recording flat out is followed whole.
pub fn reader(state: &Mutex<State>, every: Duration) {
    latte::pace::tight_timer_slack();
    let watch = crate::shm_watch::ShmWatch::new();
    let mut stalls = crate::stall::Stalls::new();
    let mut next = Instant::now() + every;
    // When a change in /dev/shm was seen: the names are looked at once the
    // burst has settled (a service publishing its region makes several
    // changes), the looks going on meanwhile.
    let mut changed: Option<Instant> = None;
    loop {
        let look = guarded(state, |st| st.follow()).flatten().unwrap_or(every);
        let now = Instant::now();
        let scan_at = changed.map(|t| t + CHANGE_SETTLE);
        let due = scan_at.map_or(next, |t| t.min(next));
        if due > now {
            let until = (due - now).min(look);
            let asked = now + until;
            let moved = match &watch {
                Some(w) => w.wait(until),
                None => {
                    std::thread::sleep(until);
                    false
                }
            };
            if moved {
                changed.get_or_insert_with(Instant::now);
            }
            if let Some(stall) = stalls.at_wake_up((!moved).then_some(asked)) {
                guarded(state, |st| st.note_stall(stall));
            }
            continue;
        }
        if scan_at.is_some_and(|t| t <= now) {
            changed = None;
            guarded(state, |st| {
                st.scan_next_pass();
                st.pass(Instant::now())
            });
            continue;
        }
        next = (next + every).max(Instant::now());
        guarded(state, |st| st.pass(Instant::now()));
    }
}

/// Runs `f` on the state under its lock. A panic is a bug: said, and the
/// next pass goes on (None).
fn guarded<T>(state: &Mutex<State>, f: impl FnOnce(&mut State) -> T) -> Option<T> {
    let mut st = lock(state);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut st)));
    if r.is_err() {
        crate::exit::say("serve", "a read pass failed; the next one goes on");
    }
    r.ok()
}
