//! Thread states: the calling thread's hot state (`latte_thread`, which the
//! hot path and `include/latte_inline.h` use) and its cold state (`Cold`,
//! Rust-private), created on first use and retired at thread exit.

use super::cache::clear_cache;
use super::exit::{self, Unarmed};
use super::lock::registry_held_here;
use super::registry::region_if_any;
use super::registry::{Cold, COLD, REGISTRY};
use crate::error::Error;
use crate::layout::*;

use core::cell::Cell;
use core::sync::atomic::{compiler_fence, AtomicBool, Ordering};

thread_local! {
    /// The calling thread's active hot state (no destructor: fast access).
    static STATE: Cell<*mut latte_thread> = const { Cell::new(core::ptr::null_mut()) };
    /// The hot state Rust allocated for this thread, if any (pooled at exit
    /// or when a caller's own state takes over).
    static OWN_HOT: Cell<*mut latte_thread> = const { Cell::new(core::ptr::null_mut()) };
    /// Retires the thread at exit where no pthread key could be made.
    static EXIT_GUARD: ExitGuard = const { ExitGuard };
    /// Set when the thread's last try to get a state failed for want of
    /// memory (set or cleared by each `cold_or_create`, set when a hot
    /// state cannot be had): `note_unavailable` counts its spans as
    /// no-slot drops.
    static NO_MEMORY: Cell<bool> = const { Cell::new(false) };
    /// Set while the thread changes which states it has (`switching`).
    static SWITCHING: Cell<bool> = const { Cell::new(false) };
    /// Spans whose Start was refused (and counted) on this thread and
    /// whose Stop has not come yet (`note_refused_start`).
    static REFUSED_OPEN: Cell<u32> = const { Cell::new(0) };
}

/// Runs `f`, a change of the thread's states (making its first, making
/// another active, retiring them at exit), with `SWITCHING` up; None
/// without running it when `SWITCHING` is up already: a signal handler
/// that interrupted its thread's own change, which would otherwise detach
/// or pool a state the change is still filling (its span is refused and
/// counted as a reentrant drop, as under the registry lock). The flag is
/// this thread's alone; the compiler fences keep the change between its
/// two stores as a handler on the thread sees them.
fn switching<R>(f: impl FnOnce() -> Option<R>) -> Option<R> {
    if SWITCHING.try_with(|s| s.replace(true)).unwrap_or(true) {
        return None;
    }
    // Lowered when the change ends, however it ends (a panic the C ABI's
    // guard catches, a cancelled thread's unwind).
    let _lower = Lower;
    compiler_fence(Ordering::SeqCst);
    f()
}

/// Lowers `SWITCHING` when dropped (`switching`).
struct Lower;

impl Drop for Lower {
    fn drop(&mut self) {
        compiler_fence(Ordering::SeqCst);
        let _ = SWITCHING.try_with(|s| s.set(false));
    }
}

/// Whether the calling thread is inside latte's own change of its states
/// or holds the registry lock: a span of a signal handler here is refused.
fn busy_here() -> bool {
    registry_held_here() || SWITCHING.try_with(|s| s.get()).unwrap_or(false)
}

/// The destructor of the key `exit::arm` arms: the thread ends, after its
/// thread-local destructors.
unsafe extern "C" fn on_exit(_: *mut libc::c_void) {
    // The main thread is never retired (`exit.rs`): it runs this only when
    // it calls pthread_exit, before its own thread-local destructors, and
    // the process's exit records on it afterwards.
    if is_main_thread() {
        return;
    }
    // A panic must not unwind into glibc; the thread ends either way.
    let _ = std::panic::catch_unwind(retire);
}

/// Whether the calling thread is the process's main thread.
fn is_main_thread() -> bool {
    // SAFETY: getpid has no memory effects.
    (unsafe { libc::getpid() }) as u32 == crate::tsc::gettid()
}

