#!/usr/bin/env python3
"""One build for both README commands: builds the binary as `cargo run --release -p a2a-edge`
does, then the workspace's tests as `cargo test --release --workspace` does (`--no-run`), and
fails if the second compiles any dependency the first built with other features. Names each
such crate with the features the tests add, to turn on in runtime/workspace-hack/Cargo.toml.
Works on a cold or a warm target/: it compares the artifacts' hashes, not what was fresh."""

import json
import subprocess
import sys
import time


def artifacts(args):
    """(package name, version, target kind) → (features, files) of every dependency built;
    prints how long the build took."""
    started = time.monotonic()
    run = subprocess.run(
        ["cargo", *args, "--release", "--message-format", "json-render-diagnostics"],
        stdout=subprocess.PIPE,
        text=True,
    )
    if run.returncode != 0:
        sys.exit(f"cargo {' '.join(args)} --release failed: its errors are above")
    out = run.stdout
    built = {}
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        m = json.loads(line)
        if m.get("reason") != "compiler-artifact":
            continue
        if m["package_id"].startswith("path+"):
            continue  # the workspace's own crates are what the test build compiles
        name, version = m["target"]["name"], m["package_id"].rsplit("@", 1)[-1]
        key = (name, version, ",".join(m["target"]["kind"]))
        features, files = built.setdefault(key, (set(), set()))
        features.update(m["features"])
        files.update(f for f in m["filenames"] if not f.endswith(".d"))
    took = time.monotonic() - started
    print(f"cargo {' '.join(args)} --release: {took // 60:.0f} min {took % 60:.0f} s", flush=True)
    return built


def main():
    binary = artifacts(["build", "-p", "a2a-edge"])
    tests = artifacts(["test", "--workspace", "--no-run"])
    again = []
    for key, (features, files) in sorted(tests.items()):
        if key in binary and not files <= binary[key][1]:
            extra = sorted(features - binary[key][0])
            again.append(f"  {key[0]} {key[1]} ({key[2]}): the tests add {extra or 'no feature (a dependency of it does)'}")
    if again:
        print("the test build compiles these dependencies again, with other features than the binary's:")
        print("\n".join(again))
        print("turn those features on in runtime/workspace-hack/Cargo.toml (host crates: its build-dependencies)")
        return 1
    print(f"one build: the tests compile none of the binary's {len(binary)} dependencies again")
    return 0


if __name__ == "__main__":
    sys.exit(main())
