#!/usr/bin/env bash
# The load benchmark of a2a-edge next to the official Rust A2A SDK peer, in one go on this machine
# (report ratios, not absolutes: the machine is shared and noisy).
#
#   bench/run.sh [seconds]
#   BIN=/path/to/a2a-edge bench/run.sh …  another build (e.g. the one before a change); no build
#   PEER=http://127.0.0.1:9003 bench/run.sh … a peer already running (PEER=none: no peer)
#   TASKS=100000                          tasks stored before the ListTasks row
#   EDGE_TOML=$'[runtime]\nwarmInstances = 0' bench/run.sh …  more configuration for both servers
#
# Builds the `dist` profile and starts it twice on fresh data directories (echo preset): durable
# SQLite with fsync on, and with fsync off. Builds and starts the Rust SDK peer from
# ../shared/bench/peers/rust (in-memory store) unless PEER is given. Then, for each row, the same
# wrk load (1 thread, shared scripts in ../shared/bench/peers/load and ours in bench/load) runs
# against a2a-edge and against the peer: req/s, p50, p99, server CPU µs per request, and the
# ratio a2a-edge / peer; the ListTasks row runs after SendMessage load filled each store to TASKS
# tasks. Needs wrk (apt-get install wrk). Takes about 10 minutes after the builds.
source "$(dirname "$0")/common.sh"
secs="${1:-10}"
tasks="${TASKS:-100000}"
port="${PORT:-3097}"

on=$(edge fsync-on "$port" true)
off=$(edge fsync-off $((port + 1)) false)
pids+=("$on" "$off")
wait_card "http://127.0.0.1:$port/a2a/demo/agent-card.json" 30
wait_card "http://127.0.0.1:$((port + 1))/a2a/demo/agent-card.json" 30

peer="${PEER:-}"
peer_pid=""
if [ -z "$peer" ]; then
  peer="http://127.0.0.1:$((port + 2))"
  echo "building and starting the Rust SDK peer (first build: a few minutes)…" >&2
  CARGO_TARGET_DIR="${PEER_TARGET:-$root/target/bench-peer}" \
    bash "$root/../shared/bench/peers/rust/run.sh" $((port + 2)) >"$work/peer.log" 2>&1 &
  pids+=($!)
  if wait_card "$peer/.well-known/agent-card.json" 900; then
    peer_pid=$(pgrep -n -f "a2a-echo-peer $((port + 2))" || true)
  else
    echo "the Rust SDK peer did not start (see its build log below); measuring a2a-edge alone" >&2
    tail -5 "$work/peer.log" >&2
    peer=none
  fi
elif [ "$peer" != none ]; then
  peer_pid=$(pgrep -n -f "a2a-echo-peer" || true)
fi

# One row: the same load on a2a-edge and on the peer, each after a warm-up of WARMUP seconds.
row() { # name, edge pid, edge url, edge env, peer url, peer env, wrk args...
  local name="$1" p="$2" url="$3" vars="$4" peer_url="$5" peer_vars="$6" e q=(- - - -) ratio=""
  shift 6
  run "$p" "$vars" -d"${WARMUP:-3}s" "$@" "$url" >/dev/null
  read -ra e <<<"$(run "$p" "$vars" -d"${secs}s" "$@" "$url")"
  if [ "$peer" != none ]; then
    run "$peer_pid" "$peer_vars" -d"${WARMUP:-3}s" "$@" "$peer_url" >/dev/null
    read -ra q <<<"$(run "$peer_pid" "$peer_vars" -d"${secs}s" "$@" "$peer_url")"
    ratio=$(awk -v a="${e[0]}" -v b="${q[0]}" 'BEGIN { if (b > 0) printf "%.2f×", a / b }')
  fi
  printf '| %-36s | %7s | %8s | %8s | %5s | %7s | %8s | %8s | %5s | %6s |\n' \
    "$name" "${e[@]}" "${q[@]}" "$ratio"
}

edge_on="http://127.0.0.1:$port"
edge_off="http://127.0.0.1:$((port + 1))"
send=(-s "$shared/sendmessage.lua")
stream=(-s "$shared/streaming.lua")
rpc=(-s "$here/load/rpc.lua")
echo "| run ($secs s each, after ${WARMUP:-3} s of warm-up) | a2a-edge req/s | p50 | p99 | CPU µs/req | peer req/s | p50 | p99 | CPU µs/req | ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|"
row "card c=16" "$on" "$edge_on/a2a/demo/agent-card.json" "" "$peer/.well-known/agent-card.json" "" -c16
for c in 1 16; do
  for fsync in on off; do
    if [ $fsync = on ]; then p=$on u=$edge_on; else p=$off u=$edge_off; fi
    row "SendMessage c=$c (fsync $fsync)" "$p" "$u" PATH_RPC=/a2a/demo "$peer" PATH_RPC=/ -c"$c" "${send[@]}"
  done
done
row "SendStreamingMessage c=16" "$on" "$edge_on" PATH_RPC=/a2a/demo "$peer" PATH_RPC=/ -c16 "${stream[@]}"
peer_task=none
[ "$peer" != none ] && peer_task=$(task_of "$peer" /)
row "GetTask c=16" "$on" "$edge_on" "PATH_RPC=/a2a/demo $(get_body "$(task_of "$edge_on" /a2a/demo)")" \
  "$peer" "PATH_RPC=/ $(get_body "$peer_task")" -c16 "${rpc[@]}"
total() { # base url, rpc path: the listing's totalSize, or -1 when there is none
  curl -s "$1$2" -H 'content-type: application/json' -H 'A2A-Version: 1.0' \
    -d '{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1}}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["totalSize"])' 2>/dev/null || echo -1
}
fill() { # base url, rpc path: SendMessage load until the store holds $tasks tasks
  local n
  while n=$(total "$1" "$2") && [ "$n" -ge 0 ] && [ "$n" -lt "$tasks" ]; do
    PATH_RPC=$2 wrk -t1 -c16 -d5s -s "$shared/sendmessage.lua" "$1" >/dev/null
  done
  echo "  $1$2 holds $n tasks" >&2
}
echo "(filling the stores to $tasks tasks…)" >&2
fill "$edge_off" /a2a/demo
[ "$peer" != none ] && fill "$peer" /
list='BODY={"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":50}}'
row "ListTasks pageSize 50 c=16 ($tasks tasks)" "$off" "$edge_off" "PATH_RPC=/a2a/demo $list" \
  "$peer" "PATH_RPC=/ $list" -c16 "${rpc[@]}"
echo
curl -s "$edge_on/a2a/api/components" | python3 -c 'import json,sys; c=json.load(sys.stdin); print("a2a-edge per-request store + instantiation (bucket upper bounds): p50 <= %s us, p99 <= %s us over %s requests" % (c["instantiateP50Us"], c["instantiateP99Us"], c["instantiations"]))'
rss() { if [ -n "$1" ]; then awk '/VmHWM/ {print $2, $3}' "/proc/$1/status"; else echo -; fi; }
echo "peak RSS: a2a-edge fsync on $(rss "$on"), fsync off (holding the $tasks tasks) $(rss "$off"), peer $(rss "$peer_pid")"
