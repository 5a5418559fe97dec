//! What every [`Store`] must do, as one test suite each implementation runs.

use a2a_protocol::TaskState;
use a2a_protocol::sse::Member;

use super::*;

/// A SUBMITTED task `id` of instance `i`, context `c`, updated at `at`.
pub fn row(id: &str, at: u64) -> TaskRow {
    TaskRow {
        id: id.into(),
        instance_id: "i".into(),
        context_id: "c".into(),
        state: TaskState::Submitted,
        skill: "chat".into(),
        created_at: at,
        updated_at: at,
        version: 1,
        body: format!(
            r#"{{"id":"{id}","contextId":"c","status":{{"state":"TASK_STATE_SUBMITTED"}}}}"#
        ),
        peer_id: None,
        principal: crate::records::SHARED_PRINCIPAL.into(),
        trace_id: None,
        stamp: 0,
    }
}

/// Runs every check on a fresh, empty store.
pub async fn check(s: &dyn Store) {
    message_claims_compare_and_swap(s).await;
    updates_compare_and_swap(s).await;
    cursor_pages_cover_everything_newest_first(s).await;
    frame_logs_follow_their_writes(s).await;
    running_tasks_hold_a_lease_until_settled(s).await;
    unsettled_tasks_fail_on_recovery(s).await;
    notes_stay_beside_their_task(s).await;
    records_and_counts(s).await;
    push_configs_queue_every_write_in_order(s).await;
    due_heads_take_turns_across_instances(s).await;
    key_values_stay_in_their_scope_within_the_quota(s).await;
    tasks_keep_their_principal(s).await;
    a_task_keeps_the_trace_that_created_it(s).await;
    a_body_keeps_its_writer(s).await;
    conversations_are_summarised_from_their_tasks(s).await;
}

/// A body's stamp is stored with it: the build that wrote it reads it back as its own, through
/// a create, an update and the fold; another build does not.
async fn a_body_keeps_its_writer(s: &dyn Store) {
    let (writer, other) = (Writer::of("0123abcd"), Writer::of("4567cdef"));
    let stamped = |r: TaskRow| TaskRow {
        stamp: writer.stamp(&r.body),
        ..r
    };
    let read = async || s.get_task("written".into(), None).await.unwrap().unwrap();
    s.create_task(stamped(row("written", 1)), None, None)
        .await
        .unwrap();
    let created = read().await;
    assert!(writer.wrote(&created) && !other.wrote(&created));
    let mut next = row("written", 2);
    next.body = next.body.replace("SUBMITTED", "WORKING");
    s.update_task(stamped(next), 1, None, vec![]).await.unwrap();
    let updated = read().await;
    assert!(updated.body.contains("WORKING") && writer.wrote(&updated));
    // A write without a stamp (an older release's, the runtime's own) is nobody's.
    s.update_task(row("written", 3), 2, None, vec![])
        .await
        .unwrap();
    assert!(!writer.wrote(&read().await));
    // What a listing reads (the tables, after the fold) keeps it too.
    s.update_task(stamped(row("written", 4)), 3, None, vec![])
        .await
        .unwrap();
    let page = s
        .list_tasks(TaskFilter {
            context_id: Some("c".into()),
            limit: 100,
            ..TaskFilter::default()
        })
        .await
        .unwrap();
    let listed = page.tasks.iter().find(|t| t.id == "written").unwrap();
    assert!(writer.wrote(listed));
    assert!(writer.wrote(&read().await));
}

async fn a_task_keeps_the_trace_that_created_it(s: &dyn Store) {
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let created = TaskRow {
        trace_id: Some(trace.into()),
        ..row("traced", 1)
    };
    s.create_task(created, None, None).await.unwrap();
    s.update_task(row("traced", 2), 1, None, vec![])
        .await
        .unwrap();
    let got = s.get_task("traced".into(), None).await.unwrap().unwrap();
    assert_eq!(
        (got.version, got.trace_id.as_deref()),
        (2, Some(trace)),
        "an update keeps the creating trace"
    );
}

