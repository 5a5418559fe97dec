"""Interop: the official Python a2a-sdk 1.3 client against a running a2a-edge instance on the
scripted preset (A2A_EDGE_AGENT = the instance's endpoint URL, its card at /agent-card.json)."""

import asyncio
import json
import os
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx
import pytest
from a2a.client import create_client
from a2a.types import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from helpers import BINDINGS, config

AGENT = os.environ["A2A_EDGE_AGENT"]


@pytest.fixture(params=BINDINGS)
def binding(request):
    """Every test runs over each of the three bindings the card announces."""
    return request.param


async def client(binding: str, streaming: bool, polling: bool = False):
    return await create_client(AGENT, client_config=config(binding, streaming, polling), relative_card_path="/agent-card.json")


def message(prefix: str, text: str = "hello", context_id: str = "", task_id: str = "") -> SendMessageRequest:
    m = Message(message_id=f"{prefix}-{uuid.uuid4()}", role=Role.ROLE_USER, parts=[Part(text=text)])
    if context_id:
        m.context_id = context_id
    if task_id:
        m.task_id = task_id
    return SendMessageRequest(message=m)


async def collect(stream):
    return [ev async for ev in stream]


def test_the_card_announces_grpc_as_the_listeners_url():
    """The GRPC interface's url is the plaintext listener's `http://host:port` (a URL, as Google
    ADK requires of every interface; helpers.grpc_target dials its authority), with the instance
    as its tenant."""
    card = httpx.get(f"{AGENT}/agent-card.json", headers={"A2A-Version": "1.0"}).json()
    faces = [(i["url"], i.get("tenant")) for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"]
    assert faces == [(f"http://{urlsplit(AGENT).netloc}", "tck")], card["supportedInterfaces"]


@pytest.mark.asyncio
async def test_send_blocking_completes_with_the_artifact(binding):
    c = await client(binding, streaming=False)
    events = await collect(c.send_message(message("tck-complete-task")))
    assert len(events) == 1
    task = events[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == "Hello from TCK"
    await c.close()


@pytest.mark.asyncio
async def test_stream_yields_task_then_updates_then_completion(binding):
    c = await client(binding, streaming=True)
    events = await collect(c.send_message(message("tck-stream-chunks")))
    kinds = [ev.WhichOneof("payload") for ev in events]
    assert kinds[0] == "task"
    assert "artifact_update" in kinds
    assert "status_update" in kinds
    text = "".join(p.text for ev in events if ev.WhichOneof("payload") == "artifact_update" for p in ev.artifact_update.artifact.parts)
    assert text == "Streaming chunk one, chunk two, done."
    final = [ev for ev in events if ev.WhichOneof("payload") == "status_update"][-1]
    assert final.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    await c.close()


@pytest.mark.asyncio
async def test_get_and_list_tasks(binding):
    c = await client(binding, streaming=False)
    ctx = str(uuid.uuid4())
    ids = []
    for _ in range(3):
        ev = (await collect(c.send_message(message("tck-complete-task", context_id=ctx))))[0]
        ids.append(ev.task.id)
    got = await c.get_task(GetTaskRequest(id=ids[0]))
    assert got.id == ids[0] and got.status.state == TaskState.TASK_STATE_COMPLETED
    page = await c.list_tasks(ListTasksRequest(context_id=ctx, page_size=2))
    assert page.total_size == 3 and len(page.tasks) == 2 and page.next_page_token
    rest = await c.list_tasks(ListTasksRequest(context_id=ctx, page_size=2, page_token=page.next_page_token))
    assert len(rest.tasks) == 1 and rest.next_page_token == ""
    assert sorted(t.id for t in list(page.tasks) + list(rest.tasks)) == sorted(ids)
    await c.close()


@pytest.mark.asyncio
async def test_cancel_a_running_task(binding):
    c = await client(binding, streaming=False, polling=True)
    ev = (await collect(c.send_message(message("tck-long-running"))))[0]
    assert ev.task.status.state == TaskState.TASK_STATE_WORKING
    canceled = await c.cancel_task(CancelTaskRequest(id=ev.task.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    await asyncio.sleep(0.5)
    assert (await c.get_task(GetTaskRequest(id=ev.task.id))).status.state == TaskState.TASK_STATE_CANCELED
    await c.close()


@pytest.mark.asyncio
async def test_subscribe_to_a_running_task_until_it_completes(binding):
    c = await client(binding, streaming=False, polling=True)
    ev = (await collect(c.send_message(message("tck-long-running"))))[0]
    s = await client(binding, streaming=True)
    events = await collect(s.subscribe(SubscribeToTaskRequest(id=ev.task.id)))
    assert events[0].WhichOneof("payload") == "task"
    states = [e.status_update.status.state for e in events if e.WhichOneof("payload") == "status_update"]
    last = events[-1]
    final_state = last.task.status.state if last.WhichOneof("payload") == "task" else states[-1]
    assert final_state == TaskState.TASK_STATE_COMPLETED
    await c.close()
    await s.close()


@pytest.mark.asyncio
async def test_input_required_then_continue_with_the_task_id(binding):
    c = await client(binding, streaming=False)
    first = (await collect(c.send_message(message("tck-input-required"))))[0].task
    assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    second = (await collect(c.send_message(message("follow", "tck-complete-task", task_id=first.id))))[0].task
    assert second.id == first.id and second.status.state == TaskState.TASK_STATE_COMPLETED
    await c.close()


@pytest.mark.asyncio
async def test_unknown_task_is_an_error(binding):
    c = await client(binding, streaming=False)
    with pytest.raises(Exception) as e:
        await c.get_task(GetTaskRequest(id="no-such-task"))
    assert "not found" in str(e.value).lower()
    await c.close()


class Receiver:
    """A webhook on a loopback port that records every delivery (headers and JSON body)."""

    def __init__(self):
        self.deliveries = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with outer.lock:
                    outer.deliveries.append((dict((k.lower(), v) for k, v in self.headers.items()), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    async def until(self, task_id, state, seconds=15):
        for _ in range(seconds * 20):
            with self.lock:
                mine = [(h, b) for h, b in self.deliveries if b["task"]["id"] == task_id]
            if any(b["task"]["status"]["state"] == state for _, b in mine):
                return mine
            await asyncio.sleep(0.05)
        raise AssertionError(f"no {state} delivery of {task_id}: {self.deliveries}")

    def close(self):
        self.server.shutdown()


@pytest.mark.asyncio
async def test_push_config_crud(binding):
    c = await client(binding, streaming=False)
    hook = Receiver()
    task = (await collect(c.send_message(message("tck-complete-task"))))[0].task
    created = await c.create_task_push_notification_config(
        TaskPushNotificationConfig(task_id=task.id, id="cfg-1", url=hook.url, token="tok-1")
    )
    assert created.id == "cfg-1" and created.task_id == task.id and created.url == hook.url
    await c.create_task_push_notification_config(TaskPushNotificationConfig(task_id=task.id, id="cfg-2", url=hook.url))
    got = await c.get_task_push_notification_config(GetTaskPushNotificationConfigRequest(task_id=task.id, id="cfg-1"))
    assert not got.token, "webhook tokens are write-only"
    listed = await c.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
    assert [x.id for x in listed.configs] == ["cfg-1", "cfg-2"]
    page = await c.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id, page_size=1))
    assert len(page.configs) == 1 and page.next_page_token
    for _ in range(2):
        await c.delete_task_push_notification_config(DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="cfg-1"))
    with pytest.raises(Exception):
        await c.get_task_push_notification_config(GetTaskPushNotificationConfigRequest(task_id=task.id, id="cfg-1"))
    hook.close()
    await c.close()


@pytest.mark.asyncio
async def test_push_deliveries_carry_the_task_and_the_headers(binding):
    c = await client(binding, streaming=False)
    hook = Receiver()
    push = TaskPushNotificationConfig(
        url=hook.url, token="tok-2", authentication=AuthenticationInfo(scheme="Bearer", credentials="cred-2")
    )
    req = message("tck-input-required")
    req.configuration.CopyFrom(SendMessageConfiguration(task_push_notification_config=push))
    first = (await collect(c.send_message(req)))[0].task
    assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    await hook.until(first.id, "TASK_STATE_INPUT_REQUIRED")
    done = (await collect(c.send_message(message("follow", "tck-complete-task", task_id=first.id))))[0].task
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    got = await hook.until(first.id, "TASK_STATE_COMPLETED")
    states = [b["task"]["status"]["state"] for _, b in got]
    assert states[0] == "TASK_STATE_WORKING" and states[-1] == "TASK_STATE_COMPLETED", states
    assert states.index("TASK_STATE_INPUT_REQUIRED") < states.index("TASK_STATE_COMPLETED"), states
    for headers, body in got:
        assert list(body) == ["task"], body
        assert headers["content-type"] == "application/a2a+json"
        assert headers["authorization"] == "Bearer cred-2"
        assert headers["x-a2a-notification-token"] == "tok-2"
        assert headers["a2a-notification-token"] == "tok-2"
    hook.close()
    await c.close()
