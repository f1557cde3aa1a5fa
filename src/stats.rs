//! Statistics of a component's samples: the outlier rule of the original
//! Latte (`DataClean`) and the summary printed in every report row.

use crate::error::Error;

/// Result of the outlier rule.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Clean {
    /// Kept values, sorted ascending.
    pub values: Vec<f64>,
    /// Values dropped as outliers.
    pub outliers: usize,
    /// The cutoff (values above it are outliers); None when there is none.
    pub cutoff: Option<f64>,
}

/// Bucket size of the outlier rule.
pub(crate) const BUCKET: usize = 1000;

/// The outlier rule: cut the values, in recording order, into buckets of
/// 1000 (a last bucket under 500 is skipped); take each bucket's maximum.
/// With 4 or more maxima (sorted): q1 = max[n/4], q3 = max[3n/4], cutoff =
/// q3 + 3 (q3 - q1), or 1.5 q3 when q3 == q1. With 1 to 3 maxima: 1.5 times
/// the largest. With none: no cutoff. Values above the cutoff are outliers;
/// if that would drop everything, keep everything and count 0.
pub fn data_clean(values: &[f64]) -> Clean {
    let mut kept = values.to_vec();
    // Only the maxima's allocation can fail there; `to_vec` above would have first.
    let (outliers, cutoff) = data_clean_in_place(&mut kept).unwrap_or((0, None));
    Clean { values: kept, outliers, cutoff }
}

/// The outlier rule in place: `values` (in recording order) becomes the
/// kept values, sorted; returns the outlier count and the cutoff. The only
/// allocation is the bucket maxima (one value per 1,000); its failure is
/// `-ENOMEM`, never an abort. Same rule as `data_clean`.
pub fn data_clean_in_place(values: &mut Vec<f64>) -> Result<(usize, Option<f64>), Error> {
    let mut maxima = Vec::new();
    maxima.try_reserve(values.len() / BUCKET + 1).map_err(|_| Error::Os(libc::ENOMEM))?;
    maxima.extend(values.chunks(BUCKET).filter(|c| c.len() >= BUCKET / 2).map(|c| c.iter().copied().fold(f64::NEG_INFINITY, f64::max)));
    maxima.sort_by(|a, b| a.total_cmp(b));
    let n = maxima.len();
    let cutoff = if n >= 4 {
        let (q1, q3) = (maxima[n / 4], maxima[3 * n / 4]);
        Some(if q3 == q1 { q3 * 1.5 } else { q3 + 3.0 * (q3 - q1) })
    } else if n >= 1 {
        Some(1.5 * maxima[n - 1])
    } else {
        None
    };
    let total = values.len();
    let mut outliers = 0;
    if let Some(c) = cutoff {
        let kept = values.iter().filter(|&&v| v <= c).count();
        // Dropping everything keeps everything.
        if kept > 0 {
            values.retain(|&v| v <= c);
            outliers = total - kept;
        }
    }
    // Unstable: sorts in place (a stable sort would take half as much again).
    values.sort_unstable_by(|a, b| a.total_cmp(b));
    Ok((outliers, cutoff))
}

/// Summary of a sorted, non-empty set of values.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub mean: f64,
    pub median: f64,
    /// Population standard deviation.
    pub std_dev: f64,
    /// Third standardised moment; 0 when the std dev is about 0.
    pub skew: f64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
}

/// Nearest-rank percentile of sorted values (`q` in 0..=1).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Median: the middle value, or the mean of the middle two.
pub fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Summarises sorted values; None when empty.
pub fn summarize(sorted: &[f64]) -> Option<Summary> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let nf = n as f64;
    let mean = sorted.iter().sum::<f64>() / nf;
    let var = sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / nf;
    let sd = var.sqrt();
    let skew = if sd <= 1e-9 * mean.abs().max(1.0) { 0.0 } else { sorted.iter().map(|v| ((v - mean) / sd).powi(3)).sum::<f64>() / nf };
    Some(Summary {
        count: n,
        mean,
        median: median(sorted),
        std_dev: sd,
        skew,
        min: sorted[0],
        max: sorted[n - 1],
        p50: percentile(sorted, 0.50),
        p90: percentile(sorted, 0.90),
        p99: percentile(sorted, 0.99),
        p999: percentile(sorted, 0.999),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_values_no_cutoff() {
        let c = data_clean(&[]);
        assert_eq!(c, Clean { values: vec![], outliers: 0, cutoff: None });
    }

    #[test]
    fn small_sets_use_one_and_a_half_times_the_largest_max() {
        // 600 values: one bucket (>= 500), max 10 -> cutoff 15; nothing dropped.
        let v: Vec<f64> = (0..600).map(|i| (i % 10 + 1) as f64).collect();
        let c = data_clean(&v);
        assert_eq!(c.cutoff, Some(15.0));
        assert_eq!(c.outliers, 0);
        // 400 values: the only bucket is partial and under 500: skipped -> no cutoff.
        let c = data_clean(&v[..400]);
        assert_eq!(c.cutoff, None);
        assert_eq!(c.values.len(), 400);
    }

    #[test]
    fn iqr_rule_and_partial_last_bucket() {
        // 4 full buckets with maxima 10, 20, 30, 40 and a last bucket of 499
        // values (skipped) holding a huge value.
        let mut v = Vec::new();
        for m in [10.0, 20.0, 30.0, 40.0] {
            v.extend(std::iter::repeat_n(1.0, 999));
            v.push(m);
        }
        v.extend(std::iter::repeat_n(2.0, 498));
        v.push(1000.0);
        let c = data_clean(&v);
        // sorted maxima [10,20,30,40]: q1 = m[1] = 20, q3 = m[3] = 40 -> 40 + 60 = 100.
        assert_eq!(c.cutoff, Some(100.0));
        assert_eq!(c.outliers, 1);
        assert_eq!(*c.values.last().unwrap(), 40.0);
        assert!(c.values.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn equal_quartiles_use_one_and_a_half_q3() {
        let mut v = vec![5.0; 4000];
        v[10] = 7.0; // bucket 0 max 7, others 5: sorted [5,5,5,7], q1 = q3 = 5
        v[3999] = 7.6; // bucket 3 max 7.6 -> sorted [5,5,7,7.6]: q1 = 5, q3 = 7.6
        let c = data_clean(&v);
        assert!((c.cutoff.unwrap() - (7.6 + 3.0 * 2.6)).abs() < 1e-9);
        let w = vec![5.0; 4000];
        let c = data_clean(&w);
        assert_eq!(c.cutoff, Some(7.5));
    }

    #[test]
    fn dropping_everything_keeps_everything() {
        // Negative values make 1.5 * max smaller than every value.
        let v = vec![-4.0; 600];
        let c = data_clean(&v);
        assert_eq!(c.values.len(), 600);
        assert_eq!(c.outliers, 0);
    }

    #[test]
    fn summary_figures() {
        let s = summarize(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert_eq!(s.mean, 2.5);
        assert!((s.std_dev - 1.118033988).abs() < 1e-6);
        assert_eq!(s.skew, 0.0);
        assert_eq!(summarize(&[3.0, 3.0]).unwrap().skew, 0.0);
        let s = summarize(&[1.0, 1.0, 1.0, 10.0]).unwrap();
        assert!(s.skew > 1.0);
        let v: Vec<f64> = (1..=1000).map(|i| i as f64).collect();
        let s = summarize(&v).unwrap();
        assert_eq!((s.p50, s.p90, s.p99, s.p999), (500.0, 900.0, 990.0, 999.0));
    }
}
