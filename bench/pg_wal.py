#!/usr/bin/env python3
"""What a SendMessage's task write costs the PostgreSQL store, in WAL bytes.

    python3 bench/pg_wal.py POSTGRES_URL [a2a-edge binary, default target/release/a2a-edge] [sends, default 2000]

Starts a2a-edge on the store at POSTGRES_URL (echo preset), sends SendMessages one after the
other over one connection, and divides the growth of the server's WAL position
(`pg_current_wal_lsn()`, read with psql) by the sends: right after a CHECKPOINT (each page's first
change then logs the whole page) and in the steady state after it. A SQLite page is 4 KiB: the
SQLite rows of `bench/store_pages.py` compare at 4,120 bytes a WAL frame. Needs psql.
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def psql(url, sql):
    return subprocess.run(["psql", url, "-Atc", sql], check=True, capture_output=True, text=True).stdout.strip()


def lsn(url):
    return int(psql(url, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    url = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else "target/release/a2a-edge"
    sends = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    data = tempfile.mkdtemp()
    port = free_port()
    config = os.path.join(data, "config.toml")
    open(config, "w").write('[storage]\nbackend = "postgres"\n')
    key = __import__("base64").b64encode(os.urandom(32)).decode()
    env = dict(os.environ, A2A_EDGE_DATABASE_URL=url, A2A_EDGE_SECRET_KEY=key, RUST_LOG="warn")
    server = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data, "--config", config], env=env)
    try:
        for _ in range(300):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port)
                conn.request("GET", "/a2a/demo/agent-card.json")
                conn.getresponse().read()
                break
            except (OSError, http.client.HTTPException):
                time.sleep(0.1)
        else:
            sys.exit("a2a-edge did not answer within 30 s")
        n = [0]

        def send():
            n[0] += 1
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
                "messageId": f"wal-{os.getpid()}-{n[0]}", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}})
            conn.request("POST", "/a2a/demo", body, {"content-type": "application/json", "A2A-Version": "1.0"})
            answer = json.loads(conn.getresponse().read())
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer

        for _ in range(sends):
            send()
        print(f"| PostgreSQL, {sends} sends back to back | WAL bytes per SendMessage | SQLite pages' worth |")
        print("|---|---|---|")
        for name in ("right after a CHECKPOINT", "steady (after those)"):
            if name.startswith("right"):
                psql(url, "CHECKPOINT")
            before = lsn(url)
            for _ in range(sends):
                send()
            per = (lsn(url) - before) / sends
            print(f"| {name} | {per:,.0f} | {per / 4120:.1f} |")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
