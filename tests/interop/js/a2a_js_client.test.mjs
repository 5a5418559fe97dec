// Interop: the official JS A2A client (@a2a-js/sdk 1.3) against a running a2a-edge instance on
// the scripted preset. A2A_EDGE_AGENT is the instance's endpoint URL (card at /agent-card.json).
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
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

// A webhook on a loopback port that records every delivery (headers and JSON body).
async function receiver() {
  const deliveries = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      deliveries.push({ headers: req.headers, body: JSON.parse(body) });
      res.writeHead(200).end();
    });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const url = `http://127.0.0.1:${server.address().port}/hook`;
  const until = async (taskId, state) => {
    for (let i = 0; i < 300; i++) {
      const mine = deliveries.filter((d) => d.body.task.id === taskId);
      if (mine.some((d) => d.body.task.status.state === state)) return mine;
      await new Promise((ok) => setTimeout(ok, 50));
    }
    throw new Error(`no ${state} delivery of ${taskId}: ${JSON.stringify(deliveries)}`);
  };
  return { url, until, close: () => server.close() };
}

test("push config create, get, list and delete", async () => {
  const c = await client();
  const hook = await receiver();
  const task = await c.sendMessage(request("tck-complete-task"));
  const config = (id) => ({ tenant: "", id, taskId: task.id, url: hook.url, token: "", authentication: undefined });
  const created = await c.createTaskPushNotificationConfig(config("js-1"));
  assert.equal(created.id, "js-1");
  assert.equal(created.taskId, task.id);
  await c.createTaskPushNotificationConfig(config("js-2"));
  const got = await c.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "js-2" });
  assert.equal(got.url, hook.url);
  const listed = await c.listTaskPushNotificationConfig({ tenant: "", taskId: task.id, pageSize: 0, pageToken: "" });
  assert.deepEqual(listed.configs.map((x) => x.id), ["js-1", "js-2"]);
  await c.deleteTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "js-1" });
  await c.deleteTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "js-1" });
  await assert.rejects(c.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "js-1" }));
  hook.close();
});

test("push deliveries carry the task and the headers", async () => {
  const c = await client();
  const hook = await receiver();
  const req = request("tck-input-required");
  req.configuration = {
    acceptedOutputModes: [],
    taskPushNotificationConfig: { tenant: "", id: "", taskId: "", url: hook.url, token: "tok-js", authentication: { scheme: "Bearer", credentials: "cred-js" } },
    historyLength: undefined,
    returnImmediately: false,
  };
  const first = await c.sendMessage(req);
  assert.equal(first.status.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  await hook.until(first.id, "TASK_STATE_INPUT_REQUIRED");
  const done = await c.sendMessage(request("follow", "tck-complete-task", { taskId: first.id }));
  assert.equal(done.status.state, TaskState.TASK_STATE_COMPLETED);
  const got = await hook.until(first.id, "TASK_STATE_COMPLETED");
  for (const d of got) {
    assert.deepEqual(Object.keys(d.body), ["task"]);
    assert.equal(d.headers["content-type"], "application/a2a+json");
    assert.equal(d.headers["authorization"], "Bearer cred-js");
    assert.equal(d.headers["x-a2a-notification-token"], "tok-js");
  }
  hook.close();
});
