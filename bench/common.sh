# The start every benchmark script shares (sourced): strict mode, where things are, a work
# directory and the servers to stop on exit, and the binary to measure (BIN, else the `dist`
# build).
set -euo pipefail -f
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
shared="${LOAD_DIR:-$root/../shared/bench/peers/load}"
work="$(mktemp -d)"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
bin="${BIN:-}"
if [ -z "$bin" ]; then
  cargo build --profile dist -q -p a2a-edge --manifest-path "$root/Cargo.toml"
  bin="$root/target/dist/a2a-edge"
fi

# The helpers the load scripts share.
wait_card() { # url, seconds
  for _ in $(seq $(($2 * 10))); do curl -sf "$1" >/dev/null && return 0; sleep 0.1; done
  return 1
}

edge() { # name, port, fsync[, binary]: starts a server, prints its pid
  mkdir -p "$work/$1"
  printf '[storage]\nfsync = %s\n%s\n' "$3" "${EDGE_TOML:-}" >"$work/$1/config.toml"
  RUST_LOG="${RUST_LOG:-info}" "${4:-$bin}" serve --listen "127.0.0.1:$2" --data-dir "$work/$1" \
    --config "$work/$1/config.toml" >"$work/$1/log" 2>&1 &
  echo $!
}
cpu_ticks() { [ -n "$1" ] && awk '{print $14 + $15}' "/proc/$1/stat" || echo 0; }
hz=$(getconf CLK_TCK)

# One measurement: wrk's figures and the server's CPU per request, as "req/s p50 p99 cpu".
run() { # pid, env assignments (one word, space-separated), wrk args...
  local p="$1" vars="$2" before out reqs cpu=""
  shift 2
  before=$(cpu_ticks "$p")
  # shellcheck disable=SC2086
  out="$(env $vars wrk -t1 --latency "$@")"
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  if grep -q "non_200=[1-9]\|jsonrpc_errors=[1-9]" <<<"$out"; then
    echo "errors in a run: $(grep '^a2a:' <<<"$out" | head -1)" >&2
  fi
  [ -n "$p" ] && [ "${reqs:-0}" -gt 0 ] && cpu=$((($(cpu_ticks "$p") - before) * 1000000 / hz / reqs))
  printf '%s %s %s %s\n' "$(awk '/Requests\/sec/ {printf "%d", $2}' <<<"$out")" \
    "$(awk '$1=="50%" {print $2}' <<<"$out")" "$(awk '$1=="99%" {print $2}' <<<"$out")" "${cpu:--}"
}

task_of() { # base url, rpc path: the id of a fresh task
  curl -s "$1$2" -H 'content-type: application/json' -H 'A2A-Version: 1.0' -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench-get-'$RANDOM$RANDOM'","role":"ROLE_USER","parts":[{"text":"hello"}]}}}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["task"]["id"])'
}
get_body() { printf 'BODY={"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"%s"}}' "$1"; }

