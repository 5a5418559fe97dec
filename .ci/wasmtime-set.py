#!/usr/bin/env python3
"""Says whether a newer wasmtime 48.x is out for all three crates of the set (wasmtime,
wasmtime-wasi, wasmtime-wasi-http), the wasi crates' fixes among them, and what in Cargo.toml
moves to it. Reads the crates.io sparse index; never fails the run."""
import json
import pathlib
import re
import sys
import urllib.request

CRATES = ["wasmtime", "wasmtime-wasi", "wasmtime-wasi-http"]
ROOT = pathlib.Path(__file__).resolve().parent.parent


def pinned():
    text = (ROOT / "Cargo.toml").read_text()
    found = re.search(r'^wasmtime-wasi-http = \{ version = "=(\d+)\.(\d+)\.(\d+)"', text, re.M)
    if not found:
        sys.exit('Cargo.toml: no `wasmtime-wasi-http = { version = "=…"` line in [workspace.dependencies]')
    return tuple(int(n) for n in found.groups())


def newest(crate, major):
    url = f"https://index.crates.io/{crate[:2]}/{crate[2:4]}/{crate}"
    with urllib.request.urlopen(url, timeout=20) as r:
        lines = r.read().decode().splitlines()
    versions = []
    for line in lines:
        entry = json.loads(line)
        parts = entry["vers"].split(".")
        if entry.get("yanked") or len(parts) != 3 or not all(p.isdigit() for p in parts):
            continue
        v = tuple(int(p) for p in parts)
        if v[0] == major:
            versions.append(v)
    return max(versions)


def main():
    pin = pinned()
    show = lambda v: ".".join(map(str, v))
    try:
        newest_of = {c: newest(c, pin[0]) for c in CRATES}
    except Exception as e:  # offline, or the index changed: say so and go on
        print(f"wasmtime set: cannot read the crates.io index ({e}); pinned {show(pin)}")
        return
    common = min(newest_of.values())
    each = ", ".join(f"{c} {show(v)}" for c, v in newest_of.items())
    if common > pin:
        print(f"wasmtime set: {show(common)} is out for all three crates ({each}): set the three "
              f"versions of [workspace.dependencies] in Cargo.toml to ={show(common)} and run "
              f"`cargo update -p wasmtime -p wasmtime-wasi -p wasmtime-wasi-http`")
    else:
        print(f"wasmtime set: the wasi crates are on {show(pin)}, the newest all three crates have ({each})")


main()
