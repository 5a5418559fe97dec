//! A lock-free latency histogram: 1 µs buckets up to 256 µs, then 16 buckets per power of two,
//! so a quantile (a bucket's upper bound) is within 1 µs below 256 µs and within 6.25 % above:
//! an estimate, labelled so. Exposed as a standard histogram with power-of-two `le` bounds (each
//! the sum of whole fine buckets).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

const LINEAR: usize = 256;
/// Buckets per power of two above [`LINEAR`] µs.
const SUB: usize = 16;
/// Powers of two above [`LINEAR`] µs: up to 2³² µs (71 minutes), the last bucket open.
const POWERS: usize = 24;
const BUCKETS: usize = LINEAR + POWERS * SUB;

/// Counts of durations by microsecond bucket (cheap to clone: the counts are shared).
#[derive(Clone, Debug)]
pub struct Histogram(Arc<Counts>);

#[derive(Debug)]
struct Counts {
    buckets: Box<[AtomicU64]>,
    sum_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram(Arc::new(Counts {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
        }))
    }
}

/// Bucket of a duration in µs: `us` itself below 256, then one per sixteenth of its power of
/// two.
fn bucket(us: u64) -> usize {
    if us < LINEAR as u64 {
        return us as usize;
    }
    let power = 63 - us.leading_zeros() as usize;
    let sub = ((us >> (power - 4)) as usize) & (SUB - 1);
    (LINEAR + (power - 8) * SUB + sub).min(BUCKETS - 1)
}

/// The upper bound (µs, exclusive) of a bucket.
fn upper(i: usize) -> u64 {
    if i < LINEAR {
        return i as u64 + 1;
    }
    let (power, sub) = (8 + (i - LINEAR) / SUB, (i - LINEAR) % SUB);
    ((SUB + sub + 1) as u64) << (power - 4)
}

/// The upper bound (µs) of the bucket of `counts` (by fine bucket) holding quantile `q`
/// (0..=1); none when empty.
pub fn quantile_of(counts: &[u64], q: f64) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    counts.iter().enumerate().find_map(|(i, c)| {
        seen += c;
        (seen >= rank).then(|| upper(i))
    })
}

impl Histogram {
    /// Records one duration.
    pub fn record(&self, d: Duration) {
        let us = d.as_micros() as u64;
        self.0.buckets[bucket(us)].fetch_add(1, Ordering::Relaxed);
        self.0.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    fn counts(&self) -> Vec<u64> {
        self.0
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }

    /// Number of recorded durations.
    pub fn count(&self) -> u64 {
        self.counts().iter().sum()
    }

    /// The upper bound (µs) of the bucket holding quantile `q` (0..=1); none when empty.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        quantile_of(&self.counts(), q)
    }

    /// The counts by fine bucket, for `quantile_of` over a difference of two readings.
    pub fn buckets(&self) -> Vec<u64> {
        self.counts()
    }

    /// Counts per exposed bucket: `(upper bound in seconds, count)`, bounds 2⁻¹⁰ ms … ≈ 17 min
    /// in powers of two (the fine buckets fold into them exactly), then +Inf.
    fn exposed(&self) -> Vec<(f64, u64)> {
        let mut out: Vec<(f64, u64)> = Vec::new();
        let mut bound = 1u64;
        let mut n = 0;
        for (i, c) in self.counts().into_iter().enumerate() {
            while upper(i) > bound {
                out.push((bound as f64 / 1e6, std::mem::take(&mut n)));
                bound *= 2;
            }
            n += c;
        }
        // The text encoder writes `+Inf` for `f64::MAX`.
        out.push((f64::MAX, n));
        out
    }
}

impl Histogram {
    /// The JSON summary: count, sum, p50/p90/p99 (µs) and the exposed buckets that hold
    /// anything, as `[upper bound µs, count]`.
    pub fn summary(&self) -> serde_json::Value {
        let buckets: Vec<(u64, u64)> = self
            .exposed()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| ((s * 1e6).round().min(u64::MAX as f64) as u64, n))
            .collect();
        serde_json::json!({
            "count": buckets.iter().map(|(_, n)| n).sum::<u64>(),
            "sumUs": self.0.sum_us.load(Ordering::Relaxed),
            "p50Us": self.quantile_us(0.5),
            "p90Us": self.quantile_us(0.9),
            "p99Us": self.quantile_us(0.99),
            "buckets": buckets,
        })
    }
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets = self.exposed();
        let count = buckets.iter().map(|(_, n)| n).sum();
        encoder.encode_histogram::<NoLabelSet>(
            self.0.sum_us.load(Ordering::Relaxed) as f64 / 1e6,
            count,
            &buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microsecond_resolution_below_256_and_powers_of_two_above() {
        let h = Histogram::default();
        assert_eq!(h.quantile_us(0.5), None);
        for us in [3, 5, 6, 7, 300] {
            h.record(Duration::from_micros(us));
        }
        assert_eq!(h.count(), 5);
        assert_eq!(h.quantile_us(0.2), Some(4), "3 µs is in [3, 4)");
        assert_eq!(h.quantile_us(0.5), Some(7), "the median 6 µs is in [6, 7)");
        assert_eq!(h.quantile_us(1.0), Some(304), "300 µs is in [288, 304)");
        h.record(Duration::from_secs(3 * 3600));
        assert_eq!(
            h.quantile_us(1.0),
            Some(upper(BUCKETS - 1)),
            "huge values land in the last bucket"
        );
    }

    #[test]
    fn a_quantile_above_256_us_is_within_a_sixteenth_of_the_value() {
        let mut us = 256u64;
        while us < 1 << 32 {
            let h = Histogram::default();
            h.record(Duration::from_micros(us));
            let q = h.quantile_us(0.5).unwrap();
            assert!(q > us, "{us} µs lies below its bucket's bound {q}");
            let error = (q - us) as f64 / us as f64;
            assert!(error <= 1.0 / 16.0, "{us} µs read as {q}: {error}");
            us = us * 17 / 16 + 1;
        }
        for i in LINEAR..BUCKETS - 1 {
            assert_eq!(bucket(upper(i) - 1), i, "bucket {i} ends below its bound");
            assert_eq!(
                bucket(upper(i)),
                i + 1,
                "bucket {i}'s bound starts the next"
            );
        }
    }

    #[test]
    fn exposed_buckets_fold_whole_fine_buckets() {
        let h = Histogram::default();
        for us in [0, 1, 3, 4, 255, 256, 511, 512] {
            h.record(Duration::from_micros(us));
        }
        let b = h.exposed();
        let at = |us: u64| {
            b.iter()
                .find(|(le, _)| (*le * 1e6).round() as u64 == us)
                .map(|(_, n)| *n)
        };
        // [0,1) [1,2) [2,4) [4,8) … [128,256) [256,512) [512,1024)
        assert_eq!(
            (at(1), at(2), at(4), at(8), at(256), at(512), at(1024)),
            (
                Some(1),
                Some(1),
                Some(1),
                Some(1),
                Some(1),
                Some(2),
                Some(1)
            )
        );
        assert_eq!(b.iter().map(|(_, n)| n).sum::<u64>(), 8);
        assert_eq!(b.last().unwrap().0, f64::MAX);
    }
}
