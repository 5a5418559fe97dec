//! Admission: a token bucket per (instance, caller) and concurrency slots per instance and per
//! (instance, principal).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::records::Limits;

/// Whose rate bucket a request takes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A caller known only by its address (the instance's shared principal).
    Address(IpAddr),
    /// A caller known apart (docs/auth.md "Authentication"): its bucket follows it across
    /// addresses.
    Principal(String),
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Rate limits and slots of every instance.
#[derive(Default)]
pub struct Admission {
    buckets: Mutex<HashMap<(String, Source), Bucket>>,
    slots: Mutex<HashMap<String, Arc<AtomicU32>>>,
    principal_slots: Mutex<HashMap<(String, String), Arc<AtomicU32>>>,
    streams: Mutex<HashMap<String, Arc<AtomicU32>>>,
    all_streams: Arc<AtomicU32>,
}

/// A held open-stream slot (per instance and of the whole runtime); dropping it frees both.
#[derive(Debug)]
pub struct StreamSlot {
    _instance: Slot,
    _all: Slot,
}

/// A held concurrency slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot(Arc<AtomicU32>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running task's slots: its instance's, and its principal's where it has a quota.
#[derive(Debug)]
pub struct TaskSlot {
    _instance: Slot,
    _principal: Option<Slot>,
}

impl Admission {
    /// Takes a token; `Err(ms)` says when the next one is back. Limits with rate 0 never refuse.
    pub fn check_rate(&self, instance: &str, source: Source, limits: &Limits) -> Result<(), u64> {
        if limits.rate_per_second <= 0.0 {
            return Ok(());
        }
        let burst = f64::from(limits.rate_burst.max(1));
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap();
        if buckets.len() > 100_000 {
            // Forget full buckets: they carry no state.
            buckets.retain(|_, b| {
                b.tokens + now.duration_since(b.at).as_secs_f64() * limits.rate_per_second < burst
            });
        }
        let b = buckets
            .entry((instance.to_owned(), source))
            .or_insert(Bucket {
                tokens: burst,
                at: now,
            });
        b.tokens =
            (b.tokens + now.duration_since(b.at).as_secs_f64() * limits.rate_per_second).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - b.tokens) / limits.rate_per_second * 1000.0).ceil() as u64)
        }
    }

    /// Holds one of the instance's `max` slots and, for `principal` with `per_principal`
    /// above 0, one of its own; `Err(n)` names the cap that was full.
    pub fn acquire(
        &self,
        instance: &str,
        max: u32,
        principal: Option<&str>,
        per_principal: u32,
    ) -> Result<TaskSlot, u32> {
        let own = match principal.filter(|_| per_principal > 0) {
            Some(p) => {
                let counter = {
                    let mut slots = self.principal_slots.lock().unwrap();
                    if slots.len() > 10_000 {
                        // Forget idle principals: an unheld counter at 0 carries no state.
                        slots.retain(|_, c| Arc::strong_count(c) > 1);
                    }
                    slots
                        .entry((instance.to_owned(), p.to_owned()))
                        .or_default()
                        .clone()
                };
                Some(take(&counter, per_principal).ok_or(per_principal)?)
            }
            None => None,
        };
        let counter = self
            .slots
            .lock()
            .unwrap()
            .entry(instance.to_owned())
            .or_default()
            .clone();
        Ok(TaskSlot {
            _instance: take(&counter, max).ok_or(max)?,
            _principal: own,
        })
    }

    /// Holds one open-stream slot of `instance` (at most `per_instance`) and of the runtime (at
    /// most `total`); when either is full, the refusal says which.
    pub fn acquire_stream(
        &self,
        instance: &str,
        per_instance: u32,
        total: u32,
    ) -> Result<StreamSlot, String> {
        let counter = self
            .streams
            .lock()
            .unwrap()
            .entry(instance.to_owned())
            .or_default()
            .clone();
        let mine = take(&counter, per_instance).ok_or_else(|| format!("this agent already serves its maximum of {per_instance} open streams; retry later, or poll GetTask"))?;
        let all = take(&self.all_streams, total).ok_or_else(|| format!("the server already serves its maximum of {total} open streams; retry later, or poll GetTask"))?;
        Ok(StreamSlot {
            _instance: mine,
            _all: all,
        })
    }

    /// Open streams of the whole runtime.
    pub fn open_streams(&self) -> u32 {
        self.all_streams.load(Ordering::Acquire)
    }

    /// Tasks running on an instance.
    pub fn active(&self, instance: &str) -> u32 {
        self.slots
            .lock()
            .unwrap()
            .get(instance)
            .map_or(0, |c| c.load(Ordering::Acquire))
    }
}

