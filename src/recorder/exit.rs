//! When a thread's states are retired: at the thread's end, by the
//! destructor of a pthread key this file arms (the destructor itself,
//! `thread::on_exit`, is the caller's: this file calls nothing of the
//! recorder).
//!
//! glibc runs a thread's key destructors after every thread-local
//! destructor of the thread (its `start_thread` calls `__call_tls_dtors`,
//! then the keys' destructors): the spans that C++ `thread_local` objects
//! and Rust `thread_local!` values record while they are destroyed are
//! kept. Only spans of key destructors that run after latte's (keys of a
//! higher index than latte's, or a later round of them) find the thread
//! retired, and are counted as late drops.
//!
//! Arming stores one word in the thread's descriptor for the first 32 keys
//! of a process, and allocates nothing; past them glibc allocates a block
//! per thread, whose failure is a want of memory like any other (the state
//! is refused and counted). Registering a thread-local destructor instead
//! would allocate (glibc's record of it), and glibc ends the process when
//! that fails.
//!
//! The main thread is not retired: its end is most often the process's,
//! whose exit runs its thread-local destructors, atexit handlers and
//! static destructors, which programs use to time their shutdown and
//! report (and a main thread that calls `pthread_exit` runs its key
//! destructors before its thread-local ones). A main thread that ends with
//! `pthread_exit` while other threads go on keeps its states and rings
//! live for the rest of the process (so does a fork child's thread, the
//! child's main).
//!
//! A thread whose first span comes from another library's key destructor
//! in glibc's last round of them (`PTHREAD_DESTRUCTOR_ITERATIONS`, 4) is
//! never retired: its rings stay live and its states are not reused.
//!
//! Where no key can be had (the process holds all of glibc's 1,024), the
//! caller falls back to a Rust thread-local guard (`thread.rs`), which
//! retires the thread among the thread-local destructors: spans of those
//! destroyed after it are late.
//!
//! A key's destructor must stay mapped for as long as a thread may end:
//! when the key is made, the object that holds it (`liblatte.so`, or a
//! plugin linked with `liblatte.a`) is made undeletable (`RTLD_NODELETE`),
//! so a `dlclose` after the first span leaves it loaded. Where that cannot
//! be done, no key is made (the thread-local guard serves: glibc keeps an
//! object loaded while a thread has its thread-local destructors pending).

use core::cell::Cell;
use core::sync::atomic::{AtomicU32, Ordering};

/// `KEY` while there is no key yet: the first `arm` makes one.
const KEY_UNMADE: u32 = 0;
/// `KEY` when no key could be made (the Rust thread-local guard serves).
const KEY_NONE: u32 = u32::MAX;

/// The pthread key, plus one; `KEY_UNMADE` or `KEY_NONE`. Made without
/// the registry lock (the pin takes the loader's lock, which a thread in
/// `dlopen` holds while a constructor there may wait for the registry), by
/// whichever thread comes first; published with a compare-exchange
/// (AcqRel/Acquire: a thread that reads the key sees it made).
static KEY: AtomicU32 = AtomicU32::new(KEY_UNMADE);

/// The value a thread's key holds once armed: any non-null pointer (glibc
/// calls the destructor only for a non-null value).
const ARMED: *const libc::c_void = core::ptr::dangling();

thread_local! {
    /// Set when the thread's states were retired: from then on it never
    /// makes new ones (its later spans are late drops).
    static RETIRED: Cell<bool> = const { Cell::new(false) };
}

/// Why a thread's exit could not be armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unarmed {
    /// The thread is ending: it makes no state any more.
    Ending,
    /// glibc could not allocate the thread's block of key values.
    NoMemory,
    /// No key could be made: the caller retires the thread another way.
    NoKey,
}

/// Whether the calling thread's states were retired (it is ending).
pub(super) fn retired() -> bool {
    RETIRED.try_with(|r| r.get()).unwrap_or(true)
}

