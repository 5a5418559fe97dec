//! The delivery worker: POSTs each notification of the outbox to its webhook, oldest first per
//! config (a config's next notification waits until the one before is delivered or given up),
//! several configs at once, retrying with exponential backoff and full jitter within the
//! configured attempts and age. At-least-once: a notification leaves the outbox only after its
//! outcome is committed, so one in flight at a crash is sent again after the restart.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_protocol::push::TaskPushNotificationConfig;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::webhooks::{Unreachable, Webhooks};
use crate::clock::now_ms;
use crate::config::PushSettings;
use crate::store::{Attempt, Delivery, DueLook, PushOutbox};
use crate::telemetry::Metrics;

/// Most notifications read from the outbox at one look: enough past the heads a look cannot
/// take now (their host's slots are in use; full instances are left out by the store) that no
/// number of hanging receivers hides another's heads.
const BATCH: u32 = 256;
/// The longest the worker sleeps without looking (a safety net; writes wake it).
const IDLE: Duration = Duration::from_secs(30);

/// A config's key: one delivery at a time each.
type Key = (String, String, String);

/// Configs remembered with their latest attempt; past this the memory starts over (a stale look
/// could then send one notification a second time, which at-least-once allows).
const MAX_TRIED: usize = 65_536;

/// The configs being delivered to, and each one's latest attempt: a look at the outbox that began
/// before an attempt was recorded can still show that notification as due, and is not believed.
/// Deliveries in flight are bounded in all, per instance and per webhook host, so receivers
/// that hang (or one instance's many webhooks) never hold every slot.
#[derive(Default)]
struct Taken {
    busy: HashSet<Key>,
    /// `(seq, attempts)` of the latest attempt per config.
    tried: HashMap<Key, (u64, u32)>,
    /// Deliveries in flight by instance.
    instances: HashMap<String, u32>,
    /// Deliveries in flight by webhook host (`host:port`).
    hosts: HashMap<String, u32>,
}

/// Why a due notification is not taken now.
#[derive(Debug, PartialEq)]
enum Skip {
    /// Every slot is in use: look no further.
    Full,
    /// Its config, instance or host is busy, or the look is outdated: the next may go.
    This,
}

impl Taken {
    /// Takes `d`'s config for a delivery to `host`, unless the slots of all, of its instance or
    /// of its host are in use, one is under way for the config, or `d` is an outdated view of
    /// a notification already tried (the same one with no more attempts, or an earlier one).
    fn take(&mut self, key: &Key, d: &Delivery, host: &str, s: &PushSettings) -> Result<(), Skip> {
        if self.full(s) {
            return Err(Skip::Full);
        }
        let outdated = self
            .tried
            .get(key)
            .is_some_and(|tried| (d.seq, d.attempts) <= *tried);
        let instance = self.instances.get(&key.0).copied().unwrap_or(0);
        let at_host = self.hosts.get(host).copied().unwrap_or(0);
        if outdated
            || instance >= s.per_instance.max(1)
            || at_host >= s.per_host.max(1)
            || !self.busy.insert(key.clone())
        {
            return Err(Skip::This);
        }
        *self.instances.entry(key.0.clone()).or_default() += 1;
        *self.hosts.entry(host.to_owned()).or_default() += 1;
        Ok(())
    }

    /// The instances whose slots are all in use: a look leaves their heads out.
    fn full_instances(&self, s: &PushSettings) -> Vec<String> {
        self.instances
            .iter()
            .filter(|(_, n)| **n >= s.per_instance.max(1))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Whether every slot is in use.
    fn full(&self, s: &PushSettings) -> bool {
        self.busy.len() >= s.concurrency.max(1) as usize
    }

    /// Frees the config (and its instance's and host's slot) after the attempt on `d` was
    /// recorded.
    fn release(&mut self, key: Key, d: &Delivery, host: &str) {
        self.busy.remove(&key);
        for (map, k) in [
            (&mut self.instances, key.0.as_str()),
            (&mut self.hosts, host),
        ] {
            if let Some(n) = map.get_mut(k) {
                *n -= 1;
                if *n == 0 {
                    map.remove(k);
                }
            }
        }
        if self.tried.len() >= MAX_TRIED {
            self.tried.clear();
        }
        self.tried.insert(key, (d.seq, d.attempts));
    }
}

/// The webhook host (`host:port`) a delivery goes to, as the slots count it.
fn destination(d: &Delivery) -> String {
    serde_json::from_str::<TaskPushNotificationConfig>(&d.config.body)
        .ok()
        .and_then(|c| a2a_protocol::push::webhook(&c.url).ok())
        .map(|(host, port)| format!("{}:{port}", host.to_ascii_lowercase()))
        .unwrap_or_default()
}

/// The delivery worker.
pub struct Worker {
    store: Arc<dyn PushOutbox>,
    settings: PushSettings,
    webhooks: Arc<Webhooks>,
    metrics: Arc<Metrics>,
}

impl Worker {
    /// A worker over `store`'s outbox, judging webhooks with the guard registrations use.
    pub fn new(
        store: Arc<dyn PushOutbox>,
        settings: PushSettings,
        webhooks: Arc<Webhooks>,
        metrics: Arc<Metrics>,
    ) -> Worker {
        Worker {
            store,
            settings,
            webhooks,
            metrics,
        }
    }

