//! The last 15 minutes of traffic, sampled in the runtime every 10 s (so the panel's charts
//! survive a page reload): requests and errors per second and the latency quantiles of each
//! interval.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use super::histogram::quantile_of;

/// How often the traffic is sampled.
pub const STEP: Duration = Duration::from_secs(10);
/// Samples kept: 15 minutes.
const POINTS: usize = 90;

/// The cumulative counts at one sampling.
#[derive(Clone, Debug, Default)]
pub struct Reading {
    /// When, ms since the Unix epoch.
    pub at_ms: u64,
    /// Requests answered so far.
    pub requests: u64,
    /// Those whose outcome was not `ok`.
    pub errors: u64,
    /// Their latencies, by fine histogram bucket.
    pub buckets: Vec<u64>,
}

/// One interval's traffic.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Point {
    /// The interval's end, ms since the Unix epoch.
    pub at: u64,
    /// Requests answered per second.
    pub requests_per_s: f64,
    /// Those whose outcome was an error, per second.
    pub errors_per_s: f64,
    /// Latency quantiles of the interval's requests (estimates, see the histogram); none
    /// without requests.
    pub p50_us: Option<u64>,
    /// The 99th percentile, likewise.
    pub p99_us: Option<u64>,
}

/// The samples (see the module's documentation).
#[derive(Debug, Default)]
pub struct Series(Mutex<(Option<Reading>, VecDeque<Point>)>);

impl Series {
    /// Adds the interval since the previous reading (the first reading starts the series).
    pub fn sample(&self, now: Reading) {
        let mut g = self.0.lock().unwrap();
        let (last, points) = &mut *g;
        if let Some(before) = last.as_ref().filter(|b| now.at_ms > b.at_ms) {
            let secs = (now.at_ms - before.at_ms) as f64 / 1000.0;
            let delta: Vec<u64> = now
                .buckets
                .iter()
                .enumerate()
                .map(|(i, n)| n.saturating_sub(before.buckets.get(i).copied().unwrap_or(0)))
                .collect();
            if points.len() == POINTS {
                points.pop_front();
            }
            points.push_back(Point {
                at: now.at_ms,
                requests_per_s: now.requests.saturating_sub(before.requests) as f64 / secs,
                errors_per_s: now.errors.saturating_sub(before.errors) as f64 / secs,
                p50_us: quantile_of(&delta, 0.5),
                p99_us: quantile_of(&delta, 0.99),
            });
        }
        *last = Some(now);
    }

    /// The samples, oldest first.
    pub fn points(&self) -> Vec<Point> {
        self.0.lock().unwrap().1.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_point_is_its_interval_and_the_series_keeps_15_minutes() {
        let s = Series::default();
        let mut buckets = vec![0u64; 300];
        s.sample(Reading {
            at_ms: 0,
            requests: 5,
            errors: 1,
            buckets: buckets.clone(),
        });
        assert!(s.points().is_empty(), "one reading is no interval");
        buckets[100] = 18;
        buckets[200] = 2;
        s.sample(Reading {
            at_ms: 10_000,
            requests: 25,
            errors: 3,
            buckets: buckets.clone(),
        });
        assert_eq!(
            s.points(),
            [Point {
                at: 10_000,
                requests_per_s: 2.0,
                errors_per_s: 0.2,
                p50_us: Some(101),
                p99_us: Some(201),
            }]
        );
        for i in 2..200 {
            s.sample(Reading {
                at_ms: i * 10_000,
                requests: 25,
                errors: 3,
                buckets: buckets.clone(),
            });
        }
        let points = s.points();
        assert_eq!(points.len(), POINTS);
        assert_eq!(points[0].at, 110 * 10_000);
        assert_eq!(
            (points[1].requests_per_s, points[1].p50_us),
            (0.0, None),
            "an idle interval"
        );
    }
}
