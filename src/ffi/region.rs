use super::*;
use crate::recorder;
use crate::region::latte_region_config;
use core::ffi::{c_char, c_int, CStr};

/// Moves recording into a new POSIX shared-memory object `shm_name` (one
/// leading '/', no other; not `/.`, `/..` or `/.latte-new-`..., the form of
/// the names latte makes a region under before it publishes it: -EINVAL)
/// with the defaults (a first chunk of 16 slots of
/// 65,536 samples, or as many as `LATTE_RING_SAMPLES` sets, growing as
/// needed; mode 0600). -EALREADY when a shared
/// region is installed, -ENOSPC when /dev/shm cannot hold it. A region of
/// that name whose producer is gone (exited or killed) is replaced;
/// -EEXIST when the name belongs to a live producer or to an object that is
/// not a latte region; -EACCES when it is another user's that this process
/// may not open for writing.
///
/// Called after recording began (a span in a static constructor, an early
/// thread), it moves the private region, with every sample recorded so
/// far, into the object where it stands, then gives it the name: the
/// region keeps its geometry (its rings' samples, its first chunk of
/// 256 slots; capacities that differ are -EBUSY), and the threads that
/// record meanwhile wait in the kernel on their next store into it until
/// the move is over (3 ms for a region of one ring, 23-28 ms for 64 full
/// rings, on a 2-vCPU VM; see docs/design.md). -EBUSY when the kernel
/// cannot pause them (userfaultfd write-protection: Linux 6.4 or later,
/// and not forbidden by a seccomp profile, as container runtimes' defaults
/// do for unprivileged containers): the region then stays private. -EEXIST
/// for a taken name before anything moves. -EBUSY in a fork child of a
/// LATTE_REGION producer (-EALREADY in one of a producer whose region came
/// from this call, as in its parent). The region `LATTE_REGION` named,
/// once recorded into, takes the name asked for instead (its old name is
/// removed).
///
/// A program that makes no such call records into private memory, unless
/// its environment names a region: `LATTE_REGION=/name` makes that region
/// (default capacities) when the process first records, and an empty value
/// or `auto` names it `/latte-PROGRAM-PID` (PROGRAM: the last component of
/// `argv[0]`, bytes other than `[A-Za-z0-9._-]` made '_'; `-2` ... `-16`
/// after it while that is a live producer's or not a region). Should that
/// region not be made (a bad name, a live producer holding it, a full
/// /dev/shm), recording goes to private memory and one line on standard
/// error says why, unless `LATTE_QUIET=1`. The variable is read once, and
/// not at all when this call comes first; called before the first span,
/// this replaces the region the variable named (removing its name), as it
/// replaces the private one.
///
/// `LATTE_RING_SAMPLES=N` (a power of two from 2 to 2^31) makes the rings
/// of every region made without a ring size (the private region, the one
/// `LATTE_REGION` names, this call's, a config whose `samples_per_slot` is
/// 0) hold N samples instead of 65,536: smaller rings cost less per span
/// when a thread records many IDs, and keep fewer spans; rings under 256
/// samples cannot calibrate (-ENOBUFS). A value that cannot be used keeps
/// 65,536, as do the private and the `LATTE_REGION` region when N is above
/// 65,536 and memory, the address space or /dev/shm cannot hold their first
/// rings of N samples (and every later region without a ring size); each
/// is said once on standard error, unless `LATTE_QUIET=1`. Read once, when
/// the first region without a ring size is made.
#[no_mangle]
pub extern "C" fn latte_init_shared_region(shm_name: *const c_char) -> c_int {
    latte_init_shared_region_with(shm_name, core::ptr::null())
}

/// `latte_init_shared_region` with capacities, permissions and what to do
/// when the name is taken (`if_taken`: `LATTE_IF_TAKEN_FAIL` keeps a dead
/// producer's region and fails with -EEXIST); NULL or zero fields take the
/// defaults; -EINVAL for a value out of range.
#[no_mangle]
pub extern "C" fn latte_init_shared_region_with(shm_name: *const c_char, config: *const latte_region_config) -> c_int {
    guard(PANICKED, || {
        if shm_name.is_null() {
            return -libc::EINVAL;
        }
        let cfg = if config.is_null() {
            latte_region_config::default()
        } else {
            // SAFETY: checked non-null; a valid config by contract.
            unsafe { *config }
        };
        // SAFETY: checked non-null; NUL-terminated by contract.
        let name = unsafe { CStr::from_ptr(shm_name) }.to_bytes();
        code(recorder::install_shared(name, &cfg))
    })
}

/// Removes the shared-memory object `shm_name` (readers that have it open
/// keep their mapping).
#[no_mangle]
pub extern "C" fn latte_region_unlink(shm_name: *const c_char) -> c_int {
    guard(PANICKED, || {
        if shm_name.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: checked non-null; NUL-terminated by contract.
        code(crate::shm::unlink(unsafe { CStr::from_ptr(shm_name) }.to_bytes()))
    })
}