    /// Delivers until `stop`; deliveries in flight then are dropped (and sent again on the next
    /// start, as their outcome was never recorded).
    pub async fn run(self, stop: CancellationToken) {
        let this = Arc::new(self);
        let signal = this.store.outbox_signal();
        let taken: Arc<Mutex<Taken>> = Arc::default();
        let mut flights = JoinSet::new();
        loop {
            while flights.try_join_next().is_some() {}
            let now = now_ms();
            let wait = match this.look(now, &taken, &signal, &mut flights).await {
                Ok(wait) => wait,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the push outbox");
                    Duration::from_secs(1)
                }
            };
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                () = signal.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
        flights.abort_all();
    }

    /// One look at the outbox at `now`: starts a delivery for each due head that can take a
    /// slot, the heads of instances whose slots are all in use left out. How long to wait before
    /// the next look.
    async fn look(
        self: &Arc<Self>,
        now: u64,
        taken: &Arc<Mutex<Taken>>,
        signal: &Arc<tokio::sync::Notify>,
        flights: &mut JoinSet<()>,
    ) -> Result<Duration, crate::store::StoreError> {
        let skip = taken.lock().unwrap().full_instances(&self.settings);
        let look = DueLook {
            now,
            limit: BATCH,
            skip,
        };
        let outbox = self.store.due_deliveries(look).await?;
        self.metrics.push_pending(outbox.pending);
        let wait = outbox
            .next_at
            .map_or(IDLE, |at| Duration::from_millis(at.saturating_sub(now)))
            .min(IDLE);
        for d in outbox.due {
            let key = (
                d.config.instance_id.clone(),
                d.config.task_id.clone(),
                d.config.id.clone(),
            );
            let host = destination(&d);
            let took = taken.lock().unwrap().take(&key, &d, &host, &self.settings);
            match took {
                Ok(()) => {}
                Err(Skip::Full) => break,
                Err(Skip::This) => continue,
            }
            let (this, taken, signal) = (self.clone(), taken.clone(), signal.clone());
            flights.spawn(async move {
                let attempt = this.attempt(&d).await;
                if let Err(e) = this.store.attempted(d.seq, now_ms(), attempt).await {
                    tracing::warn!(error = %e, "cannot record a push attempt");
                }
                // The config is free again: look now (the store's signal of the
                // recorded attempt may have come while it was still taken, and a
                // taken head counts for no wake-up time).
                taken.lock().unwrap().release(key, &d, &host);
                signal.notify_one();
            });
        }
        Ok(wait)
    }

    /// One attempt on `d`, and what the outbox should do next.
    async fn attempt(&self, d: &Delivery) -> Attempt {
        let config: TaskPushNotificationConfig = match serde_json::from_str(&d.config.body) {
            Ok(c) => c,
            Err(e) => return self.ended("failed", format!("the stored config is unreadable: {e}")),
        };
        let timeout = Duration::from_millis(self.settings.timeout_ms);
        let span = delivery_span(d, &config.url);
        let sent = tokio::time::timeout(timeout, self.post(&config, &d.payload))
            .instrument(span.clone())
            .await;
        if let Ok(Ok(status)) = &sent {
            span.record("http.response.status_code", i64::from(*status));
        }
        let why = match sent {
            Ok(Ok(status)) if (200..300).contains(&status) => {
                self.metrics.push_attempt("delivered");
                return Attempt::Delivered(status);
            }
            Ok(Ok(status)) => format!("HTTP {status}"),
            Ok(Err(Unreachable::Refused(why))) => {
                tracing::warn!(task = %d.config.task_id, config = %d.config.id, %why, "refused a webhook");
                failed(&span, &why);
                return self.ended("refused", why);
            }
            Ok(Err(Unreachable::Unresolved(why))) => why,
            Err(_) => format!("no answer within {} ms", self.settings.timeout_ms),
        };
        failed(&span, &why);
        let tried = d.attempts + 1;
        let now = now_ms();
        if tried >= self.settings.max_attempts {
            return self.ended("failed", format!("{why} (gave up after {tried} attempts)"));
        }
        if now.saturating_sub(d.created_at) > self.settings.max_age_secs * 1000 {
            return self.ended(
                "failed",
                format!(
                    "{why} (gave up: older than {} s)",
                    self.settings.max_age_secs
                ),
            );
        }
        self.metrics.push_attempt("retried");
        Attempt::Retry {
            next_at: now + backoff(&self.settings, d.attempts),
            error: why,
        }
    }