/// Marks the calling thread's states retired, for good.
pub(super) fn mark_retired() {
    let _ = RETIRED.try_with(|r| r.set(true));
}

/// Arms `on_exit` to run when the calling thread ends, after its
/// thread-local destructors. Called before the thread's first state is
/// made, without the registry lock, and always with the same `on_exit`
/// (the key's destructor is the first caller's).
pub(super) fn arm(on_exit: unsafe extern "C" fn(*mut libc::c_void)) -> Result<(), Unarmed> {
    if retired() {
        return Err(Unarmed::Ending);
    }
    let k = key(on_exit).ok_or(Unarmed::NoKey)?;
    // SAFETY: the published key, which this module never deletes.
    match unsafe { libc::pthread_setspecific(k, ARMED) } {
        0 => Ok(()),
        _ => Err(Unarmed::NoMemory),
    }
}

/// The key, made on first use; None when none can be had (glibc has no
/// key left, or the object holding `on_exit` cannot be pinned).
fn key(on_exit: unsafe extern "C" fn(*mut libc::c_void)) -> Option<libc::pthread_key_t> {
    let seen = match KEY.load(Ordering::Acquire) {
        KEY_UNMADE => {
            let mut k: libc::pthread_key_t = 0;
            // SAFETY: `k` is a valid out-pointer; `on_exit` has the
            // destructor's signature (the caller's: it must not unwind).
            let made = pin_object_of(on_exit as *const libc::c_void) && unsafe { libc::pthread_key_create(&mut k, Some(on_exit)) } == 0;
            let mine = if made { k.wrapping_add(1) } else { KEY_NONE };
            match KEY.compare_exchange(KEY_UNMADE, mine, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => mine,
                Err(theirs) => {
                    if made {
                        // SAFETY: the key just made, which nobody armed.
                        unsafe { libc::pthread_key_delete(k) };
                    }
                    theirs
                }
            }
        }
        seen => seen,
    };
    (seen != KEY_NONE).then(|| seen - 1)
}

/// `dladdr1`'s request for the object's link map (glibc's `<dlfcn.h>`).
const RTLD_DL_LINKMAP: libc::c_int = 2;

/// The first fields of glibc's `struct link_map` (`<link.h>`, public ABI).
#[repr(C)]
struct LinkMapHead {
    /// Where the object is loaded.
    l_addr: usize,
    /// The object's file name; empty for the program itself.
    l_name: *const libc::c_char,
}

/// Makes the object that holds `code` undeletable: a later `dlclose`
/// leaves it loaded. True when done, or when it is the program itself
/// (dynamically or statically linked).
fn pin_object_of(code: *const libc::c_void) -> bool {
    // SAFETY: an all-zero Dl_info is a valid out-value.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let mut map: *mut libc::c_void = core::ptr::null_mut();
    // SAFETY: valid out-pointers; `code` is an address of this object.
    if unsafe { libc::dladdr1(code, &mut info, &mut map, RTLD_DL_LINKMAP) } == 0 || map.is_null() {
        // In no object the loader knows: a statically linked program,
        // which nothing unloads.
        return true;
    }
    // SAFETY: glibc's link map of a loaded object, which stays while the
    // object does (and this code runs in it); its name is NUL-terminated.
    let name = unsafe { (*(map as *const LinkMapHead)).l_name };
    // SAFETY: as above.
    if name.is_null() || unsafe { *name } == 0 {
        return true; // the program itself is never unloaded
    }
    // SAFETY: a NUL-terminated name; RTLD_NOLOAD loads nothing, it only
    // takes a reference to the object already loaded (kept: the pin).
    let pinned = !unsafe { libc::dlopen(name, libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) }.is_null();
    if !pinned {
        // Leaves no error of latte's for the program's next dlerror().
        // SAFETY: dlerror takes no argument; it clears the calling thread's
        // loader error.
        unsafe { libc::dlerror() };
    }
    pinned
}
