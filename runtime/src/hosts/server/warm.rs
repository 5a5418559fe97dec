//! Kept ("warm") instances: an instance of the built-in server component whose request ended
//! cleanly is kept, with its store, for the next request of the same instance record and component,
//! instead of being torn down and instantiated again.
//!
//! What makes that safe: the component is ours and keeps nothing of a request for the next (its
//! one static is the instance's info, which carries no secret and which it takes again when its
//! stamp changes; its allocator zeroes what it frees and it scrubs its stack before it answers,
//! see `components/a2a-server`); its store data is rebuilt for every request, so no capability
//! outlives the request it was prepared for; an instance is kept only when its request returned
//! without a trap and left no resource in its table; and each request still gets its own CPU
//! budget. A third-party component gets a fresh instance per request unless its instance record
//! says `reuseInstances`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use wasmtime::Store;
use wasmtime_wasi_http::p2::bindings::Proxy;

use super::state::State;

/// How long an instance is kept without a request.
const IDLE_FOR: Duration = Duration::from_secs(30);

/// An instance between two requests, with its store.
pub struct Idle {
    /// The store, whose data the next request replaces.
    pub store: Store<State>,
    /// The instance's exports.
    pub proxy: Proxy,
}

/// Which instances may serve a request: the same instance record on the same component.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The instance record.
    pub instance: String,
    /// The component's sha256.
    pub component: String,
}

/// The idle instances (`T`, an [`Idle`] but in tests), at most `cap` in all, each for at most
/// [`IDLE_FOR`].
pub struct Warm<T = Idle> {
    idle: Mutex<HashMap<Key, Vec<(Instant, T)>>>,
    cap: usize,
}

impl<T: Send + 'static> Warm<T> {
    /// At most `cap` idle instances (0 keeps none); when a tokio runtime runs, a task drops the
    /// ones idle for longer than [`IDLE_FOR`] until the pool is gone.
    pub fn new(cap: usize) -> Arc<Warm<T>> {
        let warm = Arc::new(Warm {
            idle: Mutex::default(),
            cap,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sweep(Arc::downgrade(&warm)));
        }
        warm
    }

    /// The instance idle the shortest for `key`, if one is kept.
    pub fn take(&self, key: &Key) -> Option<T> {
        let mut idle = self.idle.lock().expect("warm pool");
        let list = idle.get_mut(key)?;
        let found = list.pop().map(|(_, instance)| instance);
        if list.is_empty() {
            idle.remove(key);
        }
        found
    }

    /// Keeps `instance` for `key` while fewer than the cap are kept; drops it otherwise.
    pub fn keep(&self, key: Key, instance: T) {
        let mut idle = self.idle.lock().expect("warm pool");
        if idle.values().map(Vec::len).sum::<usize>() < self.cap {
            idle.entry(key)
                .or_default()
                .push((Instant::now(), instance));
            return;
        }
        drop(idle);
        drop(instance);
    }

    /// Drops one idle instance, to free its slot in the engine's pool; whether there was one.
    pub fn evict(&self) -> bool {
        let evicted = {
            let mut idle = self.idle.lock().expect("warm pool");
            let Some(key) = idle.keys().next().cloned() else {
                return false;
            };
            let list = idle.get_mut(&key).expect("listed");
            let evicted = list.remove(0);
            if list.is_empty() {
                idle.remove(&key);
            }
            evicted
        };
        drop(evicted);
        true
    }

    /// Idle instances kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.idle
            .lock()
            .expect("warm pool")
            .values()
            .map(Vec::len)
            .sum()
    }

    /// Drops the instances idle since before `before`.
    fn expire(&self, before: Instant) {
        let expired: Vec<_> = {
            let mut idle = self.idle.lock().expect("warm pool");
            let expired = idle
                .values_mut()
                .flat_map(|list| {
                    let fresh = list.partition_point(|(since, _)| *since < before);
                    list.drain(..fresh).collect::<Vec<_>>()
                })
                .collect();
            idle.retain(|_, list| !list.is_empty());
            expired
        };
        drop(expired);
    }
}

