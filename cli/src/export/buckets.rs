//! The duration histogram's bucket of a sample, in a few instructions: a
//! busy thread's ring is read at tens of millions of samples a second, and
//! a binary search over 63 bounds (six unpredictable branches) would cost
//! the reader more than copying the samples does.
//!
//! A duration `d` in cycles is placed by its top bit `e` and the 3 bits
//! below it `m`: every duration with the same (e, m) lies within a factor
//! 9/8 of the smallest one, less than the factor sqrt(2) between two
//! bounds, so at most one bound falls among them. Two tables give, per
//! (e, m), the bucket of the smallest and the first duration past that
//! bucket's bound; one comparison of integers places `d`. Durations under
//! 8 cycles have a cell each, so the table is exact at any cycles per ns.

use super::{bound_ns, FINITE_BUCKETS};

/// Durations' top-bit positions (a `u64`) times the 3 bits below it.
const CELLS: usize = 64 * 8;

/// The tables of one cycles-per-ns figure.
pub(crate) struct Buckets {
    /// Per cell (e, m), the bucket of its smallest duration: how many
    /// bounds lie below it (`FINITE_BUCKETS`: +Inf).
    first: [u8; CELLS],
    /// Per cell, the smallest duration past the bound of its `first`
    /// bucket (u64::MAX: none, the bucket is +Inf).
    past: [u64; CELLS],
}

/// Upper bound of finite bucket `k`, in cycles: `bound_ns(k)` times
/// cycles per ns.
fn bounds_in_cycles(cpn: f64) -> [f64; FINITE_BUCKETS] {
    std::array::from_fn(|k| bound_ns(k) * cpn)
}

/// The cell of a duration (at most `LATTE_MAX_DURATION`, under 2^60):
/// (top bit, the 3 bits below it). 0 and 1 have the same top bit (as
/// `d | 1`) and bits below it: 1 goes to cell 1, which no other duration
/// has (top bit 0 has no bits below it).
#[inline]
fn cell(d: u64) -> usize {
    let e = 63 - (d | 1).leading_zeros();
    let m = ((d << 3) >> e) & 7;
    (e * 8) as usize + m as usize + (d == 1) as usize
}

impl Buckets {
    /// The buckets at `cpn` cycles per ns.
    pub(crate) fn new(cpn: f64) -> Buckets {
        let bounds = bounds_in_cycles(cpn);
        let (mut first, mut past) = ([FINITE_BUCKETS as u8; CELLS], [u64::MAX; CELLS]);
        for i in 0..CELLS {
            let (e, m) = (i / 8, (i % 8) as u64);
            // The smallest duration of the cell (cells below 8 cycles that
            // hold no duration are never looked up).
            let lo = if i == 0 {
                0
            } else if e >= 3 {
                (8 + m) << (e - 3)
            } else {
                (8 + m) >> (3 - e)
            };
            let k = bounds.partition_point(|&b| b < lo as f64);
            first[i] = k as u8;
            if let Some(&b) = bounds.get(k) {
                // Past a bound b: every integer above it.
                past[i] = b.floor() as u64 + 1;
            }
        }
        Buckets { first, past }
    }

    /// The bucket of a duration of `d` cycles: the first whose bound is at
    /// least `d` (`FINITE_BUCKETS`: +Inf).
    #[inline]
    pub(crate) fn of(&self, d: u64) -> usize {
        let c = cell(d);
        // Without a branch: which side of the bound a duration falls is as
        // good as random.
        self.first[c] as usize + (d >= self.past[c]) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_duration_lands_where_a_search_of_the_bounds_puts_it() {
        for cpn in [0.001, 0.1, 0.36, 1.0, 2.596, 3.0, 4.2, 1000.0] {
            let (b, bounds) = (Buckets::new(cpn), bounds_in_cycles(cpn));
            let search = |d: u64| bounds.partition_point(|&x| x < d as f64);
            let mut d = 0u64;
            while d < latte::layout::LATTE_MAX_DURATION {
                for x in [d, d + 1, d.saturating_sub(1)] {
                    assert_eq!(b.of(x), search(x), "cpn {cpn}, d {x}");
                }
                d = d * 17 / 16 + 1;
            }
            // Each bound and its neighbours.
            for &x in bounds.iter() {
                for y in [x.floor() as u64, x.ceil() as u64, x.ceil() as u64 + 1] {
                    assert_eq!(b.of(y), search(y), "cpn {cpn}, d {y}");
                }
            }
            assert_eq!(b.of(latte::layout::LATTE_MAX_DURATION), FINITE_BUCKETS);
        }
    }
}
