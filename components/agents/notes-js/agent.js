// A note-taking agent in JavaScript (componentize-js): it keeps each context's notes in the
// instance's key-value bucket, says what it does through `progress`, and answers with the granted
// model when there is one (streamed to the caller), else with the note's number. "ask" asks for
// the note first (INPUT_REQUIRED); the next message on that task is the note.
//
// Build (here): npm install && npm run build

import { status, text as say } from "a2a:agent/progress@0.1.0";
import { complete } from "a2a:agent/llm@0.1.0";
import { open } from "wasi:keyvalue/store@0.2.0-draft";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Asks the model about the note, or says its number when no model is granted. */
function answer(notes, text, count) {
  const message = (role, content) => ({ role, content, toolCalls: [], toolCallId: undefined });
  try {
    complete({
      messages: [message("system", "Notes so far:\n" + notes), message("user", text)],
      tools: [],
      maxTokens: undefined,
      temperature: undefined,
      streamAnswer: true,
    });
  } catch (e) {
    if (e.payload?.tag !== "not-granted") throw e;
    say(`noted ${count}: ${text}`);
  }
}

export function run(turn) {
  try {
    status("taking a note");
    const bucket = open("notes");
    const text = turn.text.trim();
    if (text === "ask" && !bucket.exists(turn.taskId)) {
      bucket.set(turn.taskId, encoder.encode("asked"));
      return { tag: "input-required", val: "What should I note?" };
    }
    const before = bucket.get(turn.contextId);
    const notes = (before ? decoder.decode(before) : "") + text + "\n";
    bucket.set(turn.contextId, encoder.encode(notes));
    answer(notes, text, notes.split("\n").length - 1);
    return { tag: "completed" };
  } catch (e) {
    return { tag: "failed", val: `the note was not taken: ${JSON.stringify(e.payload ?? String(e))}` };
  }
}
