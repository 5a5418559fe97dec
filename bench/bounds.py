#!/usr/bin/env python3
"""Resource-bound benchmarks of a2a-edge (issue 10), stdlib only, loopback only.

    bench/bounds.py BINARY trickle   # RSS held by bodies sent one byte per packet
    bench/bounds.py BINARY parts     # server CPU per SendMessage by part count / words
    bench/bounds.py BINARY streams   # N open SubscribeToTask streams: RSS, and card + SendMessage
                                     # latency on another instance meanwhile; RSS after they close

Each scenario starts BINARY on a fresh data directory and a free port, and prints one table.
Pass several binaries (old,new) separated by commas to compare them in the same go.
"""

import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

INSTANCES = """
[[instances]]
id = "a"
name = "a"
preset = "scripted"
[[instances]]
id = "b"
name = "b"
preset = "echo"
"""

# Older builds refuse keys they do not know; they get INSTANCES alone.
CONFIG = """
[runtime]
maxConnections = 20000
maxStreams = 20000
[limits]
maxParts = 100000
maxStreams = 20000
executionTimeoutMs = 600000
""" + INSTANCES


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary):
        self.dir = tempfile.TemporaryDirectory()
        for config in [CONFIG, INSTANCES]:
            path = os.path.join(self.dir.name, "edge.toml")
            with open(path, "w") as f:
                f.write(config)
            self.port = free_port()
            self.proc = subprocess.Popen(
                [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", os.path.join(self.dir.name, "data"), "--config", path],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    return
                except OSError:
                    if self.proc.poll() is not None:
                        break
                    time.sleep(0.05)

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def cpu_s(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.dir.cleanup()


def rpc_bytes(method, params, path, stream=False, rid=1):
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
    accept = "text/event-stream" if stream else "application/json"
    head = f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: {accept}\r\ncontent-length: {len(body)}\r\n\r\n"
    return head.encode(), body


async def request(port, raw):
    """One request on its own connection (closed after): (status, body), chunked or not."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(raw.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n", 1))
    await w.drain()
    data = await r.read()
    w.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        out = b""
        while body:
            size, _, rest = body.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            out, body = out + rest[:n], rest[n + 2:]
        body = out
    return int(head.split()[1]), body


def message(mid, parts):
    return {"message": {"messageId": mid, "role": "ROLE_USER", "parts": parts}}


async def trickle(srv, conns=4, body_bytes=20000):
    before = srv.rss_mib()

    async def one(i):
        try:
            r, w = await asyncio.open_connection("127.0.0.1", srv.port)
            w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            w.write(f"POST /a2a/b HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {body_bytes}\r\n\r\n".encode())
            for _ in range(body_bytes):
                w.write(b" ")
                await w.drain()
                await asyncio.sleep(0)
            w.close()
        except OSError:
            return

    tasks = [asyncio.create_task(one(i)) for i in range(conns)]
    peak = before
    while not all(t.done() for t in tasks):
        await asyncio.sleep(0.2)
        peak = max(peak, srv.rss_mib())
    await asyncio.sleep(1)
    return {"conns": conns, "bytes each": body_bytes, "rss before MiB": round(before), "rss peak MiB": round(peak), "rss after MiB": round(srv.rss_mib())}


async def parts(srv):
    rows = []
    for n in [1000, 5000, 10000, 20000]:
        cpu = srv.cpu_s()
        start = time.time()
        head, body = rpc_bytes("SendMessage", message(f"m-parts-{n}", [{"text": f"p{i}"} for i in range(n)]), "/a2a/b")
        status, _ = await request(srv.port, head + body)
        rows.append({"parts": n, "status": status, "server cpu s": round(srv.cpu_s() - cpu, 2), "wall s": round(time.time() - start, 2)})
    for words in [100_000, 260_000]:
        cpu = srv.cpu_s()
        start = time.time()
        head, body = rpc_bytes("SendMessage", message(f"m-words-{words}", [{"text": "w " * words}]), "/a2a/b")
        status, _ = await request(srv.port, head + body)
        rows.append({"words": words, "status": status, "server cpu s": round(srv.cpu_s() - cpu, 2), "wall s": round(time.time() - start, 2)})
    return rows


async def latencies(port, n):
    card = f"GET /a2a/b/agent-card.json HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".encode()
    out = {"card": [], "send": [], "errors": 0}
    for i in range(n):
        for kind, raw in [("card", card), ("send", b"".join(rpc_bytes("SendMessage", message(f"m-lat-{time.time_ns()}-{i}", [{"text": "hi"}]), "/a2a/b")))]:
            t = time.perf_counter()
            status, _ = await request(port, raw)
            out[kind].append((time.perf_counter() - t) * 1000)
            out["errors"] += status != 200
    pct = lambda xs, p: round(sorted(xs)[int(len(xs) * p) - 1], 2)
    return {"card p50 ms": pct(out["card"], 0.5), "card p99 ms": pct(out["card"], 0.99), "send p50 ms": pct(out["send"], 0.5), "send p99 ms": pct(out["send"], 0.99), "errors": out["errors"]}


async def open_streams(srv, task, n):
    opened, refused, writers = 0, 0, []
    sub_head, sub_body = rpc_bytes("SubscribeToTask", {"id": task}, "/a2a/a", stream=True)
    for _ in range(n):
        try:
            r, w = await asyncio.open_connection("127.0.0.1", srv.port)
            w.write(sub_head + sub_body)
            await w.drain()
            line = await asyncio.wait_for(r.readline(), 10)
            if b" 200 " in line:
                opened += 1
                writers.append(w)
            else:
                refused += 1
                w.close()
        except (OSError, asyncio.TimeoutError):
            refused += 1
    return opened, refused, writers


async def streams(srv, n=10000, rounds=2):
    """Opens n streams, measures, closes them; `rounds` times (a leak grows each round,
    allocator retention does not)."""
    head, body = rpc_bytes("SendMessage", message("tck-input-required-bench", [{"text": "x"}]), "/a2a/a")
    _, answer = await request(srv.port, head + body)
    task = json.loads(answer)["result"]["task"]["id"]
    base = srv.rss_mib()
    idle = await latencies(srv.port, 200)
    row = {"streams asked": n, "rss base MiB": round(base)}
    row.update({f"idle {k}": v for k, v in idle.items()})
    for round_ in range(1, rounds + 1):
        opened, refused, writers = await open_streams(srv, task, n)
        held = srv.rss_mib()
        busy = await latencies(srv.port, 500)
        for w in writers:
            w.close()
        await asyncio.sleep(3)
        row.update({f"r{round_} opened": opened, f"r{round_} refused": refused, f"r{round_} rss MiB": round(held),
                    f"r{round_} KiB per stream": round((held - base) * 1024 / max(opened, 1), 1), f"r{round_} rss after close MiB": round(srv.rss_mib())})
        row.update({f"r{round_} {k}": v for k, v in busy.items()})
    return row


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    binaries, scenario = sys.argv[1].split(","), sys.argv[2]
    extra = [int(a) for a in sys.argv[3:]]
    for binary in binaries:
        srv = Server(binary)
        try:
            result = asyncio.run({"trickle": trickle, "parts": parts, "streams": streams}[scenario](srv, *extra))
        finally:
            srv.stop()
        for row in result if isinstance(result, list) else [result]:
            print(json.dumps({"binary": binary, **row}))


if __name__ == "__main__":
    main()
