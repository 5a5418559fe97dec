//! A binary of its own: the statement counter it reads is the process's.
//!
//! What one echo `SendMessage` and one `GetTask` cost, counted rather than timed (timings are
//! noise on shared machines): the host functions the component calls and the SQL statements the
//! store runs. A change that adds to either fails here; lower the ceilings when a change removes
//! some.

use serde_json::{Value, json};

use a2a_edge_tests::Server;
use a2a_edge_tests::jsonrpc::request;

/// Host functions (WASI and `a2a:edge`) one echo SendMessage calls: `exchange.begin` (the
/// request, its route, the instance's info only when it changed, the arrival's times and random
/// bytes), the rate check, the idempotency lookup, the slot, the held task, the turn started
/// holding the slot, its events taken with their time, the settled write, the turn's drop and
/// `exchange.finish` (the answer and its record). 48 before the answer's default status, 43
/// before `a2a:edge/exchange`, 21 before `turn.take`, 20 before `begin`, `finish`, `take-timed`
/// and `start-turn-holding`.
const MAX_HOST_CALLS: u64 = 11;
/// Host functions one GetTask calls: `begin`, the read, `finish` (6 before).
const MAX_GET_TASK_HOST_CALLS: u64 = 3;
/// SQL statements it runs, as SQLite's trace counts them, its task log's fold included: on the
/// request's path the idempotency lookup, then one group commit (begin, savepoint, claim check,
/// id check, the log's append, release, commit); the fold of its record alone (begin, savepoint,
/// the task insert and the trigger keeping the task counts, the conversation's summary, the claim
/// record, the log emptied, release, commit). Sends back to back share a fold: the task's four
/// statements each, the fold's six once per 64 (11 before the log, all on the request's path).
const MAX_STATEMENTS: u64 = 18;

async fn json(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

async fn counters(client: &reqwest::Client, base: &str) -> (u64, u64) {
    let m = json(client.get(format!("{base}/a2a/api/metrics"))).await;
    (
        m["components"]["hostCalls"].as_u64().unwrap(),
        m["store"]["statements"].as_u64().unwrap(),
    )
}

async fn send(client: &reqwest::Client, base: &str, message_id: &str) -> Value {
    let params = json!({"message": {
        "messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "hello"}]}});
    let answer = json(request(
        client,
        &format!("{base}/a2a/demo"),
        "SendMessage",
        params,
    ))
    .await;
    assert_eq!(
        answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answer}"
    );
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_echo_send_message_costs_no_more_host_calls_and_statements_than_today() {
    let served = Server::default().await;
    let (client, base) = (reqwest::Client::new(), served.base());
    send(&client, &base, "warm-up").await;

    let mut seen = Vec::new();
    for round in 0..5 {
        let before = counters(&client, &base).await;
        send(&client, &base, &format!("counted-{round}")).await;
        let after = counters(&client, &base).await;
        // A metrics read counts statements after running its own (the task counts, which first
        // fold the send's task-log record): subtract one idle read's worth.
        let idle = counters(&client, &base).await;
        let host_calls = after.0 - before.0;
        let statements = (after.1 - before.1) - (idle.1 - after.1);
        assert_eq!(idle.0, after.0, "a metrics read calls no component");
        seen.push((host_calls, statements));
    }
    // The turn's events come from another task: when the component asks before they are there it
    // waits once more (a poll and an empty `next`), so host calls are counted at their least.
    assert!(
        seen.windows(2).all(|w| w[0].1 == w[1].1),
        "every send runs the same statements: {seen:?}"
    );
    let host_calls = seen.iter().map(|s| s.0).min().unwrap();
    let statements = seen[0].1;
    println!("one echo SendMessage: {host_calls} host calls, {statements} SQL statements");
    assert!(
        host_calls > 10 && statements > 0,
        "the counters count: {seen:?}"
    );
    assert!(
        host_calls <= MAX_HOST_CALLS,
        "one echo SendMessage made {host_calls} host calls (at most {MAX_HOST_CALLS})"
    );
    assert!(
        statements <= MAX_STATEMENTS,
        "one echo SendMessage ran {statements} SQL statements (at most {MAX_STATEMENTS})"
    );

    let task = send(&client, &base, "read-back").await["result"]["task"]["id"].clone();
    let before = counters(&client, &base).await;
    let got = json(request(
        &client,
        &format!("{base}/a2a/demo"),
        "GetTask",
        json!({"id": task}),
    ))
    .await;
    assert_eq!(got["result"]["id"], task, "{got}");
    let host_calls = counters(&client, &base).await.0 - before.0;
    println!("one GetTask: {host_calls} host calls");
    assert!(
        host_calls <= MAX_GET_TASK_HOST_CALLS,
        "one GetTask made {host_calls} host calls (at most {MAX_GET_TASK_HOST_CALLS})"
    );
}
