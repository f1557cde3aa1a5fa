//! The statistics of `latte diff`, on sorted samples (integers in one unit):
//! nearest-rank percentiles, the two-sided Mann–Whitney U test, and a
//! seeded bootstrap of the relative change of a percentile.
//!
//! The U test: mid-ranks for ties, the normal approximation with the tie
//! correction of the variance and a continuity correction of 0.5 (the
//! large-sample form; `diff` asks for at least `MIN_SAMPLES` a side).
//!
//! The bootstrap resamples each side with replacement, `n` draws from `n`
//! sorted values, and takes the percentile's order statistic. It does so
//! without drawing the `n` values: with the sorted sample `x(1) <= ... <=
//! x(n)`, a resample's index `i = ceil(n U)` (U uniform on (0, 1]) is
//! increasing in U, so the k-th smallest value of a resample is
//! `x(ceil(n U(k)))` where `U(k)`, the k-th smallest of n uniforms, is
//! Beta(k, n - k + 1): one Beta draw per side and replicate gives exactly
//! the resample's percentile, at any n.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Beta, Distribution};
use statrs::distribution::{ContinuousCDF, Normal};

/// Fewest samples a side needs for a verdict.
pub const MIN_SAMPLES: usize = 20;

/// The nearest rank of quantile `q` (0..=1) among `n` values (1-based).
pub fn rank(q: f64, n: usize) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n.max(1))
}

/// Nearest-rank percentile of sorted values (the rule of `latte stats`).
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[rank(q, sorted.len()) - 1]
}

/// Result of the Mann–Whitney U test of `a` against `b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UTest {
    /// U of side A: pairs (a, b) with a > b, plus half the ties.
    pub u_a: f64,
    /// The standardised statistic (continuity corrected).
    pub z: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Two-sided Mann–Whitney U test of two sorted samples (each non-empty).
pub fn mann_whitney(a: &[u64], b: &[u64]) -> UTest {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let n = na + nb;
    // Merge by value: each run of equal values gets the mean of its ranks.
    let (mut i, mut j) = (0usize, 0usize);
    let mut rank_sum_a = 0.0;
    let mut ties = 0.0; // sum of t^3 - t over the runs
    let mut next_rank = 1.0;
    while i < a.len() || j < b.len() {
        let v = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => break,
        };
        let i0 = i;
        while i < a.len() && a[i] == v {
            i += 1;
        }
        let j0 = j;
        while j < b.len() && b[j] == v {
            j += 1;
        }
        let (ta, tb) = ((i - i0) as f64, (j - j0) as f64);
        let t = ta + tb;
        let mid = next_rank + (t - 1.0) / 2.0;
        rank_sum_a += ta * mid;
        ties += t * t * t - t;
        next_rank += t;
    }
    let u_a = rank_sum_a - na * (na + 1.0) / 2.0;
    let mean = na * nb / 2.0;
    let var = na * nb / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        // Every value equal: no evidence of a difference.
        return UTest { u_a, z: 0.0, p: 1.0 };
    }
    let d = u_a - mean;
    let z = (d.abs() - 0.5).max(0.0).copysign(d) / var.sqrt();
    let normal = Normal::standard();
    let p = (2.0 * normal.sf(z.abs())).min(1.0);
    UTest { u_a, z, p }
}

/// Bootstrap of the relative change `q(b) / q(a) - 1` of percentile `q`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

/// The `level` (e.g. 0.95) percentile interval of `replicates` bootstrap
/// replicates of the relative change of percentile `q`, from a ChaCha8
/// stream seeded with `seed`. None when a side is empty or a replicate of
/// side A is 0 (no relative change).
pub fn bootstrap_change(a: &[u64], b: &[u64], q: f64, replicates: usize, level: f64, seed: u64) -> Option<Interval> {
    if a.is_empty() || b.is_empty() || replicates == 0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let draw = |s: &[u64], rng: &mut ChaCha8Rng| -> Option<u64> {
        let n = s.len();
        let k = rank(q, n);
        if n == 1 {
            return Some(s[0]);
        }
        let beta = Beta::new(k as f64, (n - k + 1) as f64).ok()?;
        let u: f64 = beta.sample(rng);
        let idx = ((n as f64 * u).ceil() as usize).clamp(1, n);
        Some(s[idx - 1])
    };
    let mut changes = Vec::with_capacity(replicates);
    for _ in 0..replicates {
        let (x, y) = (draw(a, &mut rng)?, draw(b, &mut rng)?);
        if x == 0 {
            return None;
        }
        changes.push(y as f64 / x as f64 - 1.0);
    }
    changes.sort_by(|x, y| x.total_cmp(y));
    let tail = (1.0 - level) / 2.0;
    let at = |p: f64| changes[((p * replicates as f64).floor() as usize).min(replicates - 1)];
    Some(Interval { low: at(tail), high: at(1.0 - tail) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!((percentile(&v, 0.5), percentile(&v, 0.99), percentile(&v, 0.999), percentile(&v, 1.0)), (500, 990, 999, 1000));
        assert_eq!(percentile(&[7], 0.5), 7);
    }

    #[test]
    fn u_test_matches_a_hand_computed_case() {
        // a = {1, 2, 3}, b = {4, 5, 6}: U_a = 0, mean 4.5, var = 9/12 * 7 = 5.25.
        let t = mann_whitney(&[1, 2, 3], &[4, 5, 6]);
        assert_eq!(t.u_a, 0.0);
        assert!((t.z - (-4.0 / 5.25f64.sqrt())).abs() < 1e-12, "{t:?}");
        // Two-sided: 2 * sf(1.7457) = 0.0809 (normal table).
        assert!((t.p - 0.0809).abs() < 1e-3, "{t:?}");
        // Ties: a = {1, 2, 2}, b = {2, 3, 3}: ranks 1, 3, 3 | 3, 5.5, 5.5; R_a = 7, U_a = 1.
        let t = mann_whitney(&[1, 2, 2], &[2, 3, 3]);
        assert_eq!(t.u_a, 1.0);
        // Identical samples: no difference.
        assert_eq!(mann_whitney(&[5, 5], &[5, 5]).p, 1.0);
        let same: Vec<u64> = (0..100).collect();
        assert!(mann_whitney(&same, &same).p > 0.99);
    }

    #[test]
    fn bootstrap_is_seeded_and_brackets_the_change() {
        let a: Vec<u64> = (1000..3000).collect();
        let b: Vec<u64> = a.iter().map(|x| x * 11 / 10).collect();
        let i = bootstrap_change(&a, &b, 0.5, 1000, 0.95, 7).unwrap();
        assert_eq!(Some(i), bootstrap_change(&a, &b, 0.5, 1000, 0.95, 7), "same seed, same interval");
        assert!(i.low < 0.10 && 0.10 < i.high && i.low > 0.0, "{i:?}");
        // The exact resample statistic: its spread matches a resampling by draws.
        let w = i.high - i.low;
        assert!(w > 0.01 && w < 0.2, "{i:?}");
    }
}
