//! The SQLite schema: versioned migrations, tracked in `PRAGMA user_version`.

use rusqlite::Connection;

/// Each entry moves the schema from version `i` to `i + 1`. Append only.
const MIGRATIONS: &[&str] = &[
    // 1: instances, tasks, message ids, contexts.
    "CREATE TABLE instances (
        id TEXT PRIMARY KEY,
        body TEXT NOT NULL
    );
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        instance_id TEXT NOT NULL,
        context_id TEXT NOT NULL,
        state INTEGER NOT NULL,
        skill TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        version INTEGER NOT NULL,
        peer_id TEXT,
        body TEXT NOT NULL
    );
    CREATE INDEX tasks_by_instance ON tasks (instance_id, updated_at DESC, id DESC);
    CREATE INDEX tasks_by_context ON tasks (instance_id, context_id, updated_at DESC);
    CREATE INDEX tasks_by_update ON tasks (updated_at DESC, id DESC);
    CREATE TABLE message_ids (
        instance_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        PRIMARY KEY (instance_id, message_id)
    ) WITHOUT ROWID;
    CREATE TABLE contexts (
        instance_id TEXT NOT NULL,
        context_id TEXT NOT NULL,
        first_seen INTEGER NOT NULL,
        last_seen INTEGER NOT NULL,
        PRIMARY KEY (instance_id, context_id)
    ) WITHOUT ROWID;",
    // 2: the context index also orders like the listings (updated_at, id), so a context's tasks
    // are read from it directly instead of scanning every task of the instance.
    "DROP INDEX tasks_by_context;
    CREATE INDEX tasks_by_context ON tasks (instance_id, context_id, updated_at DESC, id DESC);",
    // 3: outbound connections.
    "CREATE TABLE connections (
        id TEXT PRIMARY KEY,
        body TEXT NOT NULL
    );",
    // 4: what makes a resend a retry: the digest of its taskId and parts (docs/protocol.md "A2A methods"). Rows from
    // before have none, so a resend of such a message counts as a new message.
    "ALTER TABLE message_ids ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';",
    // 5: task counts by instance and state, kept by triggers, so a listing's `totalSize` and the
    // metrics read a few rows instead of counting every task.
    "CREATE TABLE task_counts (
        instance_id TEXT NOT NULL,
        state INTEGER NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (instance_id, state)
    ) WITHOUT ROWID;
    INSERT INTO task_counts SELECT instance_id, state, COUNT(*) FROM tasks GROUP BY instance_id, state;
    CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
        INSERT INTO task_counts VALUES (NEW.instance_id, NEW.state, 1)
            ON CONFLICT (instance_id, state) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER task_counts_update AFTER UPDATE OF instance_id, state ON tasks
    WHEN OLD.instance_id != NEW.instance_id OR OLD.state != NEW.state BEGIN
        UPDATE task_counts SET n = n - 1 WHERE instance_id = OLD.instance_id AND state = OLD.state;
        INSERT INTO task_counts VALUES (NEW.instance_id, NEW.state, 1)
            ON CONFLICT (instance_id, state) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
        UPDATE task_counts SET n = n - 1 WHERE instance_id = OLD.instance_id AND state = OLD.state;
    END;",
    // 6: push-notification configs (with their delivery counts) and the outbox of
    // notifications a task write queues in its own transaction; per config, `seq` is the
    // delivery order.
    "CREATE TABLE push_configs (
        instance_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        id TEXT NOT NULL,
        body TEXT NOT NULL,
        delivered INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,
        last_status TEXT,
        last_attempt_at INTEGER,
        PRIMARY KEY (instance_id, task_id, id)
    );
    CREATE TABLE push_outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        instance_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        config_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER NOT NULL
    );
    CREATE INDEX push_outbox_by_config ON push_outbox (instance_id, task_id, config_id, seq);",
    // 7: each task's durable frame log (`last_seq` is the task's latest sequence id, assigned by
    // the writer in commit order) and the lease of a running task (the node that runs it, until
    // when).
    "ALTER TABLE tasks ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN lease_node TEXT;
    ALTER TABLE tasks ADD COLUMN lease_until INTEGER;
    CREATE INDEX tasks_by_lease ON tasks (lease_until) WHERE state IN (1, 2);
    CREATE TABLE task_frames (
        task_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind INTEGER NOT NULL,
        json TEXT NOT NULL,
        PRIMARY KEY (task_id, seq)
    ) WITHOUT ROWID;",
    // 8: the operator's note on a task (why it failed, which the caller is not told), kept
    // apart from the task: a turn may fail before its task is first written.
    "CREATE TABLE task_notes (
        instance_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        note TEXT NOT NULL,
        PRIMARY KEY (instance_id, task_id)
    ) WITHOUT ROWID;",
    // 9: agent components' key-value buckets, each instance's apart.
    "CREATE TABLE agent_kv (
        scope TEXT NOT NULL,
        bucket TEXT NOT NULL,
        key TEXT NOT NULL,
        value BLOB NOT NULL,
        PRIMARY KEY (scope, bucket, key)
    ) WITHOUT ROWID;",
    // 10: each task's owner (docs/auth.md "Authentication"); older tasks are the shared
    // principal's.
    "ALTER TABLE tasks ADD COLUMN principal TEXT NOT NULL DEFAULT 'token';
    CREATE INDEX tasks_by_principal ON tasks (instance_id, principal, updated_at DESC, id DESC);",
    // 11: the trace of the request that created each task (docs/operating.md "Traces").
    "ALTER TABLE tasks ADD COLUMN trace_id TEXT;",
    // 12: task counts by owner too: every listing filters on its caller's principal, and
    // counting that index range read every task of the principal (100,000: 10 ms a listing).
    "DROP TRIGGER task_counts_insert;
    DROP TRIGGER task_counts_update;
    DROP TRIGGER task_counts_delete;
    DROP TABLE task_counts;
    CREATE TABLE task_counts (
        instance_id TEXT NOT NULL,
        principal TEXT NOT NULL,
        state INTEGER NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (instance_id, principal, state)
    ) WITHOUT ROWID;
    INSERT INTO task_counts
        SELECT instance_id, principal, state, COUNT(*) FROM tasks GROUP BY instance_id, principal, state;
    CREATE TRIGGER task_counts_insert AFTER INSERT ON tasks BEGIN
        INSERT INTO task_counts VALUES (NEW.instance_id, NEW.principal, NEW.state, 1)
            ON CONFLICT (instance_id, principal, state) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER task_counts_update AFTER UPDATE OF instance_id, principal, state ON tasks
    WHEN OLD.instance_id != NEW.instance_id OR OLD.principal != NEW.principal
        OR OLD.state != NEW.state BEGIN
        UPDATE task_counts SET n = n - 1
            WHERE instance_id = OLD.instance_id AND principal = OLD.principal AND state = OLD.state;
        INSERT INTO task_counts VALUES (NEW.instance_id, NEW.principal, NEW.state, 1)
            ON CONFLICT (instance_id, principal, state) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER task_counts_delete AFTER DELETE ON tasks BEGIN
        UPDATE task_counts SET n = n - 1
            WHERE instance_id = OLD.instance_id AND principal = OLD.principal AND state = OLD.state;
    END;",
    // 13: each conversation's summary kept beside its tasks, so the control snapshot's sessions
    // and the session reads read a few rows instead of grouping every task (54,000 tasks: 93 ms a
    // snapshot). A task's create adds itself (writes.rs); these triggers follow its updates, a
    // task moving to another context included (`created_at` and `peer_id` never change). The
    // active states are `TaskState::ACTIVE`. The context index leads with the context, so a
    // context filter without an instance reads its tasks only; the states a filter finds few of
    // get an index of their own (partial: a query states `state != 3` to use it).
    "DROP TABLE contexts;
    CREATE TABLE contexts (
        context_id TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        tasks INTEGER NOT NULL,
        active INTEGER NOT NULL,
        first_seen INTEGER NOT NULL,
        last_seen INTEGER NOT NULL,
        peer_id TEXT,
        PRIMARY KEY (context_id, instance_id)
    ) WITHOUT ROWID;
    INSERT INTO contexts
        SELECT context_id, instance_id, COUNT(*), SUM(state IN (1, 2, 6, 8)), MIN(created_at),
            MAX(updated_at), MIN(peer_id)
        FROM tasks GROUP BY context_id, instance_id;
    CREATE INDEX contexts_by_last_seen ON contexts (last_seen DESC, instance_id, context_id);
    CREATE TRIGGER contexts_update AFTER UPDATE OF state, updated_at ON tasks
    WHEN OLD.context_id = NEW.context_id BEGIN
        UPDATE contexts SET
            active = active + (NEW.state IN (1, 2, 6, 8)) - (OLD.state IN (1, 2, 6, 8)),
            last_seen = CASE
                WHEN NEW.updated_at >= last_seen THEN NEW.updated_at
                WHEN OLD.updated_at < last_seen THEN last_seen
                ELSE (SELECT MAX(updated_at) FROM tasks
                    WHERE context_id = NEW.context_id AND instance_id = NEW.instance_id) END
        WHERE context_id = NEW.context_id AND instance_id = NEW.instance_id;
    END;
    CREATE TRIGGER contexts_move AFTER UPDATE OF context_id ON tasks
    WHEN OLD.context_id != NEW.context_id BEGIN
        DELETE FROM contexts WHERE context_id = OLD.context_id AND instance_id = OLD.instance_id
            AND NOT EXISTS (SELECT 1 FROM tasks
                WHERE context_id = OLD.context_id AND instance_id = OLD.instance_id);
        UPDATE contexts SET (tasks, active, first_seen, last_seen, peer_id) = (
            SELECT COUNT(*), SUM(state IN (1, 2, 6, 8)), MIN(created_at), MAX(updated_at),
                MIN(peer_id)
            FROM tasks WHERE context_id = OLD.context_id AND instance_id = OLD.instance_id)
        WHERE context_id = OLD.context_id AND instance_id = OLD.instance_id;
        INSERT INTO contexts VALUES (NEW.context_id, NEW.instance_id, 1,
            NEW.state IN (1, 2, 6, 8), NEW.created_at, NEW.updated_at, NEW.peer_id)
        ON CONFLICT (context_id, instance_id) DO UPDATE SET
            tasks = tasks + 1,
            active = active + excluded.active,
            first_seen = MIN(first_seen, excluded.first_seen),
            last_seen = MAX(last_seen, excluded.last_seen),
            peer_id = MIN(COALESCE(peer_id, excluded.peer_id), COALESCE(excluded.peer_id, peer_id));
    END;
    DROP INDEX tasks_by_context;
    CREATE INDEX tasks_by_context ON tasks (context_id, instance_id, updated_at DESC, id DESC);
    CREATE INDEX tasks_by_state ON tasks (state, updated_at DESC, id DESC) WHERE state != 3;",
    // 14: the task log (`log.rs`): a task write appends a record here, folded into `tasks`, its
    // indexes, counts and summaries later, many at a time.
    "CREATE TABLE task_log (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        context_id TEXT NOT NULL,
        state INTEGER NOT NULL,
        skill TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        version INTEGER NOT NULL,
        body TEXT NOT NULL,
        peer_id TEXT,
        principal TEXT NOT NULL,
        trace_id TEXT,
        created INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        lease_node TEXT,
        lease_until INTEGER,
        claim_message_id TEXT,
        claim_fingerprint TEXT,
        frames TEXT
    );",
    // 15: who wrote a task's body (`store::Writer`): a reader of the same component build
    // sends it as it is; 0 (every body written before) is parsed and written again.
    "ALTER TABLE tasks ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE task_log ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0;",
];

