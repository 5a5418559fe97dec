#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 600) each, from the seeds (inputs of the tests)
# into corpus/ (not committed). Needs the nightly toolchain and `cargo install cargo-fuzz`.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-600}"
for target in ${TARGETS:-actions}; do
  mkdir -p "corpus/$target"
  cargo +nightly fuzz run --fuzz-dir . --sanitizer none "$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 2>&1 | tail -n 3 | sed "s/^/$target: /"
done
