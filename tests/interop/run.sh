#!/usr/bin/env bash
# Interop with third-party A2A clients from the registries: the Python a2a-sdk 1.3 client over
# JSON-RPC, HTTP+JSON and gRPC (also with its auth interceptor and over mutual TLS), the Python
# a2a-sdk 0.3 client (A2A 0.3, in its own venv), Google ADK's RemoteA2aAgent (in its own venv),
# the JS @a2a-js/sdk 1.3 client and the Rust a2a-cli, each against a running a2a-edge whose
# `tck` instance runs the scripted preset. Installs what it needs (venvs and node_modules under
# target/interop, a2a-cli under target/interop/bin), starts the release binary on a free port,
# and exits non-zero if any client fails. Needs python3 3.11 or newer (Google ADK's minimum),
# node/npm and curl. `run.sh install` only installs the clients (`.ci/run` does it while the
# tests run) and starts nothing.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$root/target/interop"
mkdir -p "$work"
cd "$root"

# Before anything is built or started: the ADK client installs only on Python 3.11 or newer.
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "tests/interop/run.sh needs python3 3.11 or newer (Google ADK requires it); python3 here is $(python3 --version 2>&1 || echo missing)" >&2
  exit 1
fi

# Each client, installed under $work once (a venv made again when its requirements change).
venv_for() {
  local suite="$root/tests/interop/$1" venv="$work/$2"
  if [ ! -x "$venv/bin/pytest" ] || ! cmp -s "$suite/requirements.txt" "$venv/requirements.txt"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q -r "$suite/requirements.txt"
    cp "$suite/requirements.txt" "$venv/requirements.txt"
  fi
}
install_clients() {
  venv_for python venv
  venv_for python03 venv03
  venv_for adk venv-adk
  mkdir -p "$work/js"
  cp "$root/tests/interop/js/package.json" "$root/tests/interop/js/package-lock.json" "$root/tests/interop/js/"*.test.mjs "$work/js/"
  (cd "$work/js" && { [ -d node_modules/@a2a-js/sdk ] || npm ci --no-audit --no-fund --silent; })
  # Unoptimised and without debug info: a client's speed does not matter here, and its build
  # takes 2.4 CPU-minutes instead of 6.3.
  [ -x "$work/bin/a2acli" ] || CARGO_PROFILE_DEV_DEBUG=0 cargo install -q a2a-cli --version 0.4.5 --locked --debug --root "$work"
}
install_clients
[ "${1:-}" = install ] && exit 0

# A2A_EDGE_BIN names a binary built already (CI passes the one its test run built, so this
# script does not build it again with another feature set); otherwise the release build.
bin="${A2A_EDGE_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release -q -p a2a-edge
  bin="$root/target/release/a2a-edge"
fi
# The mutual-TLS test starts a TLS server of its own with this binary.
export A2A_EDGE_BIN="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
data="$(mktemp -d)"
pid=""
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$data"' EXIT
port="${INTEROP_PORT:-3391}"
export A2A_INTEROP_TOKEN="interop-token-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
"$bin" serve --listen "127.0.0.1:$port" --data-dir "$data" --config "$root/tests/interop/interop.toml" >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/a2a/tck/agent-card.json" >/dev/null && break; sleep 0.1; done
export A2A_EDGE_AGENT="http://127.0.0.1:$port/a2a/tck"
export A2A_EDGE_KEYED_AGENT="http://127.0.0.1:$port/a2a/keyed"
export A2A_EDGE_OIDC_AGENT="http://127.0.0.1:$port/a2a/oidc"
export A2A_EDGE_API="http://127.0.0.1:$port/a2a/api"
A2A_EDGE_KEY="$(curl -sf "http://127.0.0.1:$port/a2a/api" -H 'content-type: application/json' \
  -d '{"action":"inbound.keys.create","id":"keyed","name":"interop"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')"
export A2A_EDGE_KEY

# Runs the pytest suite in tests/interop/$1 in its venv $work/$2, its output in $work/$3.
pytest_suite() {
  "$work/$2/bin/pytest" -q -p no:cacheprovider -o asyncio_default_fixture_loop_scope=function "$root/tests/interop/$1" | tee "$work/$3"
}

echo "== Python a2a-sdk client"
pytest_suite python venv python.out

echo "== Python a2a-sdk 0.3 client (A2A 0.3 against the same agent)"
pytest_suite python03 venv03 python03.out

echo "== Google ADK RemoteA2aAgent (two turns of one ADK session, on the a2a-sdk 1.3 client)"
pytest_suite adk venv-adk adk.out

echo "== JS @a2a-js/sdk client"
(cd "$work/js" && node --test && A2A_EDGE_BINDING=HTTP+JSON node --test) | tee "$work/js.out"

echo "== Rust a2a-cli"
"$root/tests/interop/a2a_cli.sh" "$work/bin/a2acli" "$A2A_EDGE_AGENT" | tee "$work/cli.out"

# Every step above stops the script on a failure; this line sums what actually ran.
py=$(grep -oE '[0-9]+ passed' "$work/python.out" | grep -oE '[0-9]+' | tail -1)
py03=$(grep -oE '[0-9]+ passed' "$work/python03.out" | grep -oE '[0-9]+' | tail -1)
adk=$(grep -oE '[0-9]+ passed' "$work/adk.out" | grep -oE '[0-9]+' | tail -1)
js=$(awk '/^# pass / {n += $3} END {print n}' "$work/js.out")
cli=$(grep -c ': ok' "$work/cli.out")
echo "interop: $((py + py03 + adk + js + cli)) passed, 0 failed"
