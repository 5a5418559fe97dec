#!/usr/bin/env bash
# Agent components against the host `echo` backend, in one go on this machine (report ratios).
#
#   bench/agents.sh [seconds]
#   BIN=/path/to/a2a-edge bench/agents.sh …   another build; no build
#
# Builds the `dist` profile and starts one a2a-edge (fsync off, so the turn is what is measured)
# with four instances: `host` on the echo backend, `agent` on the built-in Rust `echo-agent`
# component, and `py` / `js` on the Python and JavaScript examples (components/agents/notes-*,
# built by the agents tests into target/agent-builds/: run `cargo test --release -p a2a-edge-tests --test all -- agents::`
# first, else those rows are skipped). Rows:
# - SendMessage c=16 on host and on agent, twice, the second go in reverse order: req/s, p50,
#   p99, CPU µs per request, and agent / host;
# - turn start-up: SendMessage c=1 p50 on each instance, and its difference from host's;
# - memory per turn: the agents' memory high-water mark (mean and max) from the metrics, per
#   language (one instance each, measured alone).
# Needs wrk (apt-get install wrk).
set -euo pipefail -f
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
shared="${LOAD_DIR:-$root/../shared/bench/peers/load}"
secs="${1:-10}"
port="${PORT:-3197}"
work="$(mktemp -d)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

bin="${BIN:-}"
if [ -z "$bin" ]; then
  cargo build --profile dist -q -p a2a-edge --manifest-path "$root/Cargo.toml"
  bin="$root/target/dist/a2a-edge"
fi
newest() { # the latest build of example $1, or nothing
  local f
  f=$(ls -t "$root/target/agent-builds" 2>/dev/null | grep -m1 "^$1-.*\.wasm$" || true)
  [ -n "$f" ] && echo "$root/target/agent-builds/$f" || true
}
mkdir -p "$work/data/components"
langs=(agent)
for l in py js; do
  wasm="$(newest "notes-$l")"
  if [ -n "$wasm" ]; then cp "$wasm" "$work/data/components/notes-$l.wasm"; langs+=("$l"); else
    echo "no built notes-$l (run the agents tests first): its rows are skipped" >&2; fi
done
{
  printf '[storage]\nfsync = false\n\n'
  printf '[[presets]]\nid = "agent"\nbackend = "component"\ncomponent = "echo-agent"\nlimits = { concurrentTurns = 64 }\n\n'
  for l in py js; do
    printf '[[presets]]\nid = "%s"\nbackend = "component"\ncomponent = "notes-%s"\ngrants = { keyValue = true }\nlimits = { concurrentTurns = 64 }\n\n' "$l" "$l"
  done
  for i in host agent py js; do
    preset=$i; [ $i = host ] && preset=echo
    printf '[[instances]]\nid = "%s"\nname = "%s"\ndescription = "bench"\npreset = "%s"\n\n' "$i" "$i" "$preset"
  done
} >"$work/config.toml"
RUST_LOG=warn "$bin" serve --listen "127.0.0.1:$port" --data-dir "$work/data" --config "$work/config.toml" >"$work/log" 2>&1 &
pid=$!
base="http://127.0.0.1:$port"
for _ in $(seq 300); do curl -sf "$base/a2a/host/agent-card.json" >/dev/null && break; sleep 0.1; done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
run() { # instance, connections, seconds: "req/s p50 p99 cpu"
  local before out reqs
  before=$(cpu_ticks)
  out="$(PATH_RPC="/a2a/$1" wrk -t1 -c"$2" -d"$3s" --latency -s "$shared/sendmessage.lua" "$base")"
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  grep -q "non_200=[1-9]\|jsonrpc_errors=[1-9]" <<<"$out" && echo "errors on $1: $(grep '^a2a:' <<<"$out" | head -1)" >&2
  printf '%s %s %s %s\n' "$(awk '/Requests\/sec/ {printf "%d", $2}' <<<"$out")" \
    "$(awk '$1=="50%" {print $2}' <<<"$out")" "$(awk '$1=="99%" {print $2}' <<<"$out")" \
    "$((($(cpu_ticks) - before) * 1000000 / hz / reqs))"
}
# Every agent compiled (at start, in the background) before any measurement.
for _ in $(seq 1200); do
  curl -s "$base/a2a/api/components" | python3 -c '
import json, sys
c = json.load(sys.stdin)["components"]
sys.exit(0 if all("sha256" in x or "error" in x for x in c if x["kind"] == "agent") else 1)' && break
  sleep 0.5
done
for i in host "${langs[@]}"; do run "$i" 4 3 >/dev/null; done # warm-up: pre-instantiated, caches hot

echo "| SendMessage c=16 ($secs s) | host req/s | p50 | p99 | CPU µs | agent req/s | p50 | p99 | CPU µs | agent / host |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for go in 1 2; do
  if [ $go = 1 ]; then read -ra h <<<"$(run host 16 "$secs")"; read -ra a <<<"$(run agent 16 "$secs")"
  else read -ra a <<<"$(run agent 16 "$secs")"; read -ra h <<<"$(run host 16 "$secs")"; fi
  ratio=$(awk -v a="${a[0]}" -v b="${h[0]}" 'BEGIN { printf "%.2f×", a / b }')
  printf '| go %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$go" "${h[@]}" "${a[@]}" "$ratio"
done
echo
echo "| turn start-up (SendMessage c=1, $secs s) | p50 | p50 − host's | CPU µs/req | memory high-water per turn |"
echo "|---|---|---|---|---|"
turns() { # "turns sum-of-high-water-bytes" of every agent turn so far
  curl -s "$base/a2a/api/metrics" | python3 -c '
import json, sys
a = json.load(sys.stdin)["agents"]
n = sum(a["turns"].values())
print(n, a["memoryPeakBytes"]["mean"] * n)'
}
ms() { awk -v x="$1" 'BEGIN { if (x ~ /us$/) print x/1000; else if (x ~ /ms$/) print x+0; else print x*1000 }'; }
read -ra h <<<"$(run host 1 "$secs")"
echo "| host echo | ${h[1]} | — | ${h[3]} | — |"
for l in "${langs[@]}"; do
  read -r n0 b0 <<<"$(turns)"
  read -ra x <<<"$(run "$l" 1 "$secs")"
  read -r n1 b1 <<<"$(turns)"
  mem=$(awk -v n="$((n1 - n0))" -v b="$(awk -v x="$b1" -v y="$b0" 'BEGIN { print x - y }')" 'BEGIN { printf "%.1f MiB", b / n / 1048576 }')
  echo "| $l | ${x[1]} | $(awk -v a="$(ms "${x[1]}")" -v b="$(ms "${h[1]}")" 'BEGIN { printf "%.3f ms", a - b }') | ${x[3]} | $mem |"
done
echo
curl -s "$base/a2a/api/metrics" | python3 -c '
import json, sys
a = json.load(sys.stdin)["agents"]
print("agent turns: %s; memory high-water per turn (all agents): mean %.1f MiB, max %.1f MiB" % (
    a["turns"], a["memoryPeakBytes"]["mean"] / 2**20, a["memoryPeakBytes"]["max"] / 2**20))'
echo "peak RSS of a2a-edge: $(awk '/VmHWM/ {print $2, $3}' "/proc/$pid/status")"
