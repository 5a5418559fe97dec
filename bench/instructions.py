#!/usr/bin/env python3
"""Instructions per request, counted by callgrind, against the budget in bench/instructions.json.

    bench/instructions.py BINARY [--record]

Starts BINARY under `valgrind --tool=callgrind` on a fresh data directory (compiled components
cached in target/instructions-cache), warms it up, then counts, for each kind of request (a card
read, GetTask, a blocking echo SendMessage), every instruction the whole process executes while
it answers ROUNDS of them one after another, and divides. Exits 1 naming the figure and the
budget when a kind costs more than its budget plus the file's tolerance; prints a line when it
costs much less (lower the budget then). `--record` writes the figures as the new budget: a
reviewed edit, with the reason in its commit. Counts do not depend on the machine's load; compare
them only with counts of this script. With PROFILE=DIR each kind's callgrind dump is kept as
DIR/<kind>.callgrind (read it with `callgrind_annotate --inclusive=yes`); RUST_LOG replaces the
log filter (default `warn,a2a_edge=info`: the access line on, as operators run it).
"""

import http.client
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUDGET = ROOT / "bench" / "instructions.json"
CACHE = ROOT / "target" / "instructions-cache"
ROUNDS = 40
WARM = 20


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def send_message(i):
    """The `i`th blocking SendMessage (method, path, body): a message id of its own each time."""
    msg = {"messageId": f"m-{i}-{time.monotonic_ns()}", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
    return ("POST", "/a2a/demo", {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": msg}})


def kinds(task_id):
    """(name, the `i`th request) of each kind measured; a request is (method, path, body)."""
    return [
        ("card", lambda i: ("GET", "/a2a/demo/agent-card.json", None)),
        ("GetTask", lambda i: ("POST", "/a2a/demo", {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}})),
        ("SendMessage", send_message),
    ]


def call(conn, method, path, body):
    headers = {"A2A-Version": "1.0"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    answer = r.read()
    if r.status != 200:
        sys.exit(f"{method} {path}: HTTP {r.status}: {answer[:300]!r}")
    return answer


def control(pid, *args):
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def totals(out_dir, before):
    """The instruction count of the dump written since `before` (the dumps seen until then)."""
    for _ in range(600):
        new = sorted(set(out_dir.glob("cg.out.*")) - before, key=lambda p: p.stat().st_mtime)
        if new:
            text = new[-1].read_text()
            if "\ntotals:" in text or "\nsummary:" in text:
                line = next(l for l in text.splitlines() if l.startswith(("totals:", "summary:")))
                return new[-1], int(line.split()[1])
        time.sleep(0.1)
    sys.exit("callgrind wrote no dump within 60 s")


def measure(binary):
    CACHE.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp())
    config = work / "edge.toml"
    config.write_text(f'[runtime]\ncacheDir = "{CACHE}"\n')
    port = free_port()
    log = open(work / "server.log", "w")
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/cg.out", binary, "serve",
         "--listen", f"127.0.0.1:{port}", "--data-dir", str(work / "data"), "--config", str(config)],
        stdout=subprocess.DEVNULL, stderr=log,
        env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn,a2a_edge=info")},
    )
    try:
        deadline = time.monotonic() + 600
        while True:
            probe = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                probe.request("GET", "/readyz")
                if probe.getresponse().status == 200:
                    break
            except OSError:
                pass
            finally:
                probe.close()
            if server.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"the server did not become ready under valgrind:\n{(work / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        first = json.loads(call(conn, *send_message(0)))
        task_id = first["result"]["task"]["id"]
        measured = {}
        # A metrics read folds the store's task log (it counts tasks): before each window, so no
        # fold of earlier writes (the writer's idle timer runs it) lands in another kind's count.
        # SendMessage's own records are folded after its window, unless a send waits longer than
        # that timer under valgrind: its count is the request's path.
        fold = ("GET", "/a2a/api/metrics", None)
        for name, request in kinds(task_id):
            for i in range(WARM):
                call(conn, *request(i))
            call(conn, *fold)
            seen = set(work.glob("cg.out.*"))
            control(server.pid, "-z")
            for i in range(ROUNDS):
                call(conn, *request(WARM + i))
            control(server.pid, "-d")
            dump, count = totals(work, seen)
            measured[name] = count // ROUNDS
            if os.environ.get("PROFILE"):
                keep = pathlib.Path(os.environ["PROFILE"])
                keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(dump, keep / f"{name}.callgrind")
        return measured
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(work)


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    record = "--record" in args
    binary = next(a for a in args if a != "--record")
    measured = measure(binary)
    budget = json.loads(BUDGET.read_text())
    if record:
        budget["perRequest"] = measured
        BUDGET.write_text(json.dumps(budget, indent=2) + "\n")
        print(f"instructions per request recorded in {BUDGET.relative_to(ROOT)}: {measured}")
        return 0
    tolerance = budget["tolerance"]
    over = []
    for name, count in measured.items():
        allowed = budget["perRequest"][name]
        line = f"instructions per {name}: {count:,} (budget {allowed:,}, {count / allowed - 1:+.1%})"
        print(line)
        if count > allowed * (1 + tolerance):
            over.append(line)
        elif count < allowed * (1 - 2 * tolerance):
            print(f"  {name} costs much less than its budget: lower it (bench/instructions.py {binary} --record)")
    if over:
        print(f"over budget by more than {tolerance:.0%}: a change raised the cost of a request. Find what in the "
              "callgrind profile (bench/README.md \"Counting instructions\"); raising the budget is a reviewed edit "
              "of bench/instructions.json (--record) with the reason")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