/// Brings a database up to the newest schema and checks it is that schema; refuses a database
/// from a newer runtime, and one whose tables or columns were changed, saying what is wrong.
pub fn migrate(conn: &mut Connection) -> anyhow::Result<()> {
    let current: usize =
        conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as usize;
    if current > MIGRATIONS.len() {
        anyhow::bail!(
            "the database has schema version {current}, newer than this runtime's {}: run the a2a-edge release that wrote it, or a newer one",
            MIGRATIONS.len()
        );
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i + 1)?;
        tx.commit()?;
    }
    let expected = {
        let fresh = Connection::open_in_memory()?;
        for sql in MIGRATIONS {
            fresh.execute_batch(sql)?;
        }
        columns(&fresh)?
    };
    let wrong = differences(&expected, &columns(conn)?);
    if !wrong.is_empty() {
        anyhow::bail!(
            "the database is at schema version {} but its tables differ from that version's: {}. It was changed by hand or damaged: restore a backup (a2a-edge backup), or move the file away to start with an empty database",
            MIGRATIONS.len(),
            wrong.join("; ")
        );
    }
    Ok(())
}

/// Every table's columns.
fn columns(conn: &Connection) -> rusqlite::Result<std::collections::BTreeMap<String, Vec<String>>> {
    let mut stmt = conn.prepare(
        "SELECT m.name, c.name FROM sqlite_schema m, pragma_table_info(m.name) c
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, c.cid",
    )?;
    let mut all = std::collections::BTreeMap::<String, Vec<String>>::new();
    for row in stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))? {
        let (table, column) = row?;
        all.entry(table).or_default().push(column);
    }
    Ok(all)
}

