#!/usr/bin/env bash
# Interop: the official Rust a2a-cli sends one blocking and one streamed message and the answers
# must parse as A2A 1.0 and carry the expected results.
#   a2a_cli.sh <a2acli binary> <instance endpoint URL>
set -euo pipefail
cli="$1"
card="$2/agent-card.json"

"$cli" -a "$card" -o json send "tck-complete-task from a2a-cli" | python3 -c '
import json, sys
doc = json.load(sys.stdin)
task = doc.get("task", doc)
assert task["status"]["state"] == "TASK_STATE_COMPLETED", doc
assert task["artifacts"][0]["parts"][0]["text"] == "Hello from TCK", doc
print("a2a-cli send: ok")'

"$cli" -a "$card" -o json send --stream "tck-stream-cli" | python3 -c '
import json, sys
events = [json.loads(line) for line in sys.stdin if line.strip()]
kinds = [next(iter(e)) for e in events]
assert kinds[0] == "task", kinds
assert "artifactUpdate" in kinds and "statusUpdate" in kinds, kinds
text = "".join(p.get("text", "") for e in events if "artifactUpdate" in e for p in e["artifactUpdate"]["artifact"]["parts"])
assert text == "Streaming chunk one, chunk two, done.", text
print("a2a-cli send --stream: ok (%d events)" % len(events))'
