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
