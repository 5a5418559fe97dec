// Interop: the official JS A2A client (@a2a-js/sdk 1.3) against a running a2a-edge instance on
// the scripted preset. A2A_EDGE_AGENT is the instance's endpoint URL (card at /agent-card.json).
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";

const AGENT = process.env.A2A_EDGE_AGENT;
assert.ok(AGENT, "set A2A_EDGE_AGENT to the instance endpoint URL");

// The binding to use (the card announces both): JSONRPC unless A2A_EDGE_BINDING says HTTP+JSON.
const BINDING = process.env.A2A_EDGE_BINDING || "JSONRPC";
const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [BINDING] });
const client = () => new ClientFactory(options).createFromUrl(`${AGENT}/agent-card.json`, "");

function request(prefix, text = "hello", extra = {}) {
  return {
    tenant: "",
    message: {
      messageId: `${prefix}-${randomUUID()}`,
      contextId: "",
      taskId: "",
      role: Role.ROLE_USER,
      parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
      ...extra,
    },
    configuration: undefined,
    metadata: undefined,
  };
}

const text = (parts) => parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");

test("send completes with the artifact", async () => {
  const c = await client();
  const task = await c.sendMessage(request("tck-complete-task"));
  assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.equal(text(task.artifacts[0].parts), "Hello from TCK");
});

test("stream yields task, chunks and completion", async () => {
  const c = await client();
  const cases = [];
  let streamed = "";
  let finalState;
  for await (const ev of c.sendMessageStream(request("tck-stream-js"))) {
    cases.push(ev.payload.$case);
    if (ev.payload.$case === "artifactUpdate") streamed += text(ev.payload.value.artifact.parts);
    if (ev.payload.$case === "statusUpdate") finalState = ev.payload.value.status.state;
    if (ev.payload.$case === "task") finalState = ev.payload.value.status.state;
  }
  assert.equal(cases[0], "task");
  assert.ok(cases.includes("artifactUpdate") && cases.includes("statusUpdate"), cases.join(","));
  assert.equal(streamed, "Streaming chunk one, chunk two, done.");
  assert.equal(finalState, TaskState.TASK_STATE_COMPLETED);
});

test("get and list tasks", async () => {
  const c = await client();
  const contextId = randomUUID();
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await c.sendMessage(request("tck-complete-task", "x", { contextId }))).id);
  const got = await c.getTask({ tenant: "", id: ids[0], historyLength: undefined });
  assert.equal(got.id, ids[0]);
  const page = await c.listTasks({ tenant: "", contextId, status: 0, pageSize: 2, pageToken: "", historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined });
  assert.equal(page.totalSize, 3);
  assert.equal(page.tasks.length, 2);
  assert.notEqual(page.nextPageToken, "");
});

test("cancel a running task", async () => {
  const c = await client();
  const req = request("tck-long-running");
  req.configuration = { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: true };
  const task = await c.sendMessage(req);
  assert.equal(task.status.state, TaskState.TASK_STATE_WORKING);
  const canceled = await c.cancelTask({ tenant: "", id: task.id, metadata: undefined });
  assert.equal(canceled.status.state, TaskState.TASK_STATE_CANCELED);
});

test("subscribe to a running task until it completes", async () => {
  const c = await client();
  const req = request("tck-long-running");
  req.configuration = { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: true };
  const task = await c.sendMessage(req);
  const cases = [];
  let last;
  for await (const ev of c.resubscribeTask({ tenant: "", id: task.id })) {
    cases.push(ev.payload.$case);
    last = ev.payload;
  }
  assert.equal(cases[0], "task");
  const state = last.$case === "task" ? last.value.status.state : last.value.status.state;
  assert.equal(state, TaskState.TASK_STATE_COMPLETED);
});
