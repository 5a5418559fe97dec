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
    // 5: each task's owner (README "Authentication"); older tasks are the shared principal's.
    "ALTER TABLE tasks ADD COLUMN principal TEXT NOT NULL DEFAULT 'token';
    CREATE INDEX tasks_by_principal ON tasks (instance_id, principal, updated_at DESC, id DESC);",
    // 6: the trace of the request that created each task (README "Traces").
    "ALTER TABLE tasks ADD COLUMN trace_id TEXT;",
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
