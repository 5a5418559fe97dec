//! The PostgreSQL schema: versioned migrations in `a2a_edge_schema`, applied under an advisory
//! lock so nodes starting together migrate once.

use tokio_postgres::Client;

/// Each entry moves the schema from version `i` to `i + 1`. Append only.
const MIGRATIONS: &[&str] = &[
    // 1: everything the SQLite schema has at its version 6.
    "CREATE TABLE instances (id TEXT PRIMARY KEY, body TEXT NOT NULL);
    CREATE TABLE connections (id TEXT PRIMARY KEY, body TEXT NOT NULL);
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        instance_id TEXT NOT NULL,
        context_id TEXT NOT NULL,
        state INTEGER NOT NULL,
        skill TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        version BIGINT NOT NULL,
        peer_id TEXT,
        body TEXT NOT NULL
    );
    CREATE INDEX tasks_by_instance ON tasks (instance_id, updated_at DESC, id DESC);
    CREATE INDEX tasks_by_context ON tasks (instance_id, context_id, updated_at DESC, id DESC);
    CREATE INDEX tasks_by_update ON tasks (updated_at DESC, id DESC);
    CREATE INDEX tasks_by_state ON tasks (state) WHERE state IN (1, 2);
    CREATE TABLE message_ids (
        instance_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        PRIMARY KEY (instance_id, message_id)
    );
    CREATE TABLE contexts (
        instance_id TEXT NOT NULL,
        context_id TEXT NOT NULL,
        first_seen BIGINT NOT NULL,
        last_seen BIGINT NOT NULL,
        PRIMARY KEY (instance_id, context_id)
    );
    CREATE TABLE push_configs (
        instance_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        id TEXT NOT NULL,
        body TEXT NOT NULL,
        created BIGSERIAL NOT NULL,
        delivered BIGINT NOT NULL DEFAULT 0,
        failed BIGINT NOT NULL DEFAULT 0,
        last_status TEXT,
        last_attempt_at BIGINT,
        PRIMARY KEY (instance_id, task_id, id)
    );
    CREATE TABLE push_outbox (
        seq BIGSERIAL PRIMARY KEY,
        instance_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        config_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at BIGINT NOT NULL
    );
    CREATE INDEX push_outbox_by_config ON push_outbox (instance_id, task_id, config_id, seq);",
    // 2: each task's frame log (`last_seq` is its latest sequence id, taken under the task's
    // row lock, so ids follow commit order), the lease of a running task, and the secrets the
    // nodes share, sealed with the cluster key.
    "ALTER TABLE tasks ADD COLUMN last_seq BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN lease_node TEXT;
    ALTER TABLE tasks ADD COLUMN lease_until BIGINT;
    CREATE INDEX tasks_by_lease ON tasks (lease_until) WHERE state IN (1, 2);
    CREATE TABLE task_frames (
        task_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        kind SMALLINT NOT NULL,
        json TEXT NOT NULL,
        PRIMARY KEY (task_id, seq)
    );
    CREATE TABLE secrets (name TEXT PRIMARY KEY, nonce BYTEA NOT NULL, sealed BYTEA NOT NULL);",
    // 3: the operator's note on a task (why it failed, which the caller is not told), kept
    // apart from the task: a turn may fail before its task is first written.
    "CREATE TABLE task_notes (
        instance_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        note TEXT NOT NULL,
        PRIMARY KEY (instance_id, task_id)
    );",
    // 4: agent components' key-value buckets, each instance's apart.
    "CREATE TABLE agent_kv (
        scope TEXT NOT NULL,
        bucket TEXT NOT NULL,
        key TEXT NOT NULL,
        value BYTEA NOT NULL,
        PRIMARY KEY (scope, bucket, key)
    );",
    // 5: each task's owner (docs/auth.md "Authentication"); older tasks are the shared principal's.
    "ALTER TABLE tasks ADD COLUMN principal TEXT NOT NULL DEFAULT 'token';
    CREATE INDEX tasks_by_principal ON tasks (instance_id, principal, updated_at DESC, id DESC);",
    // 6: the trace of the request that created each task (docs/operating.md "Traces").
    "ALTER TABLE tasks ADD COLUMN trace_id TEXT;",
    // 7: each conversation's summary kept beside its tasks by a trigger, so the control
    // snapshot's sessions and the session reads read a few rows instead of grouping every task
    // (SQLite's migration 13; ties on the latest by instance and context in byte order, as the
    // other stores). `created_at` and `peer_id` never change on update; a task moving to another
    // context recounts the one it left. The active states are `TaskState::ACTIVE`. The context
    // index leads with the context, so a context filter without an instance reads its tasks
    // only; the states a filter finds few of get an index of their own (partial: a query states
    // `state <> 3` to use it; `tasks_by_state` is the running tasks').
    "ALTER TABLE contexts ADD COLUMN tasks BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN active BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN peer_id TEXT;
    DELETE FROM contexts;
    INSERT INTO contexts (instance_id, context_id, first_seen, last_seen, tasks, active, peer_id)
        SELECT instance_id, context_id, MIN(created_at), MAX(updated_at), COUNT(*),
            COUNT(*) FILTER (WHERE state IN (1, 2, 6, 8)), MIN(peer_id COLLATE \"C\")
        FROM tasks GROUP BY instance_id, context_id;
    CREATE INDEX contexts_by_last_seen
        ON contexts (last_seen DESC, instance_id COLLATE \"C\", context_id COLLATE \"C\");
    CREATE INDEX contexts_by_context ON contexts (context_id);
    DROP INDEX tasks_by_context;
    CREATE INDEX tasks_by_context ON tasks (context_id, instance_id, updated_at DESC, id DESC);
    CREATE INDEX tasks_by_state_update ON tasks (state, updated_at DESC, id DESC) WHERE state <> 3;
    CREATE FUNCTION a2a_edge_keep_context() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' THEN
            IF OLD.context_id = NEW.context_id THEN
                UPDATE contexts SET
                    active = active + (NEW.state IN (1, 2, 6, 8))::INT
                        - (OLD.state IN (1, 2, 6, 8))::INT,
                    last_seen = CASE
                        WHEN NEW.updated_at >= last_seen THEN NEW.updated_at
                        WHEN OLD.updated_at < last_seen THEN last_seen
                        ELSE (SELECT MAX(t.updated_at) FROM tasks t
                            WHERE t.context_id = NEW.context_id
                                AND t.instance_id = NEW.instance_id) END
                WHERE instance_id = NEW.instance_id AND context_id = NEW.context_id;
                RETURN NULL;
            END IF;
            DELETE FROM contexts c
                WHERE c.instance_id = OLD.instance_id AND c.context_id = OLD.context_id
                    AND NOT EXISTS (SELECT 1 FROM tasks t
                        WHERE t.context_id = OLD.context_id AND t.instance_id = OLD.instance_id);
            UPDATE contexts c SET (tasks, active, first_seen, last_seen, peer_id) = (
                SELECT COUNT(*), COUNT(*) FILTER (WHERE t.state IN (1, 2, 6, 8)),
                    MIN(t.created_at), MAX(t.updated_at), MIN(t.peer_id COLLATE \"C\")
                FROM tasks t
                WHERE t.context_id = OLD.context_id AND t.instance_id = OLD.instance_id)
            WHERE c.instance_id = OLD.instance_id AND c.context_id = OLD.context_id;
        END IF;
        INSERT INTO contexts (instance_id, context_id, first_seen, last_seen, tasks, active, peer_id)
        VALUES (NEW.instance_id, NEW.context_id, NEW.created_at, NEW.updated_at, 1,
            (NEW.state IN (1, 2, 6, 8))::INT, NEW.peer_id)
        ON CONFLICT (instance_id, context_id) DO UPDATE SET
            tasks = contexts.tasks + 1,
            active = contexts.active + EXCLUDED.active,
            first_seen = LEAST(contexts.first_seen, EXCLUDED.first_seen),
            last_seen = GREATEST(contexts.last_seen, EXCLUDED.last_seen),
            peer_id = LEAST(contexts.peer_id COLLATE \"C\", EXCLUDED.peer_id COLLATE \"C\");
        RETURN NULL;
    END $$;
    CREATE TRIGGER contexts_keep AFTER INSERT OR UPDATE OF context_id, state, updated_at ON tasks
        FOR EACH ROW EXECUTE FUNCTION a2a_edge_keep_context();",
    // 8: who wrote a task's body (`store::Writer`, SQLite's migration 15).
    "ALTER TABLE tasks ADD COLUMN stamp BIGINT NOT NULL DEFAULT 0;",
];

/// Brings the database up to the newest schema; refuses one from a newer runtime.
pub async fn migrate(client: &mut Client) -> anyhow::Result<()> {
    migrate_on(client)
        .await
        .map_err(|e| match e.downcast::<tokio_postgres::Error>() {
            Ok(e) => anyhow::anyhow!(super::describe(&e)),
            Err(e) => e,
        })
}

async fn migrate_on(client: &mut Client) -> anyhow::Result<()> {
    let tx = client.transaction().await?;
    // One migrating node at a time; the others wait here, then find nothing to do.
    tx.execute("SELECT pg_advisory_xact_lock(71352024)", &[])
        .await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS a2a_edge_schema (version INTEGER NOT NULL)")
        .await?;
    let current: i32 = match tx
        .query_opt("SELECT version FROM a2a_edge_schema", &[])
        .await?
    {
        Some(row) => row.get(0),
        None => {
            tx.execute("INSERT INTO a2a_edge_schema VALUES (0)", &[])
                .await?;
            0
        }
    };
    if current as usize > MIGRATIONS.len() {
        anyhow::bail!(
            "the database has schema version {current}, newer than this runtime's {}; upgrade a2a-edge",
            MIGRATIONS.len()
        );
    }
    for sql in MIGRATIONS.iter().skip(current.max(0) as usize) {
        tx.batch_execute(sql).await?;
    }
    tx.execute(
        "UPDATE a2a_edge_schema SET version = $1",
        &[&(MIGRATIONS.len() as i32)],
    )
    .await?;
    Ok(tx.commit().await?)
}
