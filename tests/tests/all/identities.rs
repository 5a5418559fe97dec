//! Who is calling (docs/auth.md "Authentication"): named clients with their own API keys, each
//! seeing only its own tasks, contexts, message ids and push configs on both bindings; the card
//! saying what an instance takes; revocation at once; a key shown once and never kept or shown
//! again; skills and rates per client.

use a2a_edge_tests::events::Events;
use a2a_edge_tests::jsonrpc;
use a2a_edge_tests::{Server, scripted};
use reqwest::Method;
use serde_json::{Value, json};

/// A caller of instance `tck` sending `headers` with every request.
struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    fn new(s: &Server, headers: &[(&'static str, &str)]) -> Client {
        let mut map = reqwest::header::HeaderMap::new();
        for (k, v) in headers {
            map.insert(*k, v.parse().unwrap());
        }
        Client {
            http: reqwest::Client::builder()
                .default_headers(map)
                .build()
                .unwrap(),
            base: format!("{}/a2a/tck", s.base()),
        }
    }

    fn key(s: &Server, key: &str) -> Client {
        Client::new(s, &[("x-api-key", key)])
    }

    /// A JSON-RPC call: (status, body).
    async fn rpc(&self, method: &str, params: Value) -> (u16, Value) {
        a2a_edge_tests::answer(jsonrpc::request(&self.http, &self.base, method, params)).await
    }

    /// The `result` of a JSON-RPC call (panics otherwise).
    async fn ok(&self, method: &str, params: Value) -> Value {
        let (_, v) = self.rpc(method, params).await;
        assert!(v.get("result").is_some(), "{method}: {v}");
        v["result"].clone()
    }

    /// The error code of a JSON-RPC call (panics when it succeeds).
    async fn code(&self, method: &str, params: Value) -> i64 {
        let (_, v) = self.rpc(method, params).await;
        v["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method} did not fail: {v}"))
    }

    /// An HTTP+JSON request below the instance: (status, body).
    async fn rest(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("a2a-version", "1.0");
        if let Some(b) = body {
            r = r.json(&b);
        }
        a2a_edge_tests::answer(r).await
    }
}

fn send(message_id: &str, context: &str, text: &str) -> Value {
    json!({"message": {"messageId": message_id, "contextId": context, "role": "ROLE_USER", "parts": [{"text": text}]}})
}

/// `inbound.keys.create` of client `name` on `tck` with `more` fields: (status, answer).
async fn keys_create(s: &Server, name: &str, more: Value) -> (u16, Value) {
    let mut body = json!({"action": "inbound.keys.create", "id": "tck", "name": name});
    body.as_object_mut()
        .unwrap()
        .extend(more.as_object().cloned().unwrap_or_default());
    s.action(body).await
}

/// Creates the key of client `name` on `tck`; the key.
async fn create_key(s: &Server, name: &str, more: Value) -> String {
    let (status, v) = keys_create(s, name, more).await;
    assert_eq!(status, 200, "{v}");
    v["key"].as_str().unwrap().to_owned()
}

/// Why creating the key of client `name` on `tck` is refused.
async fn refused_key(s: &Server, name: &str, more: Value) -> String {
    let (status, v) = keys_create(s, name, more).await;
    assert_eq!(status, 409, "{v}");
    v["message"].as_str().unwrap().to_owned()
}

