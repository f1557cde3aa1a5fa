//! What the environment sets for every region of the process, read once
//! and kept: `LATTE_QUIET` (no lines on standard error) and
//! `LATTE_RING_SAMPLES` (the samples a ring holds where no size is asked).
//!
//! Each is read at its first use, which the registry makes when it installs
//! a region (under its lock), or a region's maker when it resolves its
//! capacities; never on the recording path. Later uses read the kept value:
//! the lines are said where memory may have run out, or from a signal
//! handler's slow path, where reading the environment (a lock and a copy)
//! is not safe.

use crate::layout::LATTE_DEFAULT_SAMPLES;
use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};

/// The variable that silences latte's lines on standard error (never its
/// counts).
pub const LATTE_QUIET_ENV: &str = "LATTE_QUIET";

/// The variable that sets how many samples each (thread, ID) ring holds in
/// a region made without asking for a size: the private region, the one
/// `LATTE_REGION` names, and a shared region whose
/// `latte_region_config.samples_per_slot` is 0.
pub const LATTE_RING_SAMPLES_ENV: &str = "LATTE_RING_SAMPLES";

/// Whether `LATTE_QUIET=1`: the one-time lines on standard error (a region
/// that cannot grow, one that cannot be made from `LATTE_REGION`, a
/// `LATTE_RING_SAMPLES` that cannot be used) are not written.
pub fn quiet() -> bool {
    // Relaxed: a value read on its own; two first readers store the same.
    match QUIET.load(Ordering::Relaxed) {
        QUIET_UNREAD => {
            let q = std::env::var_os(LATTE_QUIET_ENV).is_some_and(|v| v == "1");
            QUIET.store(if q { QUIET_YES } else { QUIET_NO }, Ordering::Relaxed);
            q
        }
        v => v == QUIET_YES,
    }
}

/// Writes `latte: ` and `line` to standard error as one line, unless
/// `LATTE_QUIET=1`. Allocates nothing (memory may be what ran out):
/// standard error is unbuffered, and the line goes out piece by piece. A
/// failed write (standard error closed) loses the line; recording goes on.
pub fn say(line: core::fmt::Arguments<'_>) {
    if quiet() {
        return;
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "latte: {line}");
}

/// `LATTE_QUIET` as `quiet` read it: `QUIET_UNREAD`, `QUIET_YES` or `QUIET_NO`.
static QUIET: AtomicU8 = AtomicU8::new(QUIET_UNREAD);
/// `quiet` has not read the environment yet.
const QUIET_UNREAD: u8 = 0;
/// `LATTE_QUIET=1`.
const QUIET_YES: u8 = 1;
/// `LATTE_QUIET` unset or not `1`.
const QUIET_NO: u8 = 2;

