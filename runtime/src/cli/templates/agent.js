// {{name}}: an a2a-edge agent (a2a-edge's docs/agents.md).

import { status, text } from "a2a:agent/progress@0.1.0";

export function run(turn) {
  try {
    status("thinking");
    text(`{{name}} heard: ${turn.text}`);
    return { tag: "completed" };
  } catch (e) {
    return { tag: "failed", val: String(e.payload ?? e) };
  }
}