const TASK_NOT_FOUND: i64 = -32001;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_never_reach_each_others_tasks_contexts_or_message_ids() {
    let s = Server::start(scripted(|_| {})).await;
    let (alice, bob) = (
        Client::key(&s, &create_key(&s, "alice", json!({})).await),
        Client::key(&s, &create_key(&s, "bob", json!({})).await),
    );
    // Alice's task waits for input; her stream is open.
    let asked = alice
        .ok("SendMessage", send("m-1", "ctx-a", "tck-input-required"))
        .await;
    let task = asked["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        asked["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    let id = json!({"id": task});
    for method in ["GetTask", "CancelTask"] {
        assert_eq!(
            bob.code(method, id.clone()).await,
            TASK_NOT_FOUND,
            "{method}"
        );
    }
    let hook = json!({"taskId": task, "url": "https://example.com/hook"});
    assert_eq!(
        bob.code("CreateTaskPushNotificationConfig", hook).await,
        TASK_NOT_FOUND
    );
    assert_eq!(
        bob.code("ListTaskPushNotificationConfigs", json!({"taskId": task}))
            .await,
        TASK_NOT_FOUND
    );
    // Continuing her task is refused; her message id and her context are hers.
    let mut answer = send("m-2", "ctx-a", "here you are");
    answer["message"]["taskId"] = json!(task);
    assert_eq!(
        bob.code("SendMessage", answer.clone()).await,
        TASK_NOT_FOUND
    );
    let his = bob.ok("SendMessage", send("m-1", "ctx-a", "hello")).await;
    assert_ne!(
        his["task"]["id"],
        json!(task),
        "the same message id is his own"
    );
    let listed = |c: &'static str| json!({"contextId": c});
    assert_eq!(bob.ok("ListTasks", listed("ctx-a")).await["totalSize"], 1);
    assert_eq!(alice.ok("ListTasks", json!({})).await["totalSize"], 1);
    assert_eq!(
        alice.ok("GetTask", id.clone()).await["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED",
        "bob's cancel did nothing"
    );
    // The HTTP+JSON binding: the same.
    let (status, _) = bob.rest(Method::GET, &format!("/tasks/{task}"), None).await;
    assert_eq!(status, 404);
    let (status, _) = bob
        .rest(
            Method::POST,
            &format!("/tasks/{task}:cancel"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = bob
        .rest(Method::GET, &format!("/tasks/{task}:subscribe"), None)
        .await;
    assert_eq!(status, 404, "SubscribeToTask");
    let (_, page) = bob.rest(Method::GET, "/tasks", None).await;
    assert_eq!(page["totalSize"], 1, "{page}");
    let (status, got) = alice
        .rest(Method::GET, &format!("/tasks/{task}"), None)
        .await;
    assert_eq!((status, &got["id"]), (200, &json!(task)));
    // Alice continues her own task; its stream is hers alone.
    let events = Events::open(
        &alice.http,
        &alice.base,
        "SendStreamingMessage",
        answer,
        None,
    )
    .await
    .all()
    .await;
    let last = &events.last().unwrap().1["result"];
    assert!(last.to_string().contains("TASK_STATE_COMPLETED"), "{last}");
    // The operator sees every task with its principal, and filters by it.
    let (_, snap) = s.get("/a2a/api?taskPrincipal=key:alice").await;
    let tasks = snap["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{snap}");
    assert_eq!(tasks[0]["principal"], "key:alice");
    let (_, all) = s.get("/a2a/api").await;
    assert_eq!(all["tasks"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_shown_once_announced_by_the_card_and_revoked_at_once() {
    let s = Server::start(scripted(|_| {})).await;
    let card = |s: &Server| {
        let url = format!("{}/a2a/tck/agent-card.json", s.base());
        async move { a2a_edge_tests::get_json(&url).await }
    };
    assert!(card(&s).await.get("securitySchemes").is_none());
    let key = create_key(&s, "ci-bot", json!({})).await;
    assert!(key.starts_with("a2a_") && key.len() > 40, "{key}");
    let c = card(&s).await;
    assert_eq!(
        c["securitySchemes"]["apiKey"],
        json!({"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"},
            "type": "apiKey", "in": "header", "name": "X-API-Key"})
    );
    assert_eq!(
        c["securityRequirements"],
        json!([{"schemes": {"apiKey": {"list": []}}}])
    );
    assert_eq!(c["capabilities"]["extendedAgentCard"], true);

    let bot = Client::key(&s, &key);
    assert!(
        bot.ok("SendMessage", send("k-1", "c", "hi"))
            .await
            .get("task")
            .is_some()
    );
    let bearer = Client::new(&s, &[("authorization", &format!("Bearer {key}"))]);
    assert_eq!(
        bearer.ok("ListTasks", json!({})).await["totalSize"],
        1,
        "the key as a bearer token"
    );
    for (who, c) in [
        ("nobody", Client::new(&s, &[])),
        ("a wrong key", Client::key(&s, "a2a_wrong")),
    ] {
        let (status, v) = c.rpc("ListTasks", json!({})).await;
        assert_eq!(status, 401, "{who}: {v}");
        assert!(v.to_string().contains("X-API-Key"), "{who}: {v}");
    }
    let twice = refused_key(&s, "ci-bot", json!({})).await;
    assert!(twice.contains("already has a key"), "{twice}");

    // Never shown again, never kept: the list, the snapshot and the database hold no key.
    let (_, listed) = s
        .action(json!({"action": "inbound.keys.list", "id": "tck"}))
        .await;
    assert_eq!(listed["keys"][0]["name"], "ci-bot");
    assert_eq!(listed["keys"][0]["principal"], "key:ci-bot");
    let (_, snap) = s.get("/a2a/api").await;
    let db = std::fs::read(s.dir.path().join("a2a-edge.db")).unwrap();
    for (what, text) in [
        ("the list", listed.to_string()),
        ("the snapshot", snap.to_string()),
        ("the database", String::from_utf8_lossy(&db).into_owned()),
    ] {
        assert!(!text.contains(&key[4..]), "{what} holds the key");
    }
    let hash = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(key.as_bytes()))
    };
    for (what, text) in [
        ("the list", listed.to_string()),
        ("the snapshot", snap.to_string()),
    ] {
        assert!(!text.contains(&hash), "{what} shows the key's hash");
    }

    // The last credential is not revoked by mistake: that would open the instance.
    let revoke = |name: &str| json!({"action": "inbound.keys.revoke", "id": "tck", "name": name});
    let (status, last) = s.action(revoke("ci-bot")).await;
    assert_eq!(status, 409, "{last}");
    assert!(
        last["message"].as_str().unwrap().contains("\"open\": true"),
        "{last}"
    );
    let other = Client::key(&s, &create_key(&s, "other", json!({})).await);
    let (status, v) = s.action(revoke("ci-bot")).await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = bot.rpc("ListTasks", json!({})).await;
    assert_eq!(status, 401, "revoked at once");
    // Its name stays taken: a new client never inherits the revoked one's tasks.
    let reused = refused_key(&s, "ci-bot", json!({})).await;
    assert!(reused.contains("revoked client"), "{reused}");
    assert_eq!(other.rpc("ListTasks", json!({})).await.0, 200);
    let mut open = revoke("other");
    open["open"] = json!(true);
    let (status, v) = s.action(open).await;
    assert_eq!(status, 200, "{v}");
    assert!(
        card(&s).await.get("securitySchemes").is_none(),
        "opened, as asked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_keeps_to_its_skills_and_its_own_rate() {
    let s = Server::start(scripted(|d| {
        d.limits = Some(a2a_edge::records::Limits {
            rate_per_second: 0.0,
            rate_burst: 3,
            ..Default::default()
        })
    }))
    .await;
    let unknown = refused_key(&s, "x", json!({"skills": ["nope"]})).await;
    assert!(unknown.contains("announces no skill \"nope\""), "{unknown}");
    let announced = s.app().instances()[0].announced_skills();
    let only = create_key(&s, "only", json!({"skills": [announced[0]]})).await;
    let slow = Client::key(
        &s,
        &create_key(&s, "slow", json!({"ratePerSecond": 1})).await,
    );
    let fast = Client::key(&s, &create_key(&s, "fast", json!({})).await);

    let only = Client::key(&s, &only);
    let mut other = send("s-1", "c", "hi");
    other["message"]["metadata"] = json!({"skill": "not-announced"});
    let (_, v) = only.rpc("SendMessage", other).await;
    assert!(v.get("error").is_some(), "{v}");
    assert!(
        v.to_string().contains(&announced[0]),
        "the error names what it may call: {v}"
    );

    // Burst 3 at 1/s for "slow"; "fast" (the instance's rate: off) is not held back by it.
    let mut refused = None;
    for n in 0..5 {
        let (_, v) = slow
            .rpc("SendMessage", send(&format!("r-{n}"), "c", "hi"))
            .await;
        if v["error"]["code"] == -32000 {
            refused = Some(n);
            break;
        }
    }
    assert_eq!(
        refused,
        Some(3),
        "the 4th message within the second is refused"
    );
    for n in 0..5 {
        let (_, v) = fast
            .rpc("SendMessage", send(&format!("f-{n}"), "c", "hi"))
            .await;
        assert!(v.get("result").is_some(), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_runs_at_most_its_quota_of_tasks_at_once() {
    let s = Server::start(scripted(|d| {
        d.limits = Some(a2a_edge::records::Limits {
            max_concurrent_tasks: 3,
            max_concurrent_tasks_per_principal: 1,
            ..Default::default()
        })
    }))
    .await;
    let alice = Client::key(&s, &create_key(&s, "alice", json!({})).await);
    let bob = Client::key(&s, &create_key(&s, "bob", json!({})).await);
    // A long-running task holds alice's one slot until it is canceled.
    let long = |id: &str| {
        let mut p = send(id, "c", "x");
        p["configuration"] = json!({"returnImmediately": true});
        p
    };
    let first = alice.ok("SendMessage", long("tck-long-running-a1")).await;
    assert_eq!(
        first["task"]["status"]["state"], "TASK_STATE_WORKING",
        "{first}"
    );
    let second = alice
        .ok("SendMessage", send("tck-complete-task-a2", "c", "x"))
        .await;
    assert_eq!(
        second["task"]["status"]["state"], "TASK_STATE_FAILED",
        "{second}"
    );
    let why = second["task"]["status"]["message"]["parts"][0]["text"].to_string();
    assert!(
        why.contains("concurrency quota") && why.contains("at most 1"),
        "{why}"
    );
    // Bob's quota is his own.
    let his = bob.ok("SendMessage", long("tck-long-running-b1")).await;
    assert_eq!(
        his["task"]["status"]["state"], "TASK_STATE_WORKING",
        "{his}"
    );
    // Once alice's task ends, her slot is back.
    alice
        .ok("CancelTask", json!({"id": first["task"]["id"]}))
        .await;
    let mut state = Value::Null;
    for n in 0..50 {
        let r = alice
            .ok(
                "SendMessage",
                send(&format!("tck-complete-task-a{n}x"), "c", "x"),
            )
            .await;
        state = r["task"]["status"]["state"].clone();
        if state == "TASK_STATE_COMPLETED" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(state, "TASK_STATE_COMPLETED");
}

/// The `WWW-Authenticate` of a ListTasks with `Authorization: Bearer <token>` (its status must
/// be 401), or `None` when it passed.
async fn challenge(s: &Server, token: &str) -> Option<String> {
    let c = Client::new(s, &[("authorization", &format!("Bearer {token}"))]);
    let r = jsonrpc::request(&c.http, &c.base, "ListTasks", json!({}))
        .send()
        .await
        .unwrap();
    if r.status() == 200 {
        return None;
    }
    assert_eq!(r.status(), 401);
    let h = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    Some(h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_tokens_of_a_loopback_issuer_pass_only_when_valid_and_its_rotated_keys_are_picked_up()
{
    use a2a_edge_tests::issuer::{Issuer, unsigned};
    let issuer = Issuer::start(&["k1", "k2", "k3"], &["k1", "k2"]).await;
    let mut config = scripted(|d| {
        let mut o = a2a_edge::records::OidcSettings::new(&issuer.url(), "edge");
        o.scopes = vec!["a2a:call".into()];
        d.oidc = Some(o);
    });
    config.identity.jwks_min_refresh_ms = 1500;
    let s = Server::start(config).await;

    let card = a2a_edge_tests::get_json(&format!("{}/a2a/tck/agent-card.json", s.base())).await;
    let discovery = format!("{}/.well-known/openid-configuration", issuer.url());
    assert_eq!(
        card["securitySchemes"],
        json!({"oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": discovery},
            "type": "openIdConnect", "openIdConnectUrl": discovery}})
    );
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"oidc": {"list": ["a2a:call"]}}}])
    );

    // A valid token names its principal; another subject does not see its tasks.
    let good = |sub: &str| issuer.claims("edge", sub, "openid a2a:call");
    let alice = Client::new(
        &s,
        &[(
            "authorization",
            &format!("Bearer {}", issuer.sign("k1", &good("alice"))),
        )],
    );
    let task = alice.ok("SendMessage", send("o-1", "c", "hi")).await["task"]["id"].clone();
    let bob = Client::new(
        &s,
        &[(
            "authorization",
            &format!("Bearer {}", issuer.sign("k2", &good("bob"))),
        )],
    );
    assert_eq!(
        bob.code("GetTask", json!({"id": task})).await,
        TASK_NOT_FOUND
    );
    assert_eq!(bob.ok("ListTasks", json!({})).await["totalSize"], 0);
    assert_eq!(issuer.fetches(), 1, "the key set is cached");

    // Each wrong token: 401, invalid_token (or insufficient_scope), nothing more.
    let now = jsonwebtoken::get_current_timestamp();
    let with = |change: Value| {
        let mut c = good("mallory");
        c.as_object_mut()
            .unwrap()
            .extend(change.as_object().unwrap().clone());
        c
    };
    let invalid = "Bearer realm=\"tck\", error=\"invalid_token\"".to_owned();
    let cases = [
        (
            "expired",
            issuer.sign("k1", &with(json!({"exp": now - 600, "iat": now - 4000}))),
        ),
        (
            "not yet valid",
            issuer.sign("k1", &with(json!({"nbf": now + 600}))),
        ),
        (
            "wrong audience",
            issuer.sign("k1", &with(json!({"aud": "other"}))),
        ),
        (
            "wrong issuer",
            issuer.sign("k1", &with(json!({"iss": "http://127.0.0.1:9/"}))),
        ),
        ("alg none", unsigned(&good("mallory"))),
        (
            "HS256 keyed with the public key",
            issuer.sign_with_public_key_as_hmac("k1", &good("mallory")),
        ),
        ("unknown kid", issuer.sign("k3", &good("mallory"))),
        (
            "a string exp",
            issuer.sign("k1", &with(json!({"exp": "9999999999"}))),
        ),
        ("not a JWT", "a.b.c".to_owned()),
    ];
    for (what, token) in cases {
        assert_eq!(
            challenge(&s, &token).await.as_deref(),
            Some(invalid.as_str()),
            "{what}"
        );
    }
    let narrow = issuer.sign("k1", &with(json!({"scope": "openid"})));
    assert_eq!(
        challenge(&s, &narrow).await.as_deref(),
        Some("Bearer realm=\"tck\", error=\"insufficient_scope\", scope=\"a2a:call\"")
    );
    assert_eq!(challenge(&s, "").await.as_deref(), Some(invalid.as_str()));
    assert_eq!(
        issuer.fetches(),
        1,
        "an unknown kid right after a fetch waits for jwksMinRefreshMs"
    );

    // The issuer rotates: k3 in, k1 out. After the refresh interval k3 passes without a
    // restart, and k1 fails.
    issuer.publish(&["k2", "k3"]);
    tokio::time::sleep(std::time::Duration::from_millis(1600)).await;
    let k3 = issuer.sign("k3", &good("carol"));
    assert_eq!(challenge(&s, &k3).await, None, "the rotated-in key");
    assert_eq!(issuer.fetches(), 2);
    let k1 = issuer.sign("k1", &good("alice"));
    assert_eq!(challenge(&s, &k1).await.as_deref(), Some(invalid.as_str()));

    // The operator sees the scheme, and each task with its principal.
    let (_, snap) = s.get("/a2a/api?taskPrincipal=oidc:alice").await;
    assert_eq!(snap["tasks"].as_array().unwrap().len(), 1, "{snap}");
    let instance = &snap["inbounds"][0];
    assert_eq!(instance["oidc"]["issuer"], issuer.url(), "{instance}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_oidc_key_answers_at_once_while_the_issuers_keys_are_refetched() {
    use a2a_edge_tests::issuer::Issuer;
    use std::time::{Duration, Instant};
    let issuer = Issuer::start(&["k1", "k2"], &["k1"]).await;
    let mut config = scripted(|d| {
        d.oidc = Some(a2a_edge::records::OidcSettings::new(&issuer.url(), "edge"));
    });
    config.identity.jwks_min_refresh_ms = 200;
    let s = Server::start(config).await;
    let token = |kid: &str, sub: &str| issuer.sign(kid, &issuer.claims("edge", sub, "a2a:call"));
    let (alice, mallory) = (token("k1", "alice"), token("k2", "mallory"));
    assert_eq!(
        challenge(&s, &alice).await,
        None,
        "the first call loads the keys"
    );
    assert_eq!(issuer.fetches(), 1);

    // The key set stops answering; past jwksMinRefreshMs a token naming a kid the edge lacks
    // starts a refetch that hangs until it times out (5 s). Meanwhile a known kid answers at
    // once, and another unknown kid waits for that fetch instead of starting its own.
    tokio::time::sleep(Duration::from_millis(300)).await;
    issuer.hang_key_set(true);
    let invalid = Some("Bearer realm=\"tck\", error=\"invalid_token\"".to_owned());
    let unknown = async {
        let started = Instant::now();
        assert_eq!(challenge(&s, &mallory).await, invalid, "an unknown kid");
        started.elapsed()
    };
    let meanwhile = async {
        let started = Instant::now();
        while issuer.hung_fetches() == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "the refetch never began"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut slowest = Duration::ZERO;
        for _ in 0..3 {
            let call = Instant::now();
            assert_eq!(challenge(&s, &alice).await, None, "a known kid");
            slowest = slowest.max(call.elapsed());
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert_eq!(
            challenge(&s, &mallory).await,
            invalid,
            "a second unknown kid"
        );
        slowest
    };
    let (waited, slowest) = tokio::join!(unknown, meanwhile);
    assert!(
        slowest < Duration::from_millis(1500),
        "a known kid waited {slowest:?} for the refetch of the keys"
    );
    assert!(
        waited < Duration::from_secs(8),
        "an unknown kid waited {waited:?}: at most a fetch's 5 s"
    );
    assert_eq!(issuer.hung_fetches(), 1, "one fetch at a time");

    // The key set answers again: the next unknown kid fetches it, and the rotated-in key passes.
    issuer.hang_key_set(false);
    issuer.publish(&["k1", "k2"]);
    assert_eq!(challenge(&s, &mallory).await, None, "the rotated-in key");
    assert_eq!(issuer.fetches(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oidc_issuer_over_plain_http_is_refused_unless_on_loopback() {
    let s = Server::start(scripted(|_| {})).await;
    let set_oidc = |more: Value| {
        let mut body = json!({"action": "inbound.setOidc", "id": "tck",
            "issuer": "https://issuer.example.com", "audience": "edge"});
        body.as_object_mut()
            .unwrap()
            .extend(more.as_object().cloned().unwrap_or_default());
        s.action(body)
    };
    for (bad, field) in [
        (json!({"issuer": "http://issuer.example.com"}), "issuer"),
        (json!({"issuer": "http://10.0.0.7:8080"}), "issuer"),
        (
            json!({"jwksUrl": "http://keys.example.com/jwks"}),
            "jwksUrl",
        ),
    ] {
        let (status, v) = set_oidc(bad.clone()).await;
        assert_eq!(status, 409, "{bad}: {v}");
        let m = v["message"].as_str().unwrap();
        assert!(
            m.starts_with(field) && m.contains("must use https://"),
            "{bad}: {m}"
        );
    }
    for fine in [
        json!({}),
        json!({"issuer": "http://127.0.0.1:9"}),
        json!({"issuer": "http://localhost:9", "jwksUrl": "http://127.0.0.1:9/jwks"}),
    ] {
        let (status, v) = set_oidc(fine.clone()).await;
        assert_eq!(status, 200, "{fine}: {v}");
    }
}

/// Every file under `dir`, read whole (the data directory, checked for secrets in clear).
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else if let Ok(bytes) = std::fs::read(&p) {
            out.push((p, bytes));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbound_oauth_client_gets_its_token_renews_it_before_expiry_and_never_shows_it() {
    use a2a_edge_tests::issuer::Issuer;
    use std::time::Duration;
    const SECRET: &str = "client/secret+with&form=chars";
    let issuer = Issuer::start(&["k1"], &["k1"]).await;
    // Tokens live 4 s: the runtime renews them at 3 s, a quarter early.
    issuer.grant_to("edge-out", SECRET, "edge", 4);
    let s = Server::start(scripted(|d| {
        let mut o = a2a_edge::records::OidcSettings::new(&issuer.url(), "edge");
        o.scopes = vec!["a2a:call".into()];
        d.oidc = Some(o);
    }))
    .await;
    // The connection calls this same server's OIDC-guarded instance; discovering it says what
    // would satisfy the card.
    let card = format!("{}/a2a/tck/agent-card.json", s.base());
    let (status, v) = s
        .action(json!({"action": "outbound.discover", "agentCardUrl": card}))
        .await;
    assert_eq!(status, 200, "{v}");
    let security = &v["preview"]["security"];
    assert_eq!(
        (
            &security["required"],
            &security["satisfiable"],
            &security["satisfied"]
        ),
        (&json!(true), &json!(true), &json!(false)),
        "{security}"
    );
    assert_eq!(
        security["schemes"][0]["kind"], "openIdConnect",
        "{security}"
    );
    assert_eq!(
        security["schemes"][0]["openIdConnectUrl"],
        format!("{}/.well-known/openid-configuration", issuer.url())
    );
    let (status, v) = s
        .action(json!({"action": "outbound.create", "name": "self", "agentCardUrl": card}))
        .await;
    assert_eq!(status, 200, "{v}");
    let id = v["id"].as_str().unwrap().to_owned();
    let call = |prompt: &'static str| {
        s.action(json!({"action": "outbound.call", "id": id, "skill": "chat", "prompt": prompt}))
    };
    let (status, v) = call("no token").await;
    assert_ne!(status, 200, "without a token the instance refuses: {v}");

    let oauth = |secret: &str| json!({"action": "outbound.setOAuth", "id": id, "tokenUrl": issuer.token_url(), "clientId": "edge-out", "clientSecret": secret, "scopes": ["a2a:call"]});
    // A wrong secret: the endpoint's refusal, in words, never the secret.
    let (status, v) = s.action(oauth("wrong-secret")).await;
    let m = v["message"].as_str().unwrap();
    assert_eq!(status, 409, "{v}");
    assert!(
        m.contains("invalid_client")
            && m.contains("clientSecretEnv")
            && !m.contains("wrong-secret"),
        "{m}"
    );
    assert!(issuer.grants().is_empty());
    // Bad settings are refused before anything is asked.
    for (bad, why) in [
        (json!({"tokenUrl": "ftp://x/token"}), "tokenUrl"),
        (json!({"clientId": "has space"}), "clientId"),
        (json!({"clientSecretEnv": "X"}), "not both"),
    ] {
        let mut body = oauth(SECRET);
        body.as_object_mut()
            .unwrap()
            .extend(bad.as_object().unwrap().clone());
        let (status, v) = s.action(body).await;
        assert_eq!(status, 409, "{v}");
        assert!(v["message"].as_str().unwrap().contains(why), "{why}: {v}");
    }

    let (status, v) = s.action(oauth(SECRET)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(issuer.grants().len(), 1, "connecting asked for the token");
    let (status, v) = call("first").await;
    assert_eq!((status, &v["result"]), (200, &json!("first")), "{v}");
    let (status, v) = call("second").await;
    assert_eq!((status, &v["result"]), (200, &json!("second")), "{v}");
    assert_eq!(issuer.grants().len(), 1, "the token is kept while fresh");

    // The remote instance saw the client as its principal.
    let (_, snap) = s.get("/a2a/api?taskPrincipal=oidc:edge-out").await;
    assert_eq!(snap["tasks"].as_array().unwrap().len(), 2, "{snap}");

    // Past three quarters of its lifetime (before it expires) the token is renewed.
    let first = issuer.grants()[0];
    tokio::time::sleep_until((first + Duration::from_millis(3300)).into()).await;
    let (status, v) = call("third").await;
    assert_eq!((status, &v["result"]), (200, &json!("third")), "{v}");
    let grants = issuer.grants();
    assert_eq!(grants.len(), 2, "renewed once");
    let renewed = grants[1] - first;
    assert!(
        renewed >= Duration::from_secs(3) && renewed < Duration::from_secs(4),
        "renewed {renewed:?} after the first grant: before the 4 s expiry"
    );

    // When renewing fails, the kept token serves until it expires; then the call fails saying
    // why, and the failure is remembered (nobody asks again at once).
    issuer.token_endpoint_down(true);
    let second = grants[1];
    tokio::time::sleep_until((second + Duration::from_millis(3300)).into()).await;
    let (status, v) = call("kept").await;
    assert_eq!((status, &v["result"]), (200, &json!("kept")), "{v}");
    tokio::time::sleep_until((second + Duration::from_millis(4300)).into()).await;
    let (status, v) = call("expired").await;
    assert_ne!(status, 200, "{v}");
    assert!(v.to_string().contains("temporarily_unavailable"), "{v}");
    issuer.token_endpoint_down(false);
    assert_eq!(issuer.grants().len(), 2);

    // The operator sees the client, never its secret; of the data directory only the
    // credentials file (mode 0600) holds it.
    let (_, snap) = s.get("/a2a/api").await;
    let view = &snap["outbounds"][0];
    assert_eq!(
        view["oauth"],
        json!({"tokenUrl": issuer.token_url(), "clientId": "edge-out", "clientSecretEnv": format!("A2A_OUTBOUND_{}_CLIENT_SECRET", id.to_uppercase().replace('-', "_")), "scopes": ["a2a:call"]})
    );
    assert_eq!(view["security"]["satisfied"], true, "{view}");
    assert!(!snap.to_string().contains(SECRET));
    let holding: Vec<_> = files_under(s.dir.path())
        .into_iter()
        .filter(|(_, bytes)| bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()))
        .map(|(path, _)| path)
        .collect();
    let credentials = s.dir.path().join("credentials.json");
    assert_eq!(holding, vec![credentials.clone()]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&credentials)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // Clearing the client: the connection sends no token again, and the stored secret goes.
    let (status, v) = s
        .action(json!({"action": "outbound.setOAuth", "id": id, "clear": true}))
        .await;
    assert_eq!(status, 200, "{v}");
    let kept = std::fs::read_to_string(&credentials).unwrap();
    assert!(!kept.contains(SECRET), "{kept}");
    let (status, v) = call("cleared").await;
    assert_ne!(status, 200, "{v}");
}
