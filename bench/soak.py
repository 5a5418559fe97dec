#!/usr/bin/env python3
"""HTTP-level fuzz/soak of a running a2a-edge (loopback only, stdlib only).

    bench/soak.py BINARY [SECONDS] [SEED]

Starts BINARY on a fresh data directory, then for SECONDS (default 120) mutates valid requests
(JSON-RPC methods, streams, cards, control reads and actions: byte flips, truncation, deleted,
duplicated, retyped and oversized fields, odd headers) and sends them. It fails (exit 1) on any
5xx other than the documented 503 (every component instance busy), any answer slower than 5 s,
the server exiting, or RSS above 512 MiB; it prints the totals either way.
"""

import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

CONFIG = """
[[instances]]
id = "tck"
name = "tck"
preset = "scripted"
[[instances]]
id = "echo"
name = "echo"
preset = "echo"
[instances.limits]
ratePerSecond = 50.0
rateBurst = 100
"""

RSS_LIMIT_MIB = 512
SLOW_S = 5.0


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024


def templates(task_id):
    msg = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "tck-complete-task hi"}, {"data": {"k": [1, 2]}}]}
    rpc = lambda method, params: {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return [
        ("POST", "/a2a/tck", rpc("SendMessage", {"message": msg, "configuration": {"historyLength": 1}}), {}),
        ("POST", "/a2a/echo", rpc("SendMessage", {"message": msg}), {}),
        ("POST", "/a2a/tck", rpc("SendStreamingMessage", {"message": msg}), {"accept": "text/event-stream"}),
        ("POST", "/a2a/tck", rpc("GetTask", {"id": task_id, "historyLength": 2}), {}),
        ("POST", "/a2a/tck", rpc("ListTasks", {"pageSize": 5, "status": "TASK_STATE_COMPLETED", "statusTimestampAfter": "2026-01-01T00:00:00Z"}), {}),
        ("POST", "/a2a/tck", rpc("CancelTask", {"id": task_id}), {}),
        ("POST", "/a2a/tck", rpc("SubscribeToTask", {"id": task_id}), {"accept": "text/event-stream", "last-event-id": "1"}),
        ("POST", "/a2a/tck", rpc("GetExtendedAgentCard", {}), {}),
        ("GET", "/a2a/tck/agent-card.json", None, {"if-none-match": '"x"'}),
        ("GET", "/a2a/api?taskLimit=5&taskState=completed", None, {}),
        ("GET", "/a2a/api/task?id=" + task_id, None, {}),
        ("GET", "/a2a/api/metrics?format=prometheus", None, {}),
        ("POST", "/a2a/api", {"action": "inbound.sendTest", "id": "tck", "text": "tck-complete-task x"}, {}),
        ("POST", "/a2a/api", {"action": "inbound.update", "id": "echo", "limits": {"maxParts": 100}}, {}),
        ("POST", "/a2a/api", {"action": "component.reload", "name": "a2a-server"}, {}),
    ]


def mutate_value(rng, v, depth=0):
    r = rng.random()
    if isinstance(v, dict) and v and r < 0.5:
        k = rng.choice(list(v))
        v = dict(v)
        choice = rng.random()
        if choice < 0.3:
            del v[k]
        elif choice < 0.6:
            v[k] = mutate_value(rng, v[k], depth + 1)
        else:
            v[k] = rng.choice([None, 0, -1, 2**63, "", "x" * rng.choice([10, 300, 5000]), [], {}, True, [v[k]] * rng.choice([2, 50, 2000])])
        return v
    if isinstance(v, list) and v and r < 0.5:
        return v * rng.choice([0, 2, 1001]) if rng.random() < 0.3 else [mutate_value(rng, x, depth + 1) for x in v]
    if isinstance(v, str):
        return rng.choice([v + "\u202e", v[: len(v) // 2], v * 3, "../" + v, v.upper(), "\u0000", "%61", "TASK_STATE_" + v])
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return rng.choice([-v, v * 10**6, 1.5, "1", None])
    return v


def mutate_bytes(rng, b):
    b = bytearray(b)
    for _ in range(rng.randint(1, 4)):
        if not b:
            break
        op, i = rng.random(), rng.randrange(len(b))
        if op < 0.4:
            b[i] = rng.randrange(256)
        elif op < 0.7:
            del b[i:]
        else:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return bytes(b)


def send(port, method, path, body, headers):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=SLOW_S + 5)
    start = time.time()
    try:
        conn.request(method, path, body=body, headers={"host": "127.0.0.1", "content-type": "application/json", **headers})
        r = conn.getresponse()
        # A stream stays open while its task runs: its head (and first frame) is what counts.
        streaming = r.getheader("content-type", "").startswith("text/event-stream")
        data = r.read1(65536) if streaming else r.read(1 << 20)
        return r.status, time.time() - start, data
    finally:
        conn.close()


def main():
    binary, seconds = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 120.0
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else random.randrange(1 << 30)
    rng = random.Random(seed)
    tmp = tempfile.TemporaryDirectory()
    with open(os.path.join(tmp.name, "edge.toml"), "w") as f:
        f.write(CONFIG)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", os.path.join(tmp.name, "data"), "--config", os.path.join(tmp.name, "edge.toml")],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp.name, "server.log"), "w"))
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    _, _, body = send(port, "POST", "/a2a/tck", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "seed", "role": "ROLE_USER", "parts": [{"text": "tck-input-required"}]}}}), {})
    task_id = json.loads(body)["result"]["task"]["id"]
    counts, failures, slowest, peak = {}, [], 0.0, 0.0
    deadline = time.time() + seconds
    n = 0
    while time.time() < deadline:
        n += 1
        method, path, value, headers = rng.choice(templates(task_id))
        if isinstance(value, dict) and "messageId" in json.dumps(value):
            value = json.loads(json.dumps(value).replace('"messageId": "m"', f'"messageId": "m-{n}"'))
        raw = json.dumps(mutate_value(rng, value) if value is not None and rng.random() < 0.7 else value).encode() if value is not None else None
        if raw is not None and rng.random() < 0.3:
            raw = mutate_bytes(rng, raw)
        if rng.random() < 0.1:
            headers = {**headers, rng.choice(["content-type", "a2a-version", "accept", "authorization"]): rng.choice(["text/plain", "0.3", "*/*", "Bearer x", "\u00e9"])}
        try:
            status, took, _ = send(port, method, path, raw, headers)
        except Exception as e:  # noqa: BLE001 - any transport failure is a finding
            if proc.poll() is not None:
                failures.append(f"the server exited ({proc.returncode}) on request {n}")
                break
            status, took = f"transport {type(e).__name__}", SLOW_S + 1
        counts[status] = counts.get(status, 0) + 1
        slowest = max(slowest, took)
        if (isinstance(status, int) and status >= 500 and status != 503) or took > SLOW_S:
            failures.append(f"{method} {path} → {status} in {took:.1f}s: {raw[:200] if raw else b''!r}")
        if n % 50 == 0:
            peak = max(peak, rss_mib(proc.pid))
            if peak > RSS_LIMIT_MIB:
                failures.append(f"RSS {peak:.0f} MiB over {RSS_LIMIT_MIB}")
                break
    alive = proc.poll() is None
    if alive:
        peak = max(peak, rss_mib(proc.pid))
        proc.terminate()
        proc.wait(15)
    else:
        failures.append("the server is gone")
    print(json.dumps({"seed": seed, "requests": n, "statuses": {str(k): v for k, v in sorted(counts.items(), key=str)}, "slowest s": round(slowest, 2),
                      "peak rss MiB": round(peak), "failures": len(failures)}))
    for f in failures[:20]:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
