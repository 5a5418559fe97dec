#!/usr/bin/env python3
"""What a SendMessage's task write costs the SQLite store, in WAL pages.

    python3 bench/store_pages.py [tasks stored first, default 20000] [sends, default 512]

Builds the schema from the migrations in runtime/src/store/sqlite/schema.rs, stores the tasks,
then replays the statements of echo SendMessages one after the other with the WAL's automatic
checkpoint off, and divides the WAL's growth by the sends. "one commit": the echo's path (the
task is held and written once, settled); "two commits": written when it starts and again when it
settles, with two frames.

The store's path (runtime/src/store/sqlite/log.rs): each write checks the claim and the task id
and appends one record to `task_log`; the writer folds the records into the tables (the task
insert or update with its indexes and count triggers, its conversation's summary, the claim
record, the frames) and empties the log once 64 records wait or after 100 ms without a write.
Rows: sends back to back (a fold per 64), a send alone (a fold of its own), and the direct write
the log replaced, with and without each of its indexes. Counts pages, not time, so the machine's
load does not move it.
"""
import json
import os
import re
import sqlite3
import sys
import tempfile
import uuid

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SCHEMA = os.path.join(ROOT, "runtime/src/store/sqlite/schema.rs")
FRAME = 4096 + 24  # a WAL frame: its header and one page


def migrations():
    src = open(SCHEMA).read()
    start = src.index("const MIGRATIONS")
    body = src[start : src.index("];", start)]
    body = "\n".join(l for l in body.splitlines() if not l.strip().startswith("//"))
    return re.findall(r'"((?:[^"\\]|\\.)*)"', body, re.S)


def v7(ms):
    b = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    b[6] = (b[6] & 0x0F) | 0x70
    b[8] = (b[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(b)))


UPSERT_CONTEXT = """INSERT INTO contexts VALUES (?1, 'demo', 1, ?2, ?3, ?3, NULL)
    ON CONFLICT (context_id, instance_id) DO UPDATE SET tasks = tasks + 1,
        active = active + excluded.active, first_seen = MIN(first_seen, excluded.first_seen),
        last_seen = MAX(last_seen, excluded.last_seen),
        peer_id = MIN(COALESCE(peer_id, excluded.peer_id), COALESCE(excluded.peer_id, peer_id))"""
CLAIM = """INSERT INTO message_ids (instance_id, message_id, task_id, fingerprint) VALUES (?, ?, ?, ?)
    ON CONFLICT (instance_id, message_id) DO UPDATE SET task_id = excluded.task_id"""
LOOKUP = "SELECT task_id, fingerprint FROM message_ids WHERE instance_id = ? AND message_id = ?"
INSERT_TASK = """INSERT INTO tasks (id, instance_id, context_id, state, skill, created_at,
    updated_at, version, principal, body, lease_node, lease_until)
    VALUES (?, 'demo', ?, ?, 'echo', ?, ?, 1, 'token', ?, ?, ?)"""
UPDATE_TASK = """UPDATE tasks SET state = 3, updated_at = ?2, version = version + 1, body = ?3,
    last_seq = last_seq + 2, lease_node = NULL, lease_until = NULL
    WHERE id = ?1 AND instance_id = 'demo' AND version = 1 RETURNING last_seq"""


APPEND = """INSERT INTO task_log (id, instance_id, context_id, state, skill, created_at, updated_at,
    version, body, principal, created, last_seq, lease_node, lease_until, claim_message_id,
    claim_fingerprint, frames) VALUES (?, 'demo', ?, ?, 'echo', ?, ?, ?, ?, 'token', ?, ?, ?, ?, ?, ?, ?)"""
TAKEN = "SELECT 1 FROM tasks WHERE id = ?"
INSERT_FOLDED = """INSERT INTO tasks (id, instance_id, context_id, state, skill, created_at, updated_at,
    version, principal, body, lease_node, lease_until, last_seq)
    VALUES (?, 'demo', ?, ?, 'echo', ?, ?, ?, 'token', ?, NULL, NULL, ?)"""
FOLD_AT = 64


def logged(c, now, twice, pending):
    """One echo SendMessage through the task log: an append per commit; the records kept in
    `pending` until a fold."""
    tid, ctx, mid = v7(now), v7(now), str(uuid.uuid4())
    done = echo_task(tid, ctx, mid, now)
    frames = None
    c.execute("BEGIN")
    c.execute(LOOKUP, ("demo", mid)).fetchall()
    c.execute(TAKEN, (tid,)).fetchall()
    if twice:
        working = dict(done, status={"state": "TASK_STATE_WORKING"}, artifacts=[], history=done["history"][:1])
        c.execute(APPEND, (tid, ctx, 2, now, now, 1, json.dumps(working), 1, 0, "node", now + 30000, mid, "f" * 64, None))
        c.execute("COMMIT")
        c.execute("BEGIN")
        frame = {"statusUpdate": {"taskId": tid, "contextId": ctx, "status": {"state": "TASK_STATE_COMPLETED"}}}
        frames = json.dumps([[1, json.dumps(frame)], [1, json.dumps(frame)]])
        c.execute(APPEND, (tid, ctx, 3, now, now + 1, 2, json.dumps(done), 0, 2, None, None, None, None, frames))
    else:
        c.execute(APPEND, (tid, ctx, 3, now, now, 1, json.dumps(done), 1, 0, None, None, mid, "f" * 64, None))
    c.execute("COMMIT")
    pending.append((tid, ctx, mid, json.dumps(done), now, 2 if twice else 0, frames))


