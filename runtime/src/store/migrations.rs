//! Versioned schema migrations, tracked in `PRAGMA user_version`.

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
    // 4: what makes a resend a retry: the digest of its taskId and parts (SPEC §4). Rows from
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
];

/// Brings a database up to the newest schema; refuses a database from a newer runtime.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let current: usize =
        conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as usize;
    if current > MIGRATIONS.len() {
        return Err(rusqlite::Error::InvalidParameterName(format!(
            "the database has schema version {current}, newer than this runtime's {}; upgrade a2a-edge",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i + 1)?;
        tx.commit()?;
    }
    Ok(())
}
