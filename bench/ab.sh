#!/usr/bin/env bash
# A/B of two builds of a2a-edge on this machine, alternated (A B B A) so a drift of the machine's
# load shows as a spread between the two goes of one build instead of a difference between them.
#
#   bench/ab.sh BEFORE_BIN AFTER_BIN [seconds, default 6]
#
# Each go starts the build on fresh data directories (echo preset, fsync on and off, the default
# `info` log), then wrk (1 thread) runs each row after 3 s of warm-up: req/s, p50, p99 and the
# server's CPU µs per request. Needs wrk.
BIN="$1"
source "$(dirname "$0")/common.sh"
before="$1" after="$2" secs="${3:-6}"
port="${PORT:-3197}"
send=(-s "$shared/sendmessage.lua")
rpc=(-s "$here/load/rpc.lua")

go() { # label, binary
  local on off u
  on=$(edge "$1-on" "$port" true "$2")
  off=$(edge "$1-off" $((port + 1)) false "$2")
  pids+=("$on" "$off")
  wait_card "http://127.0.0.1:$port/a2a/demo/agent-card.json" 30
  wait_card "http://127.0.0.1:$((port + 1))/a2a/demo/agent-card.json" 30
  label="$1"
  for c in 1 16; do
    for fsync in on off; do
      if [ $fsync = on ]; then p=$on u="http://127.0.0.1:$port"; else p=$off u="http://127.0.0.1:$((port + 1))"; fi
      row_of "SendMessage c=$c fsync $fsync" "$p" "$u" PATH_RPC=/a2a/demo -c"$c" "${send[@]}"
    done
  done
  u="http://127.0.0.1:$port"
  row_of "GetTask c=16" "$on" "$u" "PATH_RPC=/a2a/demo $(get_body "$(task_of "$u" /a2a/demo)")" -c16 "${rpc[@]}"
  row_of "card c=16" "$on" "$u/a2a/demo/agent-card.json" "" -c16
  kill "$on" "$off"
  while kill -0 "$on" 2>/dev/null || kill -0 "$off" 2>/dev/null; do sleep 0.1; done
}

row_of() { # row, pid, url, env, wrk args...
  local name="$1" p="$2" url="$3" vars="$4" r
  shift 4
  run "$p" "$vars" -d3s "$@" "$url" >/dev/null
  read -ra r <<<"$(run "$p" "$vars" -d"${secs}s" "$@" "$url")"
  printf '| %s | %s | %s | %s | %s | %s |\n' "$label" "$name" "${r[@]}"
}

echo "| go | row | req/s | p50 | p99 | CPU µs/req |"
echo "|---|---|---|---|---|---|"
go before "$before"
go after "$after"
go after "$after"
go before "$before"
