"""Interop: the official Python a2a-sdk 0.3 client (the 0.3 line, pinned) against the same
a2a-edge instance the 1.0 clients call (A2A_EDGE_AGENT): it reads the one card, speaks 0.3
over JSON-RPC and over HTTP+JSON (the `/v1/` paths, the 0.3 proto's JSON), and sees the tasks a
1.0 caller made. Every test runs over both transports."""

import json
import os
import urllib.request
import uuid

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    GetTaskPushNotificationConfigParams,
    Message,
    MessageSendConfiguration,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TextPart,
    TransportProtocol,
)

AGENT = os.environ["A2A_EDGE_AGENT"]


@pytest.fixture(params=[TransportProtocol.jsonrpc, TransportProtocol.http_json], ids=["jsonrpc", "http_json"])
def transport(request):
    return request.param


async def client(transport: TransportProtocol, streaming: bool, blocking: bool = True):
    http = httpx.AsyncClient(timeout=30)
    card = await A2ACardResolver(http, AGENT, agent_card_path="/agent-card.json").get_agent_card()
    assert card.protocol_version == "0.3.0"
    config = ClientConfig(
        streaming=streaming, polling=not blocking, httpx_client=http, supported_transports=[transport]
    )
    return ClientFactory(config).create(card), http


def message(prefix: str, task_id: str | None = None) -> Message:
    return Message(
        message_id=f"{prefix}-{uuid.uuid4()}", role=Role.user, parts=[Part(root=TextPart(text="hi"))], task_id=task_id
    )


def task_of(event) -> Task:
    return event[0] if isinstance(event, tuple) else event


@pytest.mark.asyncio
async def test_send_blocking_completes_with_the_artifact(transport):
    c, http = await client(transport, streaming=False)
    events = [ev async for ev in c.send_message(message("tck-complete-task"))]
    task = task_of(events[-1])
    assert task.status.state == TaskState.completed
    assert task.artifacts[0].parts[0].root.text == "Hello from TCK"
    got = await c.get_task(TaskQueryParams(id=task.id))
    assert got.id == task.id and got.status.state == TaskState.completed
    await c.close()
    await http.aclose()


@pytest.mark.asyncio
async def test_stream_yields_updates_to_a_final_completion(transport):
    c, http = await client(transport, streaming=True)
    events = [ev async for ev in c.send_message(message("tck-stream-chunks"))]
    updates = [u for _, u in events if u is not None]
    kinds = [u.kind for u in updates]
    assert "artifact-update" in kinds and "status-update" in kinds
    last = [u for u in updates if u.kind == "status-update"][-1]
    assert last.status.state == TaskState.completed and last.final
    task = task_of(events[-1])
    text = "".join(p.root.text for a in task.artifacts for p in a.parts)
    assert text == "Streaming chunk one, chunk two, done."
    await c.close()
    await http.aclose()


@pytest.mark.asyncio
async def test_input_required_then_continue_cancel_and_resubscribe(transport):
    c, http = await client(transport, streaming=False)
    first = task_of([ev async for ev in c.send_message(message("tck-input-required"))][-1])
    assert first.status.state == TaskState.input_required
    done = task_of([ev async for ev in c.send_message(message("tck-complete-task", task_id=first.id))][-1])
    assert done.id == first.id and done.status.state == TaskState.completed
    running = task_of(
        [ev async for ev in c.send_message(message("tck-long-running"), configuration=MessageSendConfiguration(blocking=False))][-1]
    )
    assert running.status.state in (TaskState.submitted, TaskState.working)
    streaming, shttp = await client(transport, streaming=True)
    stream = streaming.resubscribe(TaskIdParams(id=running.id))
    first_event = await anext(stream)
    assert task_of(first_event).id == running.id
    canceled = await c.cancel_task(TaskIdParams(id=running.id))
    assert canceled.status.state == TaskState.canceled
    rest = [ev async for ev in stream]
    assert rest and rest[-1][1].final and rest[-1][1].status.state == TaskState.canceled
    for x in (c, streaming):
        await x.close()
    for h in (http, shttp):
        await h.aclose()


@pytest.mark.asyncio
async def test_push_config_set_and_get(transport):
    c, http = await client(transport, streaming=False)
    task = task_of([ev async for ev in c.send_message(message("tck-input-required"))][-1])
    config = TaskPushNotificationConfig(
        task_id=task.id, push_notification_config=PushNotificationConfig(id="p1", url="http://127.0.0.1:9/hook", token="t0k")
    )
    saved = await c.set_task_callback(config)
    assert saved.task_id == task.id and saved.push_notification_config.url == "http://127.0.0.1:9/hook"
    got = await c.get_task_callback(GetTaskPushNotificationConfigParams(id=task.id, push_notification_config_id="p1"))
    assert got.push_notification_config.id == "p1"
    await c.close()
    await http.aclose()


@pytest.mark.asyncio
async def test_a_task_made_over_1_0_is_read_over_0_3_and_errors_keep_their_codes(transport):
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": f"tck-complete-task-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    }
    req = urllib.request.Request(
        AGENT, json.dumps(body).encode(), {"content-type": "application/json", "a2a-version": "1.0"}
    )
    made = json.load(urllib.request.urlopen(req))["result"]["task"]
    c, http = await client(transport, streaming=False)
    got = await c.get_task(TaskQueryParams(id=made["id"]))
    assert got.status.state == TaskState.completed and got.kind == "task"
    with pytest.raises(Exception, match="(?i)-32001|not found"):
        await c.get_task(TaskQueryParams(id="no-such-task"))
    await c.close()
    await http.aclose()