/// Retires the thread when no key could be made (`exit.rs`), among its
/// thread-local destructors.
struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        // The main thread's thread-local destructors run at exit, before
        // atexit handlers and static destructors, which programs use to
        // time their shutdown and report: its state stays attached (the
        // process is ending; its rings need not be handed to anyone).
        if is_main_thread() {
            return;
        }
        retire();
    }
}

/// Retires the ending thread's states, for good: a change of the thread's
/// states, so a signal handler arriving meanwhile is refused rather than
/// given a state being pooled.
fn retire() {
    exit::mark_retired();
    let _ = switching(|| {
        retire_states();
        Some(())
    });
}

/// The exiting thread's states: detached, its rings closed, pooled.
fn retire_states() {
    let hot = STATE.with(|c| c.replace(core::ptr::null_mut()));
    let cold = COLD.with(|c| c.replace(core::ptr::null_mut()));
    let own = OWN_HOT.with(|c| c.replace(core::ptr::null_mut()));
    if !hot.is_null() {
        // SAFETY: this thread's active state: Rust's or the caller's
        // thread-local, which stays valid while thread-local destructors run.
        let hot = unsafe { &mut *hot };
        // Spans still open now can no longer be recorded (their Stops,
        // from later destructors, find no state): counted here, once.
        if hot.depth > 0 {
            if let Some(r) = region_if_any() {
                bump(&r.header().late_drops, hot.depth as u64);
            }
        }
        detach(hot);
    }
    // The thread's switch event, when its own thread-local destructor did
    // not release it already (it never runs for a thread whose first span
    // came after its thread-local destructors).
    crate::sched::release_ended_thread();
    let mut reg = REGISTRY.lock();
    if !cold.is_null() {
        reg.retire_cold(cold);
    }
    if !own.is_null() {
        reg.free_hots.push(own);
    }
}

/// The calling thread's cold state, created on first use; None while the
/// thread is being torn down, when the region cannot be made, or when the
/// memory for the state cannot be had (`NO_MEMORY` says which).
fn cold_or_create() -> Option<*mut Cold> {
    NO_MEMORY.with(|m| m.set(false));
    let c = COLD.with(|c| c.get());
    if !c.is_null() {
        return Some(c);
    }
    if exit::retired() || registry_held_here() {
        return None;
    }
    // Armed first, and before the registry lock (arming may take the
    // loader's lock): a state nobody would retire is never made.
    let armed = match exit::arm(on_exit) {
        Err(Unarmed::NoKey) => EXIT_GUARD.try_with(|_| ()).map_err(|_| Unarmed::Ending),
        armed => armed,
    };
    if let Err(why) = armed {
        NO_MEMORY.with(|m| m.set(why == Unarmed::NoMemory));
        return None;
    }
    let mut reg = REGISTRY.lock_unless_held()?;
    let made = reg.new_cold();
    // (Without a region, NOMEM is why none could be made: said apart.)
    NO_MEMORY.with(|m| m.set(made == Err(Error::NOMEM) && reg.region.is_some()));
    let c = made.ok()?;
    // Set under the lock: a handler on this thread never makes a second.
    COLD.with(|cell| cell.set(c));
    drop(reg);
    Some(c)
}

/// Makes `t` the calling thread's active state (attaching it on first use,
/// taking the open spans over from the previous active state). None while
/// the thread is being torn down or the region cannot be made.
///
/// # Safety
/// `t` is a state of the calling thread: its own thread-local, or Rust's.
pub unsafe fn activate(t: *mut latte_thread) -> Option<&'static mut latte_thread> {
    let cur = STATE.with(|c| c.get());
    if cur == t {
        // SAFETY: the caller's guarantee; the active state is valid.
        return if t.is_null() { None } else { Some(unsafe { &mut *t }) };
    }
    if t.is_null() {
        return None;
    }
    // SAFETY: forwarded (this function's contract).
    switching(|| unsafe { activate_now(t) })
}