/// One more of `counter` when it is below `max`.
fn take(counter: &Arc<AtomicU32>, max: u32) -> Option<Slot> {
    counter
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| Slot(counter.clone()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn stream_slots_are_capped_per_instance_and_in_all() {
        let a = Admission::default();
        let one = a.acquire_stream("i", 2, 3).unwrap();
        let _two = a.acquire_stream("i", 2, 3).unwrap();
        assert!(
            a.acquire_stream("i", 2, 3)
                .unwrap_err()
                .contains("this agent")
        );
        let _three = a.acquire_stream("j", 2, 3).unwrap();
        assert!(
            a.acquire_stream("j", 2, 3)
                .unwrap_err()
                .contains("the server")
        );
        assert_eq!(a.open_streams(), 3);
        drop(one);
        assert!(a.acquire_stream("j", 2, 3).is_ok(), "freed on drop");
    }

    use super::*;

    #[test]
    fn bucket_refuses_past_burst_and_says_when() {
        let a = Admission::default();
        let limits = Limits {
            rate_per_second: 1.0,
            rate_burst: 2,
            ..Limits::default()
        };
        let ip = Source::Address("10.0.0.1".parse().unwrap());
        assert!(a.check_rate("i", ip.clone(), &limits).is_ok());
        assert!(a.check_rate("i", ip.clone(), &limits).is_ok());
        let wait = a.check_rate("i", ip.clone(), &limits).unwrap_err();
        assert!((900..=1000).contains(&wait), "{wait}");
        let other = Source::Address("10.0.0.2".parse().unwrap());
        assert!(
            a.check_rate("i", other, &limits).is_ok(),
            "buckets are per source"
        );
        let alice = Source::Principal("key:alice".into());
        assert!(
            a.check_rate("i", alice, &limits).is_ok(),
            "and per principal"
        );
        assert!(
            a.check_rate("j", ip.clone(), &limits).is_ok(),
            "and per instance"
        );
        assert!(
            a.check_rate("i", ip, &Limits::default()).is_ok(),
            "rate 0 is off"
        );
    }

    #[test]
    fn slots_are_bounded_and_released_on_drop() {
        let a = Admission::default();
        let s1 = a.acquire("i", 2, None, 0).unwrap();
        let _s2 = a.acquire("i", 2, None, 0).unwrap();
        assert_eq!(a.acquire("i", 2, None, 0).err(), Some(2));
        drop(s1);
        assert_eq!(a.active("i"), 1);
        assert!(a.acquire("i", 2, None, 0).is_ok());
    }

    #[test]
    fn a_principal_keeps_to_its_own_quota_within_the_instances() {
        let a = Admission::default();
        let alice = a.acquire("i", 3, Some("key:alice"), 1).unwrap();
        assert_eq!(a.acquire("i", 3, Some("key:alice"), 1).err(), Some(1));
        assert_eq!(a.active("i"), 1, "a refusal holds nothing");
        let bob = a.acquire("i", 3, Some("key:bob"), 1).unwrap();
        let shared = a.acquire("i", 3, None, 1).unwrap();
        assert_eq!(
            a.acquire("i", 3, Some("key:carol"), 1).err(),
            Some(3),
            "the instance's cap still holds"
        );
        assert_eq!(a.active("i"), 3, "carol's own slot went back");
        drop((alice, bob, shared));
        assert!(a.acquire("i", 3, Some("key:alice"), 1).is_ok());
        assert!(
            a.acquire("j", 3, Some("key:alice"), 1).is_ok(),
            "per instance"
        );
    }
}
