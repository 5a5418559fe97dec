#!/usr/bin/env bash
# What exporting traces costs: SendMessage c=16 on a2a-edge with the OTLP exporter off and on (to a
# loopback receiver), in one go on this machine (report the ratio; the machine is noisy).
#
#   bench/traces.sh [seconds]
#   BIN=/path/to/a2a-edge bench/traces.sh …   another build; no build
#
# Builds the `dist` profile and starts it twice (echo preset, fsync off so the request path is
# what is measured): `off` with no exporter (its spans still fill the task pages' ring) and `on`
# exporting over OTLP/HTTP to a receiver in Python that answers every export with 200. Two goes,
# the second in reverse order: req/s, p50, p99, server CPU µs per request, and on / off; then
# what the receiver got. Needs wrk (apt-get install wrk).
source "$(dirname "$0")/common.sh"
secs="${1:-10}"
port="${PORT:-3297}"

# The receiver: counts exports and bytes, answers 200 with an empty ExportTraceServiceResponse.
python3 - "$((port + 2))" "$work/received" <<'PY' &
import http.server, sys, threading
count = [0, 0]
lock = threading.Lock()
class Receiver(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        self.rfile.read(n)
        with lock:
            count[0] += 1
            count[1] += n
            open(sys.argv[2], "w").write("%d exports, %d bytes\n" % tuple(count))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Receiver).serve_forever()
PY
pids+=($!)

edge() { # name, port, telemetry table: starts a server, prints its pid
  mkdir -p "$work/$1"
  printf '[storage]\nfsync = false\n\n%s\n' "$3" >"$work/$1/config.toml"
  RUST_LOG=warn "$bin" serve --listen "127.0.0.1:$2" --data-dir "$work/$1" \
    --config "$work/$1/config.toml" >"$work/$1/log" 2>&1 &
  echo $!
}
off=$(edge off "$port" "")
on=$(edge on $((port + 1)) "$(printf '[telemetry]\notlpEndpoint = "http://127.0.0.1:%s/v1/traces"' $((port + 2)))")
pids+=("$off" "$on")
for p in "$port" $((port + 1)); do
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$p/a2a/demo/agent-card.json" >/dev/null && break; sleep 0.1; done
done

hz=$(getconf CLK_TCK)
run() { # pid, port, seconds: "req/s p50 p99 cpu"
  local before out reqs
  before=$(awk '{print $14 + $15}' "/proc/$1/stat")
  out="$(PATH_RPC=/a2a/demo wrk -t1 -c16 -d"$3s" --latency -s "$shared/sendmessage.lua" "http://127.0.0.1:$2")"
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  grep -q "non_200=[1-9]\|jsonrpc_errors=[1-9]" <<<"$out" && echo "errors on $2: $(grep '^a2a:' <<<"$out" | head -1)" >&2
  printf '%s %s %s %s\n' "$(awk '/Requests\/sec/ {printf "%d", $2}' <<<"$out")" \
    "$(awk '$1=="50%" {print $2}' <<<"$out")" "$(awk '$1=="99%" {print $2}' <<<"$out")" \
    "$((($(awk '{print $14 + $15}' "/proc/$1/stat") - before) * 1000000 / hz / reqs))"
}
run "$off" "$port" 3 >/dev/null
run "$on" $((port + 1)) 3 >/dev/null

echo "| SendMessage c=16 ($secs s) | exporter off req/s | p50 | p99 | CPU µs | exporter on req/s | p50 | p99 | CPU µs | on / off |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for go in 1 2; do
  if [ $go = 1 ]; then read -ra a <<<"$(run "$off" "$port" "$secs")"; read -ra b <<<"$(run "$on" $((port + 1)) "$secs")"
  else read -ra b <<<"$(run "$on" $((port + 1)) "$secs")"; read -ra a <<<"$(run "$off" "$port" "$secs")"; fi
  ratio=$(awk -v x="${b[0]}" -v y="${a[0]}" 'BEGIN { printf "%.2f×", x / y }')
  printf '| go %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$go" "${a[@]}" "${b[@]}" "$ratio"
done
sleep 1
echo
echo "the receiver got: $(cat "$work/received" 2>/dev/null || echo nothing)"