/// `activate` past its quick answers, inside `switching`.
///
/// # Safety
/// As `activate`.
unsafe fn activate_now(t: *mut latte_thread) -> Option<&'static mut latte_thread> {
    let cur = STATE.with(|c| c.get());
    cold_or_create()?;
    // cold_or_create made the region if there was none.
    let mask = region_if_any().map(|r| r.geometry().samples_per_slot as u64 - 1).unwrap_or(0);
    // SAFETY: the caller's guarantee: `t` is this thread's, not aliased now.
    let nt = unsafe { &mut *t };
    detach(nt);
    if cur.is_null() {
        nt.sample_mask = mask;
        nt.top_ring = 0;
    } else {
        // SAFETY: the previous active state of this thread, distinct from `t`.
        let old = unsafe { &mut *cur };
        let d = old.depth as usize;
        nt.sample_mask = old.sample_mask;
        nt.top_ring = old.top_ring;
        nt.frame_tsc[..d].copy_from_slice(&old.frame_tsc[..d]);
        nt.frame_word[..d].copy_from_slice(&old.frame_word[..d]);
        nt.frame_head[..d].copy_from_slice(&old.frame_head[..d]);
        nt.depth = old.depth;
        detach(old);
        if OWN_HOT.with(|c| c.get()) == cur {
            OWN_HOT.with(|c| c.set(core::ptr::null_mut()));
            // Pooled for reuse; kept by nobody (a small leak) when a signal
            // handler interrupted the lock's holder on this thread.
            if let Some(mut reg) = REGISTRY.lock_unless_held() {
                reg.free_hots.push(cur);
            }
        }
    }
    nt.attached = 1;
    STATE.with(|c| c.set(t));
    // The thread's slow path: it opens its switch event here when tracking
    // is on and it never asked; then `t` points at its ring (or at the
    // word that never moves): step B1 of the binding protocol
    // (src/sched/watch.rs).
    crate::sched::attach_thread();
    // SAFETY: `t` is this thread's active state now; detach unbinds it
    // before it could be handed to anyone else.
    unsafe { crate::sched::bind(watch(nt)) };
    Some(nt)
}

/// The calling thread's active state, creating one (Rust's own) on first
/// use. NULL when it cannot be created (during thread teardown, in a
/// signal handler that interrupted latte's slow path or its change of the
/// thread's states, for want of memory, or when no region could be made);
/// a caller that refuses a span or pulse for that counts
/// it (`note_unavailable`), once per span: at its Start, not its Stop.
#[inline(always)]
pub fn current() -> *mut latte_thread {
    let t = STATE.with(|c| c.get());
    if !t.is_null() {
        return t;
    }
    current_slow()
}

#[cold]
#[inline(never)]
fn current_slow() -> *mut latte_thread {
    if registry_held_here() {
        return core::ptr::null_mut();
    }
    switching(|| {
        cold_or_create()?;
        let Some(h) = REGISTRY.lock().new_hot() else {
            NO_MEMORY.with(|m| m.set(true));
            return None;
        };
        OWN_HOT.with(|c| c.set(h));
        // SAFETY: a state Rust just took for this thread.
        unsafe { activate_now(h) }.map(|t| t as *mut latte_thread)
    })
    .unwrap_or(core::ptr::null_mut())
}

/// A span or pulse after the thread's recorder was torn down: counted.
pub fn note_late_drop() {
    if let Some(r) = region_if_any() {
        bump(&r.header().late_drops, 1);
    }
}

/// A span or pulse whose thread state could not be had: refused inside a
/// signal handler that interrupted the registry lock's holder or a change
/// of its thread's states (`switching`), after the
/// thread's recorder was torn down, or for want of memory for the state.
/// Counted as a reentrant, late or no-slot drop. (In a process where no
/// region could be made there is nowhere to count it:
/// `latte_region_get_counters` then fails with the reason.)
pub fn note_unavailable() {
    if busy_here() {
        // Relaxed: a statistic.
        crate::counters::REENTRANT_DROPS.fetch_add(1, Ordering::Relaxed);
    } else if NO_MEMORY.try_with(|m| m.get()).unwrap_or(false) {
        if let Some(r) = region_if_any() {
            bump(&r.header().no_slot_drops, 1);
        }
        say_no_memory_once();
    } else {
        note_late_drop();
    }
}

