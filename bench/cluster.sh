#!/usr/bin/env bash
# a2a-edge on PostgreSQL next to a2a-edge on SQLite, in one go on this machine: SendMessage and
# SendStreamingMessage at 1, 2 and 3 nodes on one database (all on this machine, so read the
# ratio to SQLite and the database statements per request, not absolute scaling), and the
# latency from a frame published on node A to the same frame at a subscriber on node B.
#
#   bench/cluster.sh [seconds]
#   BIN=/path/to/a2a-edge bench/cluster.sh …   another build; no build
#
# Starts a throwaway PostgreSQL (.ci/postgres.sh, installed when missing) and stops it at the end.
# Each PostgreSQL row runs on a fresh database; with several nodes the same wrk load is split
# over them (one wrk per node, connections divided) and their req/s are added (p50/p99 are the
# first node's). Needs wrk.
set -euo pipefail -f
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
shared="${LOAD_DIR:-$root/../shared/bench/peers/load}"
secs="${1:-10}"
port="${PORT:-3197}"
conns=16
work="$(mktemp -d)"
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done
  pids=()
}
trap 'stop_all; "$root/.ci/postgres.sh" stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

bin="${BIN:-}"
if [ -z "$bin" ]; then
  cargo build --profile dist -q -p a2a-edge --manifest-path "$root/Cargo.toml"
  bin="$root/target/dist/a2a-edge"
fi
admin="$("$root/.ci/postgres.sh" start)"
cluster_key="$work/cluster.key"
head -c 32 /dev/urandom | base64 >"$cluster_key"

wait_card() { # url, node name
  for _ in $(seq 300); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done
  echo "no answer from $1; its log:" >&2
  tail -5 "$work/$2/log" >&2
  return 1
}

# A node: name, port, storage TOML; the ticker preset prints a timestamp (ns) every 50 ms.
node() {
  mkdir -p "$work/$1"
  cat >"$work/$1/config.toml" <<EOF
$3
[cluster]
secretKeyFile = "$cluster_key"
[[presets]]
id = "ticker"
backend = "command"
command = ["sh", "-c", "for i in \$(seq 1 40); do date +%s%N; sleep 0.05; done"]
[[instances]]
id = "demo"
name = "demo"
[[instances]]
id = "ticker"
name = "ticker"
preset = "ticker"
EOF
  RUST_LOG=warn "$bin" serve --listen "127.0.0.1:$2" --data-dir "$work/$1" \
    --config "$work/$1/config.toml" >"$work/$1/log" 2>&1 &
  pids+=($!)
  wait_card "http://127.0.0.1:$2/a2a/demo/agent-card.json" "$1"
}

statements() { # base url
  curl -s "$1/a2a/api/metrics" | python3 -c 'import json,sys; print(json.load(sys.stdin)["store"]["statements"])'
}

# wrk over every base at once, the connections divided; prints "req/s p50 p99 statements/req".
load() { # script, bases...
  local script="$1" n before=0 after=0 reqs=0 rps=0 p50="" p99="" out
  shift
  n=$#
  for b in "$@"; do before=$((before + $(statements "$b"))); done
  local runs=()
  for b in "$@"; do
    PATH_RPC=/a2a/demo wrk -t1 -c$((conns / n)) -d"${secs}s" --latency -s "$script" "$b" >"$work/wrk.${b##*:}.out" 2>&1 &
    runs+=($!)
  done
  wait "${runs[@]}"
  for b in "$@"; do
    out="$work/wrk.${b##*:}.out"
    rps=$(awk -v r="$rps" '/Requests\/sec/ {printf "%d", r + $2}' "$out")
    reqs=$((reqs + $(awk '/requests in/ {print $1}' "$out")))
    [ -z "$p50" ] && p50=$(awk '$1=="50%" {print $2}' "$out") && p99=$(awk '$1=="99%" {print $2}' "$out")
    grep -q "non_200=[1-9]\|jsonrpc_errors=[1-9]" "$out" && echo "errors at $b: $(grep '^a2a:' "$out" | head -1)" >&2
  done
  for b in "$@"; do after=$((after + $(statements "$b"))); done
  printf '%s %s %s %s\n' "$rps" "$p50" "$p99" "$(awk -v s=$((after - before)) -v r="$reqs" 'BEGIN { printf "%.1f", s / r }')"
}

# A fresh database on the throwaway cluster; prints its URL.
fresh_db() {
  local name="bench_$RANDOM$RANDOM"
  psql -q "$admin" -c "CREATE DATABASE $name" >/dev/null
  echo "${admin%/*}/$name"
}
command -v psql >/dev/null || PATH="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1):$PATH"

send="$shared/sendmessage.lua"
stream="$shared/streaming.lua"
declare -A base_rps
row() { # label, key, storage TOML, nodes
  local label="$1" key="$2" storage="$3" n="$4" bases=() i s m
  for i in $(seq 0 $((n - 1))); do
    node "$key-$i" $((port + i)) "$storage"
    bases+=("http://127.0.0.1:$((port + i))")
  done
  for load_name in SendMessage SendStreamingMessage; do
    [ $load_name = SendMessage ] && s="$send" || s="$stream"
    load "$s" "${bases[@]}" >/dev/null # warm-up
    read -ra m <<<"$(load "$s" "${bases[@]}")"
    [ "$key" = sqlite ] && base_rps[$load_name]="${m[0]}"
    printf '| %-34s | %-20s | %7s | %8s | %8s | %6s | %5s |\n' "$label" "$load_name c=$conns" "${m[0]}" "${m[1]}" "${m[2]}" \
      "$(awk -v a="${m[0]}" -v b="${base_rps[$load_name]}" 'BEGIN { printf "%.2f×", a / b }')" "${m[3]}"
  done
  stop_all
}

echo "| store | load ($secs s) | req/s | p50 | p99 | vs SQLite | statements/req |"
echo "|---|---|---|---|---|---|---|"
row "SQLite, 1 node (fsync on)" sqlite $'[storage]\nfsync = true' 1
for n in 1 2 3; do
  url="$(fresh_db)"
  row "PostgreSQL, $n node(s)" "pg$n" "$(printf '[storage]\nbackend = "postgres"\nurl = "%s"' "$url")" "$n"
done

# Subscriber latency: the ticker task runs on A; subscribers on A and on B stamp each frame's
# arrival against the time the command printed into it.
url="$(fresh_db)"
storage="$(printf '[storage]\nbackend = "postgres"\nurl = "%s"' "$url")"
node lat-a "$port" "$storage"
node lat-b $((port + 1)) "$storage"
python3 "$here/subscriber_latency.py" "http://127.0.0.1:$port" "http://127.0.0.1:$((port + 1))"
