//! A lock-free latency histogram: 1 µs buckets up to 256 µs, power-of-two buckets above.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const LINEAR: usize = 256;
const BUCKETS: usize = LINEAR + 24;

/// Counts of durations by microsecond bucket.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    sum_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(), sum_us: AtomicU64::new(0) }
    }
}

/// Bucket of a duration in µs: `us` itself below 256, then one per power of two.
fn bucket(us: u64) -> usize {
    if us < LINEAR as u64 { us as usize } else { (LINEAR + (63 - us.leading_zeros() as usize) - 8).min(BUCKETS - 1) }
}

/// The upper bound (µs, exclusive) of a bucket.
fn upper(i: usize) -> u64 {
    if i < LINEAR { i as u64 + 1 } else { 2u64 << (i - LINEAR + 8) }
}

impl Histogram {
    /// Records one duration.
    pub fn record(&self, d: Duration) {
        let us = d.as_micros() as u64;
        self.buckets[bucket(us)].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Sum of recorded durations, µs.
    pub fn sum_us(&self) -> u64 {
        self.sum_us.load(Ordering::Relaxed)
    }

    /// Number of recorded durations.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The upper bound (µs) of the bucket holding quantile `q` (0..=1); none when empty.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
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
        assert_eq!(h.quantile_us(1.0), Some(512), "300 µs is in [256, 512)");
        h.record(Duration::from_secs(3600));
        assert_eq!(h.quantile_us(1.0), Some(upper(BUCKETS - 1)), "huge values land in the last bucket");
    }
}