async fn tasks_keep_their_principal(s: &dyn Store) {
    let owned = |id: &str, principal: &str| TaskRow {
        instance_id: "owned".into(),
        principal: principal.into(),
        ..row(id, 1)
    };
    s.create_task(owned("o1", "key:alice"), None, None)
        .await
        .unwrap();
    s.create_task(owned("o2", "key:bob"), None, None)
        .await
        .unwrap();
    // An update never changes the owner.
    s.update_task(owned("o1", "key:bob"), 1, None, Vec::new())
        .await
        .unwrap();
    let got = s.get_task("o1".into(), None).await.unwrap().unwrap();
    assert_eq!(got.principal, "key:alice");
    let of = |p: &str| TaskFilter {
        instance_id: Some("owned".into()),
        principal: Some(p.into()),
        limit: 10,
        ..Default::default()
    };
    let page = s.list_tasks(of("key:alice")).await.unwrap();
    assert_eq!(
        (page.total, page.tasks.len(), page.tasks[0].id.as_str()),
        (1, 1, "o1")
    );
    assert_eq!(s.list_tasks(of("key:carol")).await.unwrap().total, 0);
}

async fn key_values_stay_in_their_scope_within_the_quota(s: &dyn Store) {
    let at = |scope: &str, bucket: &str, key: &str| KvKey {
        scope: scope.into(),
        bucket: bucket.into(),
        key: key.into(),
    };
    assert_eq!(s.kv_get(at("i", "b", "k")).await.unwrap(), None);
    s.kv_set(at("i", "b", "k"), b"one".to_vec(), 1000)
        .await
        .unwrap();
    s.kv_set(at("i", "b", "k"), b"two".to_vec(), 1000)
        .await
        .unwrap();
    s.kv_set(at("i", "b", "a"), vec![0, 255], 1000)
        .await
        .unwrap();
    s.kv_set(at("j", "b", "k"), b"other".to_vec(), 1000)
        .await
        .unwrap();
    assert_eq!(s.kv_get(at("i", "b", "k")).await.unwrap().unwrap(), b"two");
    assert_eq!(
        s.kv_get(at("i", "b", "a")).await.unwrap().unwrap(),
        [0, 255]
    );
    assert_eq!(
        s.kv_keys("i".into(), "b".into(), 0, 10).await.unwrap(),
        ["a", "k"],
        "in order, the scope's own"
    );
    assert_eq!(
        s.kv_keys("i".into(), "b".into(), 1, 10).await.unwrap(),
        ["k"]
    );
    assert!(
        s.kv_keys("i".into(), "c".into(), 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // A value costs its bucket, key and bytes plus KV_ENTRY_BYTES, and a replaced one counts
    // once: "b"+"a"+2 bytes stays, "b"+"k"+10 bytes fills the quota exactly.
    let quota = 2 * KV_ENTRY_BYTES + 4 + 12;
    s.kv_set(at("i", "b", "k"), vec![7; 10], quota)
        .await
        .unwrap();
    let full = s
        .kv_set(at("i", "b", "z"), vec![], quota)
        .await
        .unwrap_err();
    assert!(
        full.to_string().contains("key-value store is full"),
        "{full}"
    );
    assert_eq!(
        s.kv_get(at("i", "b", "z")).await.unwrap(),
        None,
        "nothing written"
    );
    s.kv_delete(at("i", "b", "k")).await.unwrap();
    s.kv_delete(at("i", "b", "k")).await.unwrap();
    s.kv_set(at("i", "b", "z"), vec![1], quota).await.unwrap();
    assert_eq!(
        s.kv_get(at("j", "b", "k")).await.unwrap().unwrap(),
        b"other"
    );
}

async fn message_claims_compare_and_swap(s: &dyn Store) {
    let claim = |fp: &str, replaces: Option<MessageRecord>| {
        Some(MessageClaim {
            message_id: "m".into(),
            fingerprint: fp.into(),
            replaces,
        })
    };
    let find = || s.find_message("i".into(), "m".into());
    let t1 = MessageRecord {
        task_id: "t1".into(),
        fingerprint: "f1".into(),
    };
    s.create_task(row("t1", 1), claim("f1", None), None)
        .await
        .unwrap();
    assert_eq!(find().await.unwrap(), Some(t1.clone()));
    // A writer that saw nothing loses to the one that claimed first, and writes nothing.
    let dup = s
        .create_task(row("t2", 2), claim("f1", None), None)
        .await
        .unwrap_err();
    assert_eq!(dup, StoreError::DuplicateMessage(t1.clone()));
    assert!(
        s.get_task("t2".into(), None).await.unwrap().is_none(),
        "a refused create writes nothing"
    );
    // One that saw the current record replaces it (a new message reusing the id).
    s.create_task(row("t2", 2), claim("f2", Some(t1.clone())), None)
        .await
        .unwrap();
    let t2 = MessageRecord {
        task_id: "t2".into(),
        fingerprint: "f2".into(),
    };
    assert_eq!(find().await.unwrap(), Some(t2.clone()));
    // An update with a stale claim changes nothing.
    let mut r = row("t2", 2);
    r.body = "changed".into();
    assert_eq!(
        s.update_task(r.clone(), 1, claim("f3", Some(t1)), vec![])
            .await
            .unwrap_err(),
        StoreError::DuplicateMessage(t2.clone())
    );
    assert_eq!(
        s.get_task("t2".into(), None)
            .await
            .unwrap()
            .unwrap()
            .version,
        1
    );
    assert_eq!(
        s.update_task(r, 1, claim("f3", Some(t2)), vec![])
            .await
            .unwrap()
            .version,
        2
    );
    assert_eq!(find().await.unwrap().unwrap().fingerprint, "f3");
    assert_eq!(
        s.find_message("other".into(), "m".into()).await.unwrap(),
        None,
        "scoped to the instance"
    );
    assert!(
        matches!(
            s.create_task(row("t1", 3), None, None).await,
            Err(StoreError::Invalid(_))
        ),
        "ids are unique"
    );
}

async fn updates_compare_and_swap(s: &dyn Store) {
    s.create_task(row("u", 1), None, None).await.unwrap();
    let mut r = row("u", 2);
    r.state = TaskState::Working;
    assert_eq!(
        s.update_task(r.clone(), 1, None, vec![])
            .await
            .unwrap()
            .version,
        2
    );
    match s.update_task(r.clone(), 1, None, vec![]).await.unwrap_err() {
        StoreError::Conflict(cur) => assert_eq!((cur.version, cur.state), (2, TaskState::Working)),
        e => panic!("{e:?}"),
    }
    assert!(
        s.get_task("u".into(), Some("other".into()))
            .await
            .unwrap()
            .is_none(),
        "scoped to the instance"
    );
    r.id = "missing".into();
    assert_eq!(
        s.update_task(r, 1, None, vec![]).await.unwrap_err(),
        StoreError::NotFound
    );
}

async fn cursor_pages_cover_everything_newest_first(s: &dyn Store) {
    let context = |mut r: TaskRow| {
        r.context_id = "paged".into();
        r
    };
    for i in 0..7 {
        let mut r = context(row(&format!("p{i}"), 100 + i / 2));
        r.peer_id = [Some("10.0.0.9@i"), Some("10.0.0.2@i")]
            .get(i as usize % 3)
            .copied()
            .flatten()
            .map(str::to_owned);
        s.create_task(r, None, None).await.unwrap();
    }
    let mut seen = Vec::new();
    let mut start = PageStart::First;
    loop {
        let filter = TaskFilter {
            limit: 3,
            start,
            instance_id: Some("i".into()),
            context_id: Some("paged".into()),
            ..Default::default()
        };
        let page = s.list_tasks(filter).await.unwrap();
        assert_eq!(page.total, 7);
        seen.extend(page.tasks.iter().map(|t| t.id.clone()));
        match page.next_token {
            Some(t) => start = PageStart::Token(t),
            None => break,
        }
    }
    assert_eq!(seen, ["p6", "p5", "p4", "p3", "p2", "p1", "p0"]);
    let bad = TaskFilter {
        limit: 3,
        start: PageStart::Token("x".into()),
        ..Default::default()
    };
    assert!(matches!(
        s.list_tasks(bad).await,
        Err(StoreError::Invalid(_))
    ));
    let offset = TaskFilter {
        limit: 2,
        start: PageStart::Offset(5),
        context_id: Some("paged".into()),
        ..Default::default()
    };
    assert_eq!(
        s.list_tasks(offset)
            .await
            .unwrap()
            .tasks
            .iter()
            .map(|t| t.id.as_str())
            .collect::<Vec<_>>(),
        ["p1", "p0"]
    );
    let working = TaskFilter {
        limit: 10,
        state: Some(TaskState::Working),
        context_id: Some("paged".into()),
        ..Default::default()
    };
    assert_eq!(s.list_tasks(working).await.unwrap().total, 0);
}

async fn unsettled_tasks_fail_on_recovery(s: &dyn Store) {
    let before = s
        .state_counts()
        .await
        .unwrap()
        .iter()
        .filter(|(_, st, _)| st.is_running())
        .map(|(_, _, n)| n)
        .sum::<u64>();
    let writer = Writer::of("0123abcd");
    let created = row("r", 1);
    let stamped = TaskRow {
        stamp: writer.stamp(&created.body),
        ..created
    };
    s.create_task(stamped, None, None).await.unwrap();
    assert_eq!(
        s.fail_unsettled(5, "interrupted by runtime restart".into())
            .await
            .unwrap(),
        before + 1
    );
    let t = s.get_task("r".into(), None).await.unwrap().unwrap();
    assert_eq!(t.state, TaskState::Failed);
    assert!(t.body.contains("interrupted by runtime restart"));
    assert!(
        !writer.wrote(&t),
        "a body the store rewrote is not the component's"
    );
    let log = s.frames("i".into(), "r".into(), 0, 10).await.unwrap();
    assert_eq!(log.frames.len(), 1, "the FAILED status is logged with it");
    assert_eq!(log.frames[0].kind, Member::StatusUpdate);
    assert!(log.frames[0].json.contains("TASK_STATE_FAILED"));
}

async fn notes_stay_beside_their_task(s: &dyn Store) {
    let note = |i: &str, t: &str| s.task_note(i.into(), t.into());
    assert_eq!(note("i", "noted").await.unwrap(), None);
    // A turn may fail before its task is first written.
    s.note_task("i".into(), "noted".into(), "the key is not set".into())
        .await
        .unwrap();
    s.create_task(row("noted", 1), None, None).await.unwrap();
    assert_eq!(
        note("i", "noted").await.unwrap().as_deref(),
        Some("the key is not set")
    );
    assert_eq!(
        note("other", "noted").await.unwrap(),
        None,
        "scoped to its instance"
    );
    let t = s.get_task("noted".into(), None).await.unwrap().unwrap();
    assert!(!t.body.contains("the key is not set"), "never in the task");
    let mut later = t.clone();
    later.state = TaskState::Failed;
    later.version = 2;
    s.update_task(later, 1, None, vec![]).await.unwrap();
    s.note_task("i".into(), "noted".into(), "the model answered 401".into())
        .await
        .unwrap();
    assert_eq!(
        note("i", "noted").await.unwrap().as_deref(),
        Some("the model answered 401"),
        "the latest note is kept"
    );
}

fn frame(kind: Member, n: usize) -> NewFrame {
    NewFrame {
        kind,
        json: format!("{{\"n\":{n}}}"),
    }
}

async fn frame_logs_follow_their_writes(s: &dyn Store) {
    s.create_task(row("log", 1), None, None).await.unwrap();
    let chunk = |n| frame(Member::ArtifactUpdate, n);
    assert_eq!(
        s.append_frames("i".into(), "log".into(), vec![chunk(1)])
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        s.append_frames("i".into(), "log".into(), vec![chunk(2), chunk(3)])
            .await
            .unwrap(),
        2
    );
    let mut working = row("log", 2);
    working.state = TaskState::Working;
    let status = frame(Member::StatusUpdate, 4);
    let w = s
        .update_task(working.clone(), 1, None, vec![status.clone()])
        .await
        .unwrap();
    assert_eq!((w.version, w.first_seq), (2, 4));
    assert!(matches!(
        s.update_task(working.clone(), 1, None, vec![status.clone()])
            .await,
        Err(StoreError::Conflict(_))
    ));
    let page = s.frames("i".into(), "log".into(), 0, 100).await.unwrap();
    assert_eq!(
        (page.last_seq, page.state),
        (4, TaskState::Working),
        "a refused write logs nothing"
    );
    let seqs: Vec<(u64, Member, &str)> = page
        .frames
        .iter()
        .map(|f| (f.seq, f.kind, &*f.json))
        .collect();
    assert_eq!(
        seqs,
        [
            (1, Member::ArtifactUpdate, "{\"n\":1}"),
            (2, Member::ArtifactUpdate, "{\"n\":2}"),
            (3, Member::ArtifactUpdate, "{\"n\":3}"),
            (4, Member::StatusUpdate, "{\"n\":4}"),
        ]
    );
    let after_2 = s.frames("i".into(), "log".into(), 2, 1).await.unwrap();
    assert_eq!(
        after_2.frames.iter().map(|f| f.seq).collect::<Vec<_>>(),
        [3]
    );
    let none = s.frames("i".into(), "log".into(), 4, 10).await.unwrap();
    assert!(none.frames.is_empty());
    assert_eq!(
        s.frames("other".into(), "log".into(), 0, 10).await,
        Err(StoreError::NotFound),
        "scoped to the instance"
    );
    assert_eq!(
        s.append_frames("other".into(), "log".into(), vec![chunk(0)])
            .await,
        Err(StoreError::NotFound)
    );
    // Retention keeps the latest RETAIN_FRAMES of a task.
    let many: Vec<NewFrame> = (0..RETAIN_FRAMES as usize).map(chunk).collect();
    assert_eq!(
        s.append_frames("i".into(), "log".into(), many)
            .await
            .unwrap(),
        5
    );
    let kept = s.frames("i".into(), "log".into(), 0, 2).await.unwrap();
    assert_eq!(kept.last_seq, 4 + RETAIN_FRAMES);
    assert_eq!(
        kept.frames[0].seq, 5,
        "frames 1..=4 fell out of the retention"
    );
    // The logs of tasks settled before the cutoff are pruned; the sequence stays.
    let mut done = row("log", 50);
    done.state = TaskState::Completed;
    let settled = s
        .update_task(done, 2, None, vec![frame(Member::StatusUpdate, 0)])
        .await
        .unwrap();
    assert_eq!(settled.first_seq, 5 + RETAIN_FRAMES);
    assert_eq!(
        s.append_frames("i".into(), "log".into(), vec![chunk(0)])
            .await,
        Err(StoreError::settled("log")),
        "no frame after the final one"
    );
    assert_eq!(
        s.prune_frames(50).await.unwrap(),
        0,
        "not before the cutoff"
    );
    assert!(s.prune_frames(51).await.unwrap() >= RETAIN_FRAMES);
    let pruned = s.frames("i".into(), "log".into(), 0, 10).await.unwrap();
    assert!(pruned.frames.is_empty());
    assert_eq!(
        (pruned.last_seq, pruned.state),
        (5 + RETAIN_FRAMES, TaskState::Completed)
    );
}

async fn running_tasks_hold_a_lease_until_settled(s: &dyn Store) {
    let t = 1_000_000_000;
    let ttl = Lease::default().ttl_ms;
    let mut leased = row("leased", t);
    leased.state = TaskState::Working;
    s.create_task(leased.clone(), None, None).await.unwrap();
    let expired = async |now: u64| -> bool {
        s.expired_leases(now, 1000)
            .await
            .unwrap()
            .iter()
            .any(|r| r.id == "leased")
    };
    assert!(!expired(t + ttl - 1).await, "held for the lease time");
    assert!(expired(t + ttl + 1).await, "and not longer unless renewed");
    let mut idle = row("idle", t);
    idle.state = TaskState::Working;
    s.create_task(idle, None, None).await.unwrap();
    assert_eq!(
        s.renew_leases(t + 10_000, vec!["leased".into(), "nope".into()])
            .await
            .unwrap(),
        ["leased"],
        "only the tasks named, and only those there"
    );
    assert!(!expired(t + ttl + 1).await, "renewed");
    assert!(expired(t + 10_000 + ttl + 1).await);
    let idle_expired = s.expired_leases(t + ttl + 1, 1000).await.unwrap();
    assert!(
        idle_expired.iter().any(|r| r.id == "idle"),
        "a running task with no turn renewing it runs out"
    );
    let mut done = leased;
    (done.state, done.updated_at) = (TaskState::Completed, t + 1);
    s.update_task(done, 1, None, vec![]).await.unwrap();
    assert!(!expired(u64::MAX / 4).await, "a settled task holds none");
}

async fn records_and_counts(s: &dyn Store) {
    let counts = s.state_counts().await.unwrap();
    let total: u64 = counts.iter().map(|(_, _, n)| n).sum();
    assert_eq!(
        total,
        s.list_tasks(TaskFilter {
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .total as u64
    );
    // Every count agrees with the tasks counted one by one (a filter on the update time counts
    // the rows; one on instance and state alone may answer from counts the store keeps).
    for (instance, state, n) in &counts {
        for updated_after in [None, Some(0)] {
            let filter = TaskFilter {
                instance_id: Some(instance.clone()),
                state: Some(*state),
                updated_after,
                limit: 1,
                ..Default::default()
            };
            assert_eq!(
                s.list_tasks(filter).await.unwrap().total as u64,
                *n,
                "{instance} {state:?} {updated_after:?}"
            );
        }
    }
    let contexts = s
        .contexts(Some("i".into()), Some("paged".into()), 10)
        .await
        .unwrap();
    assert_eq!(
        (
            contexts.len(),
            contexts[0].task_count,
            contexts[0].active_count,
            contexts[0].peer_id.as_deref()
        ),
        (1, 7, 0, Some("10.0.0.2@i")),
        "{contexts:?}"
    );
    let record = ConnectionRecord {
        id: "c1".into(),
        name: "one".into(),
        ..ConnectionRecord::default()
    };
    s.put_connection(record.clone()).await.unwrap();
    assert_eq!(s.connections().await.unwrap(), [record]);
    s.delete_connection("c1".into()).await.unwrap();
    assert!(s.connections().await.unwrap().is_empty());
    s.flush().await.unwrap();
}

async fn push_configs_queue_every_write_in_order(s: &dyn Store) {
    let config = |task: &str, id: &str| PushConfig {
        instance_id: "i".into(),
        task_id: task.into(),
        id: id.into(),
        body: format!(r#"{{"id":"{id}","taskId":"{task}","url":"http://h/{id}"}}"#),
    };
    let mut nowhere = config("nowhere", "a");
    assert_eq!(
        s.put_push_config(nowhere.clone()).await,
        Err(StoreError::NotFound),
        "a config needs a task of its instance"
    );
    s.create_task(row("p", 10), None, Some(config("p", "a")))
        .await
        .unwrap();
    nowhere.instance_id = "j".into();
    nowhere.task_id = "p".into();
    assert_eq!(s.put_push_config(nowhere).await, Err(StoreError::NotFound));
    s.put_push_config(config("p", "b")).await.unwrap();
    let mut replaced = config("p", "a");
    replaced.body = replaced.body.replace("/a", "/a2");
    s.put_push_config(replaced.clone()).await.unwrap();
    assert_eq!(
        s.push_configs("i".into(), "p".into()).await.unwrap(),
        [replaced, config("p", "b")],
        "oldest first; a replaced config keeps its place"
    );
    for i in 2..a2a_protocol::push::MAX_PER_TASK {
        s.put_push_config(config("p", &format!("x{i}")))
            .await
            .unwrap();
    }
    assert!(matches!(
        s.put_push_config(config("p", "one-too-many")).await,
        Err(StoreError::Invalid(_))
    ));
    for i in 2..a2a_protocol::push::MAX_PER_TASK {
        s.delete_push_config("i".into(), "p".into(), format!("x{i}"))
            .await
            .unwrap();
    }
    let due = s.due_deliveries(DueLook::at(10, 10)).await.unwrap();
    assert_eq!(
        due.due
            .iter()
            .map(|d| d.config.id.as_str())
            .collect::<Vec<_>>(),
        ["a"],
        "the creating write is queued for the inline config only: {due:?}"
    );
    let mut working = row("p", 20);
    working.state = TaskState::Working;
    s.update_task(working.clone(), 1, None, vec![])
        .await
        .unwrap();
    let mut done = row("p", 30);
    done.state = TaskState::Completed;
    s.update_task(done, 2, None, vec![]).await.unwrap();
    let due = s.due_deliveries(DueLook::at(30, 10)).await.unwrap();
    assert_eq!(due.pending, 5, "a: 3 writes, b: 2");
    let heads: Vec<_> = due
        .due
        .iter()
        .map(|d| (d.config.id.as_str(), d.created_at))
        .collect();
    assert_eq!(heads, [("a", 10), ("b", 20)], "one head per config");
    let a = &due.due[0];
    assert!(a.payload.starts_with(r#"{"task":"#), "{}", a.payload);
    s.attempted(
        a.seq,
        31,
        Attempt::Retry {
            next_at: 100,
            error: "HTTP 503".into(),
        },
    )
    .await
    .unwrap();
    let later = s.due_deliveries(DueLook::at(40, 10)).await.unwrap();
    assert_eq!(
        later
            .due
            .iter()
            .map(|d| d.config.id.as_str())
            .collect::<Vec<_>>(),
        ["b"],
        "a waits for its retry, and its later writes wait behind it"
    );
    assert_eq!(later.next_at, Some(100));
    let retried = s.due_deliveries(DueLook::at(100, 10)).await.unwrap();
    assert_eq!((retried.due[0].seq, retried.due[0].attempts), (a.seq, 1));
    s.attempted(a.seq, 101, Attempt::Delivered(200))
        .await
        .unwrap();
    let b = s.due_deliveries(DueLook::at(100, 10)).await.unwrap().due[1].seq;
    s.attempted(b, 102, Attempt::GaveUp("too old".into()))
        .await
        .unwrap();
    let status = s.push_status("i".into(), Some("p".into())).await.unwrap();
    let a = &status[0];
    assert_eq!(
        (a.delivered, a.failed, a.pending, a.last_status.as_deref()),
        (1, 0, 2, Some("200"))
    );
    let b = &status[1];
    assert_eq!(
        (b.delivered, b.failed, b.pending, b.last_status.as_deref()),
        (0, 1, 1, Some("too old"))
    );
    s.delete_push_config("i".into(), "p".into(), "a".into())
        .await
        .unwrap();
    s.delete_push_config("i".into(), "p".into(), "a".into())
        .await
        .unwrap();
    assert_eq!(
        s.due_deliveries(DueLook::at(200, 10))
            .await
            .unwrap()
            .pending,
        1
    );
    assert_eq!(
        s.push_configs("i".into(), "p".into()).await.unwrap().len(),
        1
    );
    outbox_is_bounded_per_config(s).await;
}

/// One instance's many due heads never crowd another's out of a look: heads come in turns across
/// instances, and a look can leave out instances.
async fn due_heads_take_turns_across_instances(s: &dyn Store) {
    for (instance, tasks) in [("crowd", 5), ("other", 2)] {
        for n in 0..tasks {
            let task = format!("{instance}-{n}");
            let mut r = row(&task, 1_000 + n);
            r.instance_id = instance.into();
            let config = PushConfig {
                instance_id: instance.into(),
                task_id: task.clone(),
                id: "h".into(),
                body: format!(r#"{{"id":"h","taskId":"{task}","url":"http://h/{task}"}}"#),
            };
            s.create_task(r, None, Some(config)).await.unwrap();
        }
    }
    let look = |limit, skip: &[&str]| DueLook {
        now: 10_000,
        limit,
        // Instance `i` holds the heads of the checks before.
        skip: ["i"].iter().chain(skip).map(|s| s.to_string()).collect(),
    };
    let tasks = |due: DueDeliveries| -> Vec<String> {
        due.due.into_iter().map(|d| d.config.task_id).collect()
    };
    assert_eq!(
        tasks(s.due_deliveries(look(5, &[])).await.unwrap()),
        ["crowd-0", "other-0", "crowd-1", "other-1", "crowd-2"],
        "in turns, though the crowd's heads are older"
    );
    assert_eq!(
        tasks(s.due_deliveries(look(5, &["crowd"])).await.unwrap()),
        ["other-0", "other-1"],
        "a skipped instance's heads are left out"
    );
}

/// A config whose receiver is down keeps its head and the newest notifications, at most
/// [`MAX_WAITING`].
async fn outbox_is_bounded_per_config(s: &dyn Store) {
    let mut r = row("flood", 1);
    r.state = TaskState::Working;
    let config = PushConfig {
        instance_id: "i".into(),
        task_id: "flood".into(),
        id: "f".into(),
        body: r#"{"id":"f","taskId":"flood","url":"http://h/f"}"#.into(),
    };
    s.create_task(r.clone(), None, Some(config)).await.unwrap();
    let writes = MAX_WAITING + 5;
    for v in 1..writes {
        r.updated_at = 1 + v;
        s.update_task(r.clone(), v, None, vec![]).await.unwrap();
    }
    let status = s
        .push_status("i".into(), Some("flood".into()))
        .await
        .unwrap();
    assert_eq!(
        (status[0].pending, status[0].failed),
        (MAX_WAITING, writes - MAX_WAITING)
    );
    assert_eq!(status[0].last_status.as_deref(), Some(OVERFLOW));
    assert_eq!(
        s.push_dropped(),
        writes - MAX_WAITING,
        "what the configs count, the metrics count"
    );
    let due = s.due_deliveries(DueLook::at(10_000, 10)).await.unwrap().due;
    let head = due.iter().find(|d| d.config.task_id == "flood").unwrap();
    assert_eq!(head.created_at, 1, "the head stays");
}

/// A listing's total and the ids of its page, newest first.
async fn listed(s: &dyn Store, f: TaskFilter) -> (u32, String) {
    let page = s.list_tasks(f).await.unwrap();
    let ids: Vec<&str> = page.tasks.iter().map(|t| t.id.as_str()).collect();
    (page.total, ids.join(" "))
}

async fn conversations_are_summarised_from_their_tasks(s: &dyn Store) {
    let task = |id: &str, instance: &str, context: &str, at: u64, peer: Option<&str>| TaskRow {
        instance_id: instance.into(),
        context_id: context.into(),
        peer_id: peer.map(Into::into),
        principal: "key:sum".into(),
        ..row(id, at)
    };
    let summary = |instance: &str,
                   context: &str,
                   (tasks, active): (u64, u64),
                   (first, last): (u64, u64),
                   peer: Option<&str>| {
        ContextSummary {
            instance_id: instance.into(),
            context_id: context.into(),
            task_count: tasks,
            active_count: active,
            first_seen: first,
            last_seen: last,
            peer_id: peer.map(Into::into),
        }
    };
    for r in [
        task("sum-k1", "sum", "sum-talk", 10, Some("b@x")),
        task("sum-k2", "sum", "sum-talk", 20, None),
        task("sum-k3", "sum", "sum-aside", 15, Some("a@x")),
        task("sum-k4", "sum2", "sum-talk", 26, None),
    ] {
        s.create_task(r, None, None).await.unwrap();
    }
    let talk = || s.contexts(None, Some("sum-talk".into()), 10);
    assert_eq!(
        talk().await.unwrap(),
        [
            summary("sum2", "sum-talk", (1, 1), (26, 26), None),
            summary("sum", "sum-talk", (2, 2), (10, 20), Some("b@x")),
        ],
        "a conversation on each of its instances, newest first"
    );
    // k2 settles at 30 and k1 waits for input at 25; then k2's time goes back to 5, so the
    // conversation's latest is k1's again. k3 moves to the other conversation, the last of its own.
    let settled = |r: TaskRow, state: TaskState| TaskRow { state, ..r };
    for (id, at, state, version) in [
        ("sum-k2", 30, TaskState::Completed, 1),
        ("sum-k1", 25, TaskState::InputRequired, 1),
        ("sum-k2", 5, TaskState::Completed, 2),
    ] {
        let row = settled(task(id, "sum", "sum-talk", at, None), state);
        s.update_task(row, version, None, vec![]).await.unwrap();
    }
    s.update_task(task("sum-k3", "sum", "sum-talk", 16, None), 1, None, vec![])
        .await
        .unwrap();
    assert!(
        s.contexts(Some("sum".into()), Some("sum-aside".into()), 10)
            .await
            .unwrap()
            .is_empty(),
        "a conversation its last task left is gone"
    );
    assert_eq!(
        talk().await.unwrap(),
        [
            summary("sum2", "sum-talk", (1, 1), (26, 26), None),
            summary("sum", "sum-talk", (3, 2), (10, 25), Some("a@x")),
        ],
        "kept through updates: the creation and the caller stay, the latest goes back"
    );
    s.update_task(
        settled(
            task("sum-k4", "sum2", "sum-talk", 25, None),
            TaskState::Completed,
        ),
        1,
        None,
        vec![],
    )
    .await
    .unwrap();
    let tied = [
        summary("sum", "sum-talk", (3, 2), (10, 25), Some("a@x")),
        summary("sum2", "sum-talk", (1, 0), (26, 25), None),
    ];
    assert_eq!(
        talk().await.unwrap(),
        tied,
        "a tie on the latest: by instance"
    );
    assert_eq!(
        s.contexts(None, Some("sum-talk".into()), 1).await.unwrap(),
        tied[..1]
    );
    s.create_task(task("sum-k6", "sum", "sum-aside", 25, None), None, None)
        .await
        .unwrap();
    assert_eq!(
        s.contexts(Some("sum".into()), None, 10).await.unwrap(),
        [
            summary("sum", "sum-aside", (1, 1), (25, 25), None),
            tied[0].clone(),
        ],
        "a tie on one instance: by context"
    );
    // Listings by conversation (counted from the summaries alone), with an instance or a state,
    // and by owner alone (on both instances).
    let in_talk = |instance: Option<&str>, state: Option<TaskState>| TaskFilter {
        instance_id: instance.map(Into::into),
        context_id: Some("sum-talk".into()),
        state,
        limit: 10,
        ..Default::default()
    };
    let owned = |state: Option<TaskState>, limit: u32, offset: u32| TaskFilter {
        principal: Some("key:sum".into()),
        state,
        limit,
        start: PageStart::Offset(offset),
        ..Default::default()
    };
    for (f, want) in [
        (in_talk(None, None), (4, "sum-k4 sum-k1 sum-k3 sum-k2")),
        (in_talk(Some("sum"), None), (3, "sum-k1 sum-k3 sum-k2")),
        (
            in_talk(None, Some(TaskState::Completed)),
            (2, "sum-k4 sum-k2"),
        ),
        (in_talk(None, Some(TaskState::InputRequired)), (1, "sum-k1")),
        (owned(None, 2, 1), (5, "sum-k4 sum-k1")),
        (
            owned(Some(TaskState::Submitted), 10, 0),
            (2, "sum-k6 sum-k3"),
        ),
        (owned(None, 10, 5), (5, "")),
    ] {
        let asked = format!("{f:?}");
        assert_eq!(listed(s, f).await, (want.0, want.1.to_owned()), "{asked}");
    }
}