    fn ended(&self, outcome: &str, why: String) -> Attempt {
        self.metrics.push_attempt(outcome);
        Attempt::GaveUp(why)
    }

    /// POSTs `payload` to the config's webhook (guarded); the response status.
    async fn post(
        &self,
        config: &TaskPushNotificationConfig,
        payload: &str,
    ) -> Result<u16, Unreachable> {
        let (uri, addrs) = self.webhooks.resolve(&config.url).await?;
        let body = Full::new(Bytes::from(payload.to_owned()))
            .map_err(|never| match never {})
            .boxed_unsync();
        let mut request = http::Request::post(uri)
            .header(http::header::USER_AGENT, crate::egress::USER_AGENT)
            .body(body)
            .map_err(|e| Unreachable::Refused(format!("the request cannot be built: {e}")))?;
        for (name, value) in config.headers() {
            let value = http::HeaderValue::from_str(&value)
                .map_err(|_| Unreachable::Refused(format!("the {name} header is not valid")))?;
            request.headers_mut().insert(name, value);
        }
        crate::telemetry::trace::inject(&tracing::Span::current(), request.headers_mut());
        let timeout = Duration::from_millis(self.settings.timeout_ms);
        let (response, _connection) = self
            .webhooks
            .exit()
            .send(request, addrs, timeout)
            .await
            .map_err(|e| match e {
                // The exit's refusal of this runtime's own listeners: no attempt changes it.
                wasmtime_wasi_http::Error::DestinationIpProhibited => Unreachable::Refused(
                    "the webhook URL reaches this runtime's own listener, which webhooks never reach"
                        .into(),
                ),
                e => Unreachable::Unresolved(format!("{e:?}")),
            })?;
        Ok(response.status().as_u16())
    }
}

/// Marks an attempt's span failed, saying why.
fn failed(span: &tracing::Span, why: &str) {
    span.record("otel.status_code", "error");
    span.record("otel.status_description", why);
}

/// The span of one attempt on `d`: it continues the trace of the request that last wrote the
/// task, when this process still remembers it.
fn delivery_span(d: &Delivery, url: &str) -> tracing::Span {
    use crate::telemetry::trace;
    let span = tracing::info_span!(
        "push",
        otel.name = "push delivery",
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        a2a.task.id = d.config.task_id.as_str(),
        a2a.instance.id = d.config.instance_id.as_str(),
        a2a_edge.push.config = d.config.id.as_str(),
        a2a_edge.push.attempt = i64::from(d.attempts) + 1,
        server.address = %crate::egress::url_host(url).unwrap_or_default(),
    );
    let ring = trace::ring();
    if let Some(parent) = ring.and_then(|r| r.last_write(&d.config.instance_id, &d.config.task_id))
    {
        trace::follow(&span, &parent);
    }
    span
}

/// The delay before attempt `attempts + 1`: `retryBaseMs · 2^attempts`, at most `retryMaxMs`,
/// drawn uniformly from its upper half (jitter, so receivers that failed together are not hit
/// together again).
pub fn backoff(s: &PushSettings, attempts: u32) -> u64 {
    let full = s
        .retry_base_ms
        .saturating_mul(1u64 << attempts.min(32))
        .min(s.retry_max_ms);
    let half = full / 2;
    half + (uuid::Uuid::new_v4().as_u128() as u64) % (full - half + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::PushConfig;
    use crate::store::Store;
    use crate::store::memory::MemoryStore;

    #[tokio::test]
    async fn a_webhook_the_guard_refuses_at_delivery_is_given_up_without_a_request() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        // Stored as if its host had resolved to a public address at registration.
        let config = PushConfig {
            instance_id: "i".into(),
            task_id: "t".into(),
            id: "c".into(),
            body: serde_json::json!({ "id": "c", "taskId": "t", "url": url }).to_string(),
        };
        store
            .create_task(crate::store::contract::row("t", 1), None, Some(config))
            .await
            .unwrap();
        let metrics = Arc::new(Metrics::default());
        let settings = PushSettings::default();
        let guard = Webhooks::new(false, Duration::from_millis(settings.timeout_ms));
        let worker = Worker::new(store.clone(), settings, Arc::new(guard), metrics.clone());
        let stop = CancellationToken::new();
        let running = tokio::spawn(worker.run(stop.clone()));
        let status = loop {
            let status = store.push_status("i".into(), None).await.unwrap();
            if status[0].failed == 1 {
                break status;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        stop.cancel();
        running.await.unwrap();
        let why = status[0].last_status.clone().unwrap();
        assert!(why.contains("internal address 127.0.0.1"), "{why}");
        assert_eq!(status[0].pending, 0);
        assert!(
            listener.accept().is_err(),
            "the refused webhook was never connected to"
        );
        let counted = metrics.json(&Default::default());
        assert_eq!(counted["push"]["refused"], 1, "{}", counted["push"]);
    }

    #[test]
    fn a_config_is_taken_once_and_an_outdated_look_is_not_believed() {
        let key: Key = ("i".into(), "t".into(), "c".into());
        let head = |seq, attempts| Delivery {
            seq,
            config: PushConfig {
                instance_id: "i".into(),
                task_id: "t".into(),
                id: "c".into(),
                body: String::new(),
            },
            payload: String::new(),
            created_at: 0,
            attempts,
        };
        let mut t = Taken::default();
        let s = PushSettings::default();
        let take = |t: &mut Taken, d| t.take(&key, &d, "h:80", &s).is_ok();
        assert!(take(&mut t, head(5, 0)));
        assert!(!take(&mut t, head(5, 0)), "one delivery at a time");
        t.release(key.clone(), &head(5, 0), "h:80");
        assert!(
            !take(&mut t, head(5, 0)),
            "a look from before the attempt was recorded"
        );
        assert!(!take(&mut t, head(4, 3)), "an earlier notification");
        assert!(take(&mut t, head(5, 1)), "its retry");
        t.release(key.clone(), &head(5, 1), "h:80");
        assert!(take(&mut t, head(6, 0)), "the next notification");
    }

    #[test]
    fn slots_are_bounded_per_instance_and_per_host_so_others_still_go() {
        let s = PushSettings {
            concurrency: 6,
            per_instance: 2,
            per_host: 3,
            ..PushSettings::default()
        };
        let d = Delivery {
            seq: 1,
            config: PushConfig {
                instance_id: String::new(),
                task_id: String::new(),
                id: String::new(),
                body: String::new(),
            },
            payload: String::new(),
            created_at: 0,
            attempts: 0,
        };
        let key = |i: &str, c: u32| -> Key { (i.into(), "t".into(), c.to_string()) };
        let mut t = Taken::default();
        assert_eq!(t.take(&key("slow", 1), &d, "hang:80", &s), Ok(()));
        assert_eq!(t.take(&key("slow", 2), &d, "hang:80", &s), Ok(()));
        assert_eq!(
            t.take(&key("slow", 3), &d, "hang:80", &s),
            Err(Skip::This),
            "the instance has its share"
        );
        assert_eq!(t.take(&key("other", 1), &d, "hang:80", &s), Ok(()));
        assert_eq!(
            t.take(&key("third", 1), &d, "hang:80", &s),
            Err(Skip::This),
            "the host has its share"
        );
        assert_eq!(t.take(&key("third", 2), &d, "fine:80", &s), Ok(()));
        assert_eq!(t.take(&key("fourth", 1), &d, "fine:80", &s), Ok(()));
        assert_eq!(t.take(&key("fourth", 2), &d, "b:80", &s), Ok(()));
        assert_eq!(
            t.take(&key("fifth", 1), &d, "c:80", &s),
            Err(Skip::Full),
            "all six slots in use"
        );
        t.release(key("slow", 1), &d, "hang:80");
        assert_eq!(t.take(&key("fifth", 1), &d, "c:80", &s), Ok(()));
        assert!(t.instances.get("slow") == Some(&1) && t.hosts.get("hang:80") == Some(&2));
    }

    #[test]
    fn backoff_doubles_within_its_jitter_and_stops_growing_at_the_cap() {
        let s = PushSettings {
            retry_base_ms: 100,
            retry_max_ms: 1000,
            ..PushSettings::default()
        };
        for (attempts, full) in [
            (0, 100),
            (1, 200),
            (2, 400),
            (3, 800),
            (4, 1000),
            (40, 1000),
        ] {
            for _ in 0..50 {
                let d = backoff(&s, attempts);
                assert!((full / 2..=full).contains(&d), "{attempts}: {d}");
            }
        }
        let spread: HashSet<u64> = (0..50).map(|_| backoff(&s, 3)).collect();
        assert!(spread.len() > 5, "jittered: {spread:?}");
    }
}
