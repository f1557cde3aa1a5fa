//! A fault handler of latte's that leaves every other fault to the program:
//! installed once over the action the process had (which it keeps), it
//! passes any fault that is not latte's to that action, and puts it back
//! when the library is unloaded or the process exits.
//!
//! `fault` owns one, for SIGBUS on a shrunk object.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// [`Chain::state`]: no handler yet.
const NONE: u32 = 0;
/// [`Chain::state`]: a thread is installing the handler.
const BUSY: u32 = 1;
/// [`Chain::state`]: the handler is installed.
const DONE: u32 = 2;

/// The signature of an `SA_SIGINFO` handler.
pub type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// One signal's handler of ours and the action from before it.
pub struct Chain {
    signal: libc::c_int,
    /// [`NONE`], [`BUSY`] or [`DONE`]. Not a `Once`: a fork child of a
    /// process that was installing would wait forever on it; here a caller
    /// that finds it busy goes on without waiting.
    state: AtomicU32,
    /// The action before ours (written once, before ours is installed).
    previous: UnsafeCell<MaybeUninit<libc::sigaction>>,
    /// `previous` is written (release after the write).
    have_previous: AtomicBool,
}

// SAFETY: `previous` is written once, by the thread that won `state`, before
// `have_previous` is stored with release; it is read only after an acquire
// load of `have_previous` that saw true.
unsafe impl Sync for Chain {}

impl Chain {
    /// A chain for `signal`, nothing installed yet.
    pub const fn new(signal: libc::c_int) -> Chain {
        Chain { signal, state: AtomicU32::new(NONE), previous: UnsafeCell::new(MaybeUninit::uninit()), have_previous: AtomicBool::new(false) }
    }

    /// Installs `handler` (once) with `SA_SIGINFO | SA_ONSTACK`.
    pub fn install(&self, handler: Handler) {
        // Acquire/Release: whoever sees DONE also sees `previous` written.
        if self.state.compare_exchange(NONE, BUSY, Ordering::Acquire, Ordering::Acquire).is_err() {
            return; // installed, or being installed by someone else
        }
        // SAFETY: plain sigaction calls with valid, zero-initialised
        // structs; `previous` is written here only (we won the race to
        // BUSY), before the handler that reads it exists (`have_previous`
        // is stored with release after it).
        unsafe {
            let mut act: libc::sigaction = core::mem::zeroed();
            act.sa_sigaction = handler as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            let mut old: libc::sigaction = core::mem::zeroed();
            if libc::sigaction(self.signal, core::ptr::null(), &mut old) == 0 {
                (*self.previous.get()).write(old);
                self.have_previous.store(true, Ordering::Release);
                libc::sigaction(self.signal, &act, core::ptr::null_mut());
            }
        }
        self.state.store(DONE, Ordering::Release);
    }

    /// A fault that is not latte's: the previous action decides. A handler
    /// is called; for the default action, the default is put back and the
    /// faulting instruction, run again on return, ends the process as it
    /// would have without us.
    pub fn forward(&self, sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // Acquire: pairs with the release in `install`.
        if self.have_previous.load(Ordering::Acquire) {
            // SAFETY: `previous` was fully written before `have_previous`.
            let prev = unsafe { (*self.previous.get()).assume_init_ref() };
            let h = prev.sa_sigaction;
            if h != libc::SIG_DFL && h != libc::SIG_IGN {
                if prev.sa_flags & libc::SA_SIGINFO != 0 {
                    // SAFETY: the previous handler was installed with SA_SIGINFO, so it takes three arguments.
                    let f: Handler = unsafe { core::mem::transmute(h) };
                    f(sig, info, ctx);
                } else {
                    // SAFETY: a plain handler takes the signal number.
                    let f: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(h) };
                    f(sig);
                }
                return;
            }
        }
        // SAFETY: a valid zeroed sigaction with SIG_DFL.
        unsafe {
            let mut dfl: libc::sigaction = core::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(self.signal, &dfl, core::ptr::null_mut());
        }
    }

    /// Puts the action from before ours back, if ours (`handler`) is the one
    /// installed: a handler left behind after `dlclose` would point into
    /// unmapped code, and the next unrelated fault would become another.
    pub fn restore(&self, handler: Handler) {
        // Acquire: pairs with the release in `install`.
        if self.state.load(Ordering::Acquire) != DONE || !self.have_previous.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: plain sigaction calls with valid structs; `previous` was
        // fully written before `have_previous` (release/acquire).
        unsafe {
            let mut cur: libc::sigaction = core::mem::zeroed();
            if libc::sigaction(self.signal, core::ptr::null(), &mut cur) != 0 || cur.sa_sigaction != handler as *const () as usize {
                return; // someone installed another handler since: leave it
            }
            libc::sigaction(self.signal, (*self.previous.get()).assume_init_ref(), core::ptr::null_mut());
        }
    }
}
