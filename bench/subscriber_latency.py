#!/usr/bin/env python3
"""Latency from a frame published on node A to the same frame at a subscriber on node B (and,
for comparison, at a subscriber on A itself).

    subscriber_latency.py <base of A> <base of B> [tasks]

Each task runs the `ticker` instance's command on A, which prints `date +%s%N` every 50 ms; each
printed line becomes an artifact chunk. A subscriber on A and one on B (SubscribeToTask, opened
right after the task starts) stamp each chunk's arrival; the latency is arrival minus the time the
command printed into it (same machine, same clock). Prints p50/p99 of both, in ms. Standard
library only.
"""

import http.client
import json
import sys
import threading
import time
import urllib.parse
import uuid


def rpc_stream(base, method, params):
    url = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    conn.request(
        "POST",
        "/a2a/ticker",
        body,
        {"Content-Type": "application/json", "Accept": "text/event-stream", "A2A-Version": "1.0"},
    )
    return conn.getresponse()


def rpc(base, method, params):
    url = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    conn.request("POST", "/a2a/ticker", body, {"Content-Type": "application/json", "A2A-Version": "1.0"})
    return json.loads(conn.getresponse().read())


def events(response):
    data = []
    for raw in response:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("".join(data))
            data = []


def stamps(base, task_id, out):
    for event in events(rpc_stream(base, "SubscribeToTask", {"id": task_id})):
        now = time.time_ns()
        update = event.get("result", {}).get("artifactUpdate")
        if not update:
            continue
        for part in update["artifact"]["parts"]:
            for line in part.get("text", "").split():
                if line.isdigit() and len(line) >= 18:
                    out.append((now - int(line)) / 1e6)


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))] if values else float("nan")


def main():
    a, b = sys.argv[1], sys.argv[2]
    tasks = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    local, remote = [], []
    for _ in range(tasks):
        sent = rpc(a, "SendMessage", {
            "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "tick"}]},
            "configuration": {"returnImmediately": True},
        })
        task_id = sent["result"]["task"]["id"]
        readers = [
            threading.Thread(target=stamps, args=(a, task_id, local)),
            threading.Thread(target=stamps, args=(b, task_id, remote)),
        ]
        for r in readers:
            r.start()
        for r in readers:
            r.join()
    print(f"subscriber latency over {tasks} tasks, publish (command output on A) to frame:")
    print(f"  subscriber on A (same node): {len(local)} frames, p50 {pct(local, 50):.1f} ms, p99 {pct(local, 99):.1f} ms")
    print(f"  subscriber on B (other node): {len(remote)} frames, p50 {pct(remote, 50):.1f} ms, p99 {pct(remote, 99):.1f} ms")


if __name__ == "__main__":
    main()