/// Expires idle instances every few seconds while `warm` lives.
async fn sweep<T: Send + 'static>(warm: Weak<Warm<T>>) {
    let mut every = tokio::time::interval(IDLE_FOR / 4);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(warm) = warm.upgrade() else { return };
        let Some(before) = Instant::now().checked_sub(IDLE_FOR) else {
            continue;
        };
        warm.expire(before);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use http_body_util::BodyExt;

    use super::super::Host;
    use super::super::services::{CallNote, Invocation, Route, test_instance, test_services};
    use super::super::state::KEEP_MEMORY;
    use super::*;
    use crate::config::RuntimeSettings;
    use crate::engine::Engine;
    use crate::engine::registry::DEFAULT_COMPONENT;
    use crate::instances::RouteKind;

    /// A host whose engine lets the test read its instances' memories, keeping up to 4 idle.
    fn host(dir: &std::path::Path) -> Host {
        let settings = RuntimeSettings {
            max_instances: 4,
            ..RuntimeSettings::default()
        };
        let engine = Arc::new(Engine::debugging(&settings, dir).unwrap());
        let mut services = test_services(dir);
        (services.max_instances, services.warm_instances) = (4, 4);
        Host::new(engine, dir, services).unwrap()
    }

    async fn rpc(host: &Host, method: &str, params: serde_json::Value) -> serde_json::Value {
        let call = Invocation {
            instance: test_instance("w", None),
            route: Route::Http(RouteKind::Rpc),
            peer: "127.0.0.1:1".parse().unwrap(),
            caller: None,
            note: CallNote::default(),
        };
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let req = http::Request::post("http://h/a2a/w")
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(Bytes::from(body.to_string()))
            .unwrap();
        let answer = host.handle(call, req).await.into_body().collect().await;
        serde_json::from_slice(&answer.unwrap().to_bytes()).unwrap()
    }

    /// Waits until `n` instances are idle (an invocation is kept once it has returned, which may
    /// be after its answer was read).
    async fn idle(host: &Host, n: usize) {
        for _ in 0..500 {
            if host.warm.len() == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{} instances idle, not {n}", host.warm.len());
    }

    fn key(host: &Host) -> Key {
        Key {
            instance: "w".into(),
            component: host.registry.get(DEFAULT_COMPONENT).unwrap().sha256.clone(),
        }
    }

    /// Every linear memory of the instances in `store`.
    fn memories(store: &mut Store<State>) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        for instance in store.debug_all_instances() {
            for index in 0.. {
                let Some(memory) = instance.debug_memory(&mut *store, index) else {
                    break;
                };
                all.push(memory.data(&*store).to_vec());
            }
        }
        all
    }

    fn holds(memories: &[Vec<u8>], needle: &str) -> bool {
        memories
            .iter()
            .any(|m| m.windows(needle.len()).any(|w| w == needle.as_bytes()))
    }

    #[tokio::test]
    async fn a_kept_instance_holds_no_byte_of_the_request_it_served_and_serves_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let sent = rpc(
            &host,
            "SendMessage",
            serde_json::json!({"message": {"messageId": "m-7f3a9c21d4", "contextId": "ctx-52be81e0aa",
                "role": "ROLE_USER", "parts": [{"text": "the-secret-b61d0e47"}]}}),
        )
        .await;
        let task = &sent["result"]["task"];
        let task_id = task["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{sent}"))
            .to_owned();
        idle(&host, 1).await;

        let Idle { mut store, proxy } = host.warm.take(&key(&host)).unwrap();
        let memories = memories(&mut store);
        assert!(
            holds(&memories, "A2A-Version"),
            "the memories read are the component's (its data segment)"
        );
        for secret in [
            "the-secret-b61d0e47",
            "m-7f3a9c21d4",
            "ctx-52be81e0aa",
            &task_id,
        ] {
            assert!(!holds(&memories, secret), "{secret} stayed in the instance");
        }
        host.warm.keep(key(&host), Idle { store, proxy });

        let got = rpc(&host, "GetTask", serde_json::json!({"id": task_id})).await;
        assert_eq!(got["result"]["id"], task_id.as_str(), "{got}");
        assert_eq!(
            got["result"]["history"][0]["parts"][0]["text"],
            "the-secret-b61d0e47"
        );
        idle(&host, 1).await;
        assert_eq!(
            (
                host.services.metrics.instantiate_time.count(),
                host.services.metrics.reuses()
            ),
            (1, 1),
            "the second request ran on the kept instance"
        );
    }

    #[tokio::test]
    async fn a_kept_instance_holds_no_message_id_of_the_request_it_served() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let send = serde_json::json!({"message": {"messageId": "m-resent",
            "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
        let first = rpc(&host, "SendMessage", send.clone()).await;
        idle(&host, 1).await;
        // A resend reads the message's task and writes nothing: its hold on the id ends with
        // the request, not when its kept instance is renewed or expires.
        let again = rpc(&host, "SendMessage", send).await;
        assert_eq!(again["result"]["task"]["id"], first["result"]["task"]["id"]);
        idle(&host, 1).await;
        assert_eq!(
            host.services.holds.len(),
            0,
            "the kept instance holds no id"
        );
    }

    #[tokio::test]
    async fn an_instance_that_trapped_or_grew_large_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(dir.path());
        let send = |text: String| {
            serde_json::json!({"message": {"messageId": uuid::Uuid::now_v7().to_string(),
                "role": "ROLE_USER", "parts": [{"text": text}]}})
        };
        let grown = rpc(&host, "SendMessage", send("x".repeat(KEEP_MEMORY / 2))).await;
        assert!(grown["result"]["task"]["id"].is_string(), "{grown}");
        let trapped = rpc(&host, "SendMessage", send("x".repeat(48 << 20))).await;
        assert_eq!(trapped["error"]["code"], -32603, "out of memory");
        assert_eq!(host.services.metrics.traps(), 1);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(host.warm.len(), 0, "neither is kept");
        let small = rpc(&host, "SendMessage", send("small".into())).await;
        assert!(small["result"]["task"]["id"].is_string(), "{small}");
        idle(&host, 1).await;
    }

    #[test]
    fn keeps_up_to_its_cap_hands_out_the_latest_and_expires_the_idle() {
        // No tokio runtime here, so no sweeper: the test expires by hand.
        let key = |instance: &str| Key {
            instance: instance.into(),
            component: "c".into(),
        };
        let (a, b) = (key("a"), key("b"));
        let warm = Warm::new(3);
        warm.keep(a.clone(), 1);
        std::thread::sleep(Duration::from_millis(2));
        let between = Instant::now();
        warm.keep(a.clone(), 2);
        warm.keep(b.clone(), 3);
        warm.keep(b.clone(), 4);
        assert_eq!(warm.len(), 3, "the fourth is over the cap");
        assert_eq!(warm.take(&b), Some(3));
        assert_eq!(warm.take(&b), None, "an instance serves its own key only");
        warm.expire(between);
        assert_eq!(warm.len(), 1, "the one idle since before is dropped");
        assert_eq!(warm.take(&a), Some(2), "the latest kept comes first");
        warm.keep(a.clone(), 5);
        assert!(warm.evict());
        assert!(!warm.evict(), "nothing left to evict");
        let none = Warm::new(0);
        none.keep(a.clone(), 6);
        assert_eq!(none.take(&a), None, "a cap of 0 keeps nothing");
    }
}