/// A Start refused for want of a thread state (`note_unavailable`), from
/// the library's calls or the Rust API (the inline path opens a sink
/// instead): counted there, and remembered, so that its Stop, which may
/// find a state by then (memory came back), is not counted again as an
/// orphan (`take_refused_start`).
pub fn note_refused_start() {
    note_unavailable();
    let _ = REFUSED_OPEN.try_with(|c| c.set(c.get().saturating_add(1)));
}

/// Whether a Stop with nothing open closes a Start that was refused and
/// counted (`note_refused_start`); it is then not an orphan. A signal
/// handler's refused span, nested in the thread's, is balanced by its own
/// Stop before the handler returns.
pub fn take_refused_start() -> bool {
    REFUSED_OPEN
        .try_with(|c| {
            let n = c.get();
            c.set(n.saturating_sub(1));
            n > 0
        })
        .unwrap_or(false)
}

/// Says once per process, on standard error (unless `LATTE_QUIET=1`),
/// that spans are counted rather than recorded for want of memory for a
/// thread's state (its hot or cold state, or its table of rings).
/// Allocates nothing: memory has run out.
#[cold]
pub(super) fn say_no_memory_once() {
    static SAID: AtomicBool = AtomicBool::new(false);
    // Relaxed: only whether the line was said; a race says it twice at most.
    if SAID.load(Ordering::Relaxed) || SAID.swap(true, Ordering::Relaxed) || crate::region::quiet() {
        return;
    }
    let msg = "latte: out of memory for the recorder's own tables: spans that cannot be recorded are counted (no-slot or unfit-ID drops)\n";
    // SAFETY: writes a static buffer to fd 2; a closed stderr loses the line.
    unsafe { libc::write(2, msg.as_ptr() as *const libc::c_void, msg.len()) };
}

/// The calling thread's active state if it has one (never creates it).
pub fn current_if_any() -> *mut latte_thread {
    STATE.try_with(|c| c.get()).unwrap_or(core::ptr::null_mut())
}

/// The calling thread's index, once it has a cold state. Read through the
/// state's pointer without a reference to the state: a signal handler may
/// ask while the code it interrupted holds the state (`resolve_slot`).
pub(super) fn cold_thread_idx() -> Option<u32> {
    let c = COLD.try_with(|c| c.get()).unwrap_or(core::ptr::null_mut());
    if c.is_null() {
        return None;
    }
    // SAFETY: the calling thread's own cold state, live while `COLD` holds
    // it; `thread_idx` is written when the state is given to this thread,
    // before `COLD` is set, and not again while the thread runs.
    Some(unsafe { core::ptr::addr_of!((*c).thread_idx).read() })
}

/// The fields of `t` that say where its thread's switch count lives
/// (`sched::Watch`).
pub(super) fn watch(t: &mut latte_thread) -> crate::sched::Watch {
    crate::sched::Watch { head: &mut t.switch_head, base: &mut t.switch_base }
}

/// Empties a hot state's cache and stack, so that its next use (a late
/// Start or Stop, or a Start through it after it lost the thread to
/// another state) goes through a slow path. Keeps its mask.
pub(super) fn detach(t: &mut latte_thread) {
    t.depth = 0;
    t.attached = 0;
    // Only the active state points at the thread's switch ring, which is
    // unmapped when the thread exits: a late pulse through this state reads
    // a word that never moves (step B2 of src/sched/watch.rs).
    // SAFETY: `t`'s own field; unbinding only forgets it.
    unsafe { crate::sched::unbind(watch(t)) };
    clear_cache(t);
}