/// What `found` lacks of `expected`: missing tables, missing columns.
fn differences(
    expected: &std::collections::BTreeMap<String, Vec<String>>,
    found: &std::collections::BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    expected
        .iter()
        .filter_map(|(table, want)| match found.get(table) {
            None => Some(format!("table {table} is missing")),
            Some(have) => {
                let lacking: Vec<&str> = want
                    .iter()
                    .filter(|c| !have.contains(c))
                    .map(String::as_str)
                    .collect();
                (!lacking.is_empty())
                    .then(|| format!("table {table} lacks column(s) {}", lacking.join(", ")))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use a2a_protocol::TaskState;

    use super::*;

    #[test]
    fn task_counts_move_to_per_owner_rows_and_triggers_keep_them() {
        let mut c = Connection::open_in_memory().unwrap();
        for sql in &MIGRATIONS[..11] {
            c.execute_batch(sql).unwrap();
        }
        c.pragma_update(None, "user_version", 11).unwrap();
        let insert = "INSERT INTO tasks (id, instance_id, context_id, state, skill, created_at,
            updated_at, version, body, principal) VALUES (?1, 'i', 'c', ?2, 's', 0, 0, 1, '{}', ?3)";
        for (id, state, principal) in [("a", 3, "key:a"), ("b", 3, "key:a"), ("c", 3, "key:b")] {
            c.execute(insert, rusqlite::params![id, state, principal])
                .unwrap();
        }
        migrate(&mut c).unwrap();
        let counts = |c: &Connection| -> Vec<(String, i64, i64)> {
            let mut stmt = c
                .prepare("SELECT principal, state, n FROM task_counts WHERE n > 0 ORDER BY 1, 2")
                .unwrap();
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(
            counts(&c),
            [("key:a".into(), 3, 2), ("key:b".into(), 3, 1)],
            "migrated"
        );
        c.execute(insert, rusqlite::params!["d", 1, "key:b"])
            .unwrap();
        c.execute("UPDATE tasks SET state = 4 WHERE id = 'a'", [])
            .unwrap();
        c.execute("DELETE FROM tasks WHERE id = 'c'", []).unwrap();
        assert_eq!(
            counts(&c),
            [
                ("key:a".into(), 3, 1),
                ("key:a".into(), 4, 1),
                ("key:b".into(), 1, 1)
            ],
            "kept by the triggers"
        );
    }

    /// A conversation's summary: instance, context, tasks, active ones, first and last seen,
    /// caller.
    type Summary = (String, String, i64, i64, i64, i64, Option<String>);

    /// The conversations' kept summaries, by instance and context.
    fn kept(c: &Connection) -> Vec<Summary> {
        let mut stmt = c
            .prepare(
                "SELECT instance_id, context_id, tasks, active, first_seen, last_seen, peer_id
                 FROM contexts ORDER BY instance_id, context_id",
            )
            .unwrap();
        stmt.query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }

    /// The summaries as the tasks give them, the active ones as [`TaskState::is_active`] says.
    fn of_tasks(c: &Connection) -> Vec<Summary> {
        let mut by = std::collections::BTreeMap::<(String, String), Summary>::new();
        let mut stmt = c
            .prepare(
                "SELECT instance_id, context_id, state, created_at, updated_at, peer_id FROM tasks",
            )
            .unwrap();
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, Option<String>>(5)?,
                ))
            })
            .unwrap();
        for row in rows {
            let (instance, context, state, created, updated, peer) = row.unwrap();
            let active = i64::from(TaskState::from_number(state).unwrap().is_active());
            let s = by
                .entry((instance.clone(), context.clone()))
                .or_insert((instance, context, 0, 0, created, updated, None));
            (s.2, s.3) = (s.2 + 1, s.3 + active);
            (s.4, s.5) = (s.4.min(created), s.5.max(updated));
            s.6 = s.6.take().into_iter().chain(peer).min();
        }
        by.into_values().collect()
    }

    #[test]
    fn conversations_move_to_kept_summaries_and_triggers_keep_them() {
        let mut c = Connection::open_in_memory().unwrap();
        for sql in &MIGRATIONS[..12] {
            c.execute_batch(sql).unwrap();
        }
        c.pragma_update(None, "user_version", 12).unwrap();
        let insert = "INSERT INTO tasks (id, instance_id, context_id, state, skill, created_at,
            updated_at, version, body, peer_id) VALUES (?1, ?2, ?3, ?4, 's', ?5, ?5, 1, '{}', ?6)";
        // A task in every state, in three conversations on two instances; some callers unknown.
        let states = (0..16)
            .filter_map(TaskState::from_number)
            .filter(|s| *s != TaskState::Unspecified);
        for (k, state) in states.enumerate() {
            let instance = if k % 4 == 0 { "j" } else { "i" };
            let context = if k % 2 == 0 { "a" } else { "b" };
            let peer = (k % 3 != 0).then(|| format!("p{}", 9 - k));
            c.execute(
                insert,
                rusqlite::params![
                    format!("t{k}"),
                    instance,
                    context,
                    state.number(),
                    10 * k as i64,
                    peer
                ],
            )
            .unwrap();
        }
        migrate(&mut c).unwrap();
        assert_eq!(kept(&c), of_tasks(&c), "migrated");
        for (write, what) in [
            (
                "UPDATE tasks SET state = 2, updated_at = 500 WHERE id = 't0'",
                "a task becomes active and the newest",
            ),
            (
                "UPDATE tasks SET state = 3, updated_at = 1 WHERE id = 't0'",
                "the newest goes back in time",
            ),
            (
                "UPDATE tasks SET context_id = 'b', state = 1, updated_at = 600 WHERE id = 't2'",
                "a task moves",
            ),
            (
                "UPDATE tasks SET context_id = 'lone' WHERE id = 't1'",
                "a task moves to a conversation of its own",
            ),
            (
                "UPDATE tasks SET context_id = 'b' WHERE id = 't1'",
                "and back: that conversation goes",
            ),
            (
                "UPDATE tasks SET context_id = 'a' WHERE id IN ('t3', 't5')",
                "tasks with and without a caller join one without",
            ),
            (
                "UPDATE tasks SET state = 4, updated_at = 700, version = version + 1
                 WHERE state IN (1, 2)",
                "unsettled tasks fail (as at a start)",
            ),
        ] {
            c.execute(write, []).unwrap();
            assert_eq!(kept(&c), of_tasks(&c), "{what}");
        }
    }

    #[test]
    fn a_damaged_or_newer_schema_is_refused_saying_what_is_wrong() {
        let mut c = Connection::open_in_memory().unwrap();
        migrate(&mut c).unwrap();
        migrate(&mut c).expect("a current schema passes again");
        c.execute_batch("DROP TABLE push_outbox; ALTER TABLE tasks DROP COLUMN lease_node;")
            .unwrap();
        let e = migrate(&mut c).unwrap_err().to_string();
        assert!(
            e.contains("table push_outbox is missing")
                && e.contains("table tasks lacks column(s) lease_node"),
            "{e}"
        );
        let mut newer = Connection::open_in_memory().unwrap();
        newer
            .pragma_update(None, "user_version", MIGRATIONS.len() + 1)
            .unwrap();
        let e = migrate(&mut newer).unwrap_err().to_string();
        assert!(
            e.starts_with("the database has schema version") && !e.contains("Invalid parameter"),
            "{e}"
        );
    }
}
