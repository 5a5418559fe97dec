#!/usr/bin/env bash
# Load benchmark of a2a-edge next to a peer, in one go on this machine (figures are ratios, not
# absolutes: the machine is shared and noisy).
#
#   bench/run.sh [seconds] [peer-url]
#   BIN=/path/to/a2a-edge bench/run.sh …   (another build, e.g. the one before a change; no build)
#
# Starts the release binary on a fresh data dir (echo preset, durable SQLite with fsync), then
# runs wrk (1 thread) for the agent card and SendMessage at 1 and 16 connections, using the shared
# load scripts in ../shared/bench/peers/load. With peer-url (e.g. the official Rust SDK peer from
# ../shared/bench/peers/rust/run.sh on :9003), the same SendMessage loads run against it.
# env FSYNC=false measures with fsync off. Needs wrk (apt-get install wrk).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
load="${LOAD_DIR:-$root/../shared/bench/peers/load}"
secs="${1:-10}"
peer="${2:-}"
port="${PORT:-3097}"
data="$(mktemp -d)"
pid=""
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$data"' EXIT

bin="${BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release -q -p a2a-edge --manifest-path "$root/Cargo.toml"
  bin="$root/target/release/a2a-edge"
fi
printf '[storage]\nfsync = %s\n' "${FSYNC:-true}" > "$data/config.toml"
"$bin" serve --listen "127.0.0.1:$port" --data-dir "$data" --config "$data/config.toml" >"$data/log" 2>&1 &
pid=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/a2a/demo/agent-card.json" >/dev/null && break; sleep 0.1; done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

row() { # name, pid (or empty), wrk output, cpu ticks used
  local rps p50 p99 reqs cpu=""
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$3")
  p50=$(awk '$1=="50%" {print $2}' <<<"$3")
  p99=$(awk '$1=="99%" {print $2}' <<<"$3")
  reqs=$(awk '/requests in/ {print $1}' <<<"$3")
  [ -n "$4" ] && [ "${reqs:-0}" -gt 0 ] && cpu=$(( $4 * 1000000 / hz / reqs ))
  printf '| %-36s | %10s | %8s | %8s | %6s |\n' "$1" "$rps" "$p50" "$p99" "$cpu"
}

measure() { # name, pid, command...
  local name="$1" p="$2" before out
  shift 2
  before=$(cpu_ticks "$p")
  out="$("$@")"
  row "$name" "$p" "$out" "$(( $(cpu_ticks "$p") - before ))"
}

echo "| run | req/s | p50 | p99 | server CPU µs/req |"
echo "|---|---|---|---|---|"
measure "a2a-edge card c=16" "$pid" wrk -t1 -c16 -d"${secs}s" --latency "http://127.0.0.1:$port/a2a/demo/agent-card.json"
for c in 1 16; do
  WARMUP=3 PATH_RPC=/a2a/demo "$load/bench.sh" "http://127.0.0.1:$port" 1 "$c" >/dev/null
  measure "a2a-edge SendMessage c=$c" "$pid" env PATH_RPC=/a2a/demo WARMUP=0 "$load/bench.sh" "http://127.0.0.1:$port" "$secs" "$c"
  if [ -n "$peer" ]; then
    out="$(PATH_RPC=/ WARMUP=3 "$load/bench.sh" "$peer" "$secs" "$c")"
    row "peer SendMessage c=$c" "" "$out" ""
  fi
done
echo
curl -s "http://127.0.0.1:$port/a2a/api/components" | python3 -c 'import json,sys; c=json.load(sys.stdin); print("per-request store + instantiation (bucket upper bounds): p50 <= %s us, p99 <= %s us over %s requests" % (c["instantiateP50Us"], c["instantiateP99Us"], c["instantiations"]))'
echo "server peak RSS: $(awk '/VmHWM/ {print $2, $3}' /proc/$pid/status)"