def fold(c, pending):
    """The writer's fold: each task's latest row, its summary, claim and frames; the log emptied."""
    c.execute("BEGIN")
    for tid, ctx, mid, body, now, last, frames in pending:
        c.execute(INSERT_FOLDED, (tid, ctx, 3, now, now, 2 if last else 1, body, last))
        c.execute(UPSERT_CONTEXT, (ctx, 0, now))
        c.execute(CLAIM, ("demo", mid, tid, "f" * 64))
        for seq, (kind, json_) in enumerate(json.loads(frames) if frames else [], 1):
            c.execute("INSERT INTO task_frames VALUES (?, ?, ?, ?)", (tid, seq, kind, json_))
    c.execute("DELETE FROM task_log")
    c.execute("COMMIT")
    pending.clear()


def echo_task(tid, ctx, mid, now):
    msg = {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": "hello"}], "contextId": ctx, "taskId": tid}
    return {
        "id": tid, "contextId": ctx,
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-05T08:00:00.001Z"},
        "history": [msg, {"messageId": v7(now), "role": "ROLE_AGENT", "parts": [{"text": "hello"}]}],
        "artifacts": [{"artifactId": v7(now), "parts": [{"text": "hello"}]}],
        "metadata": {"skill": "echo"},
    }


def send(c, now, twice):
    """One echo SendMessage's direct writes (before the task log): one commit, or two when `twice`."""
    tid, ctx, mid = v7(now), v7(now), str(uuid.uuid4())
    done = echo_task(tid, ctx, mid, now)
    msg = done["history"][0]
    c.execute("BEGIN")
    c.execute(LOOKUP, ("demo", mid)).fetchall()
    if twice:
        working = dict(done, status={"state": "TASK_STATE_WORKING"}, history=[msg], artifacts=[])
        c.execute(INSERT_TASK, (tid, ctx, 2, now, now, json.dumps(working), "node", now + 30000))
        c.execute(UPSERT_CONTEXT, (ctx, 1, now))
        c.execute(CLAIM, ("demo", mid, tid, "f" * 64))
        c.execute("COMMIT")
        c.execute("BEGIN")
        c.execute(UPDATE_TASK, (tid, now + 1, json.dumps(done))).fetchone()
        for seq in (1, 2):
            frame = {"statusUpdate": {"taskId": tid, "contextId": ctx, "status": {"state": "TASK_STATE_COMPLETED"}}}
            c.execute("INSERT INTO task_frames VALUES (?, ?, 1, ?)", (tid, seq, json.dumps(frame)))
    else:
        c.execute(INSERT_TASK, (tid, ctx, 3, now, now, json.dumps(done), None, None))
        c.execute(UPSERT_CONTEXT, (ctx, 0, now))
        c.execute(CLAIM, ("demo", mid, tid, "f" * 64))
    c.execute("COMMIT")


def pages(drop, stored, sends, twice, fold_at=None):
    """WAL pages per send: the direct write, or through the log folded every `fold_at`."""
    path = os.path.join(tempfile.mkdtemp(), "store.db")
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode = WAL")
    c.execute("PRAGMA synchronous = NORMAL")
    for m in migrations():
        c.executescript(m)
    for d in drop:
        c.execute(d)
    c.execute("INSERT INTO instances VALUES ('demo', '{}')")
    now = 1_800_000_000_000
    c.execute("BEGIN")
    for i in range(stored):
        tid, ctx = v7(now + i), v7(now + i)
        c.execute(INSERT_TASK, (tid, ctx, 3, now + i, now + i, "x" * 700, None, None))
        c.execute(UPSERT_CONTEXT, (ctx, 0, now + i))
        c.execute(CLAIM, ("demo", str(uuid.uuid4()), tid, "f" * 64))
        c.execute("INSERT INTO task_frames VALUES (?, 1, 1, ?)", (tid, "y" * 150))
    c.execute("COMMIT")
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.execute("PRAGMA wal_autocheckpoint = 0")
    pending = []
    for i in range(sends):
        if fold_at is None:
            send(c, now + stored + i, twice)
            continue
        logged(c, now + stored + i, twice, pending)
        if len(pending) >= fold_at or i == sends - 1:
            fold(c, pending)
    grown = os.path.getsize(path + "-wal") - 32
    c.close()
    return grown / FRAME / sends


def main():
    stored = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    sends = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    print(f"| write ({stored} tasks stored, {sends} sends) | pages per SendMessage, one commit | two commits |")
    print("|---|---|---|")
    for name, every in [(f"task log, sends back to back (a fold per {FOLD_AT})", FOLD_AT), ("task log, a send alone (a fold of its own)", 1)]:
        print(f"| {name} | {pages([], stored, sends, False, every):.1f} | {pages([], stored, sends, True, every):.1f} |")
    print()
    listing = ["tasks_by_update", "tasks_by_instance", "tasks_by_context", "tasks_by_principal"]
    cases = [("nothing (the direct write)", [])]
    single = listing + ["tasks_by_state", "tasks_by_lease", "contexts_by_last_seen"]
    cases += [(f"`{i}`", [f"DROP INDEX {i}"]) for i in single]
    cases += [("the `task_counts` triggers", ["DROP TRIGGER task_counts_insert", "DROP TRIGGER task_counts_update"])]
    cases += [("all four listing indexes", [f"DROP INDEX {i}" for i in listing])]
    print(f"| the direct write, dropped | pages per SendMessage, one commit | two commits |")
    print("|---|---|---|")
    for name, drop in cases:
        print(f"| {name} | {pages(drop, stored, sends, False):.1f} | {pages(drop, stored, sends, True):.1f} |")


if __name__ == "__main__":
    main()