/// The samples a ring holds where no size is asked: `LATTE_RING_SAMPLES`
/// when it is a power of two from 2 to 2^31 (decimal), else
/// `LATTE_DEFAULT_SAMPLES` (the original's `MAX_SAMPLES`); an empty value
/// is no value. A value that is set but cannot be used is said once on
/// standard error, unless `LATTE_QUIET=1`; so is one whose rings memory
/// cannot hold (`fall_back`), after which this is the default.
///
/// Smaller rings cost less per span when a thread records many IDs (their
/// lines stay in the caches) and keep fewer spans (docs/figures.md, "Ring
/// size and the cost of many IDs").
pub fn ring_samples() -> u32 {
    // Relaxed: a value read on its own; two first readers store the same
    // (the environment is not changed while a region is made).
    match RING_SAMPLES.load(Ordering::Relaxed) {
        RING_SAMPLES_UNREAD => {
            let value = std::env::var_os(LATTE_RING_SAMPLES_ENV).filter(|v| !v.is_empty());
            let n = match value.as_deref().map(|v| v.to_str().and_then(parse_ring_samples).ok_or(v)) {
                None => LATTE_DEFAULT_SAMPLES,
                Some(Ok(n)) => n,
                Some(Err(bad)) => {
                    say_unusable(&bad.to_string_lossy());
                    LATTE_DEFAULT_SAMPLES
                }
            };
            RING_SAMPLES.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

/// Gives up a ring size `LATTE_RING_SAMPLES` set above the default, when
/// no region of it can be had (`why`: no memory or address space for the
/// private region's first rings, no room in `/dev/shm` for the
/// `LATTE_REGION` region): `ring_samples` is `LATTE_DEFAULT_SAMPLES` from
/// now on, for every later region too, which is said once on standard
/// error, unless `LATTE_QUIET=1`. False (nothing changed) when the ring
/// size is no bigger than the default: default rings would need more.
pub fn fall_back(why: &str) -> bool {
    let n = ring_samples();
    if n <= LATTE_DEFAULT_SAMPLES {
        return false;
    }
    // Relaxed: a value read on its own (see `ring_samples`); the swap lets
    // one caller only give `n` up and say so, however many ask at once.
    if RING_SAMPLES.swap(LATTE_DEFAULT_SAMPLES, Ordering::Relaxed) != n {
        return false;
    }
    say(format_args!(
        "{LATTE_RING_SAMPLES_ENV}={n}: {why} for rings of {n} samples ({} bytes each): rings hold {LATTE_DEFAULT_SAMPLES} samples",
        n as u64 * crate::layout::LATTE_SAMPLE_SIZE as u64
    ));
    true
}

/// `LATTE_RING_SAMPLES` as `ring_samples` resolved it, or
/// `RING_SAMPLES_UNREAD` (never a ring size: sizes are at least 2).
static RING_SAMPLES: AtomicU32 = AtomicU32::new(RING_SAMPLES_UNREAD);
/// `ring_samples` has not read the environment yet.
const RING_SAMPLES_UNREAD: u32 = 0;

/// A `LATTE_RING_SAMPLES` value as a ring size: decimal digits making a
/// power of two from 2 to 2^31; None otherwise.
pub fn parse_ring_samples(v: &str) -> Option<u32> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<u32>().ok().filter(|n| *n >= 2 && n.is_power_of_two())
}

/// `LATTE_BUDGET_MIB` (`commit::LATTE_BUDGET_ENV`): a region's ring
/// memory budget in MiB, decimal digits; unset, empty or 0: None. A value
/// that cannot be used is said once on standard error (unless
/// `LATTE_QUIET=1`) and is no value. Read when a region is made.
pub fn budget_mib() -> Option<u64> {
    let v = std::env::var_os(super::commit::LATTE_BUDGET_ENV).filter(|v| !v.is_empty())?;
    match v.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())).and_then(|s| s.parse::<u64>().ok()) {
        Some(0) => None,
        Some(n) => Some(n),
        None => {
            static TOLD: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
            // Relaxed: one caller wins the swap.
            if !TOLD.swap(true, Ordering::Relaxed) {
                say(format_args!("{}={:?} is not a number of MiB in decimal digits: no budget is set", super::commit::LATTE_BUDGET_ENV, v.to_string_lossy()));
            }
            None
        }
    }
}

/// The one line on standard error for a value that cannot be used.
fn say_unusable(value: &str) {
    say(format_args!(
        "{LATTE_RING_SAMPLES_ENV}={value:?} is not a power of two from 2 to 2147483648 in decimal digits: rings hold {LATTE_DEFAULT_SAMPLES} samples"
    ));
}

#[cfg(test)]
mod tests {
    use super::parse_ring_samples;

    #[test]
    fn ring_sizes() {
        assert_eq!(parse_ring_samples("1024"), Some(1024));
        assert_eq!(parse_ring_samples("2"), Some(2));
        assert_eq!(parse_ring_samples("2147483648"), Some(1 << 31));
        for bad in ["", "0", "1", "1000", "-1024", "+1024", " 1024", "1024 ", "1k", "4294967296", "0x400"] {
            assert_eq!(parse_ring_samples(bad), None, "{bad:?}");
        }
    }
}
