"""Interop: the Python a2a-sdk 1.3 client's own AuthInterceptor against an a2a-edge instance that
takes a bearer token and API keys (README "Authentication"). The interceptor reads the schemes
the card announces (`bearer`, `apiKey`) and sends the credential stored under each."""

import os
import uuid

import pytest
from a2a.client import (
    AuthInterceptor,
    ClientCallContext,
    ClientConfig,
    InMemoryContextCredentialStore,
    create_client,
)
from a2a.types import GetTaskRequest, ListTasksRequest, Message, Part, Role, SendMessageRequest, TaskState

AGENT = os.environ["A2A_EDGE_KEYED_AGENT"]
CREDENTIALS = {"bearer": os.environ["A2A_INTEROP_TOKEN"], "apiKey": os.environ["A2A_EDGE_KEY"]}


@pytest.fixture(params=["JSONRPC", "HTTP+JSON"])
def binding(request):
    return request.param


async def client(binding: str, scheme: str):
    """A client holding the credential of `scheme` (the card's name for it), and the call context
    that selects it."""
    store = InMemoryContextCredentialStore()
    await store.set_credentials("interop", scheme, CREDENTIALS[scheme])
    config = ClientConfig(streaming=False, supported_protocol_bindings=[binding])
    c = await create_client(
        AGENT, client_config=config, interceptors=[AuthInterceptor(store)], relative_card_path="/agent-card.json"
    )
    return c, ClientCallContext(state={"sessionId": "interop"})


def message(context_id: str) -> SendMessageRequest:
    m = Message(message_id=f"tck-complete-task-{uuid.uuid4()}", role=Role.ROLE_USER, parts=[Part(text="hi")])
    m.context_id = context_id
    return SendMessageRequest(message=m)


@pytest.mark.asyncio
@pytest.mark.parametrize("scheme", ["bearer", "apiKey"])
async def test_the_interceptor_authenticates_with_each_scheme_the_card_announces(binding, scheme):
    c, ctx = await client(binding, scheme)
    context_id = f"auth-{scheme}-{uuid.uuid4()}"
    events = [ev async for ev in c.send_message(message(context_id), context=ctx)]
    task = events[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    got = await c.get_task(GetTaskRequest(id=task.id), context=ctx)
    assert got.id == task.id
    page = await c.list_tasks(ListTasksRequest(context_id=context_id), context=ctx)
    assert [t.id for t in page.tasks] == [task.id]
    with pytest.raises(Exception, match="401"):
        await c.list_tasks(ListTasksRequest())
    await c.close()


@pytest.mark.asyncio
async def test_a_key_holder_never_sees_the_token_holders_tasks(binding):
    token, token_ctx = await client(binding, "bearer")
    key, key_ctx = await client(binding, "apiKey")
    context_id = f"owned-{uuid.uuid4()}"
    events = [ev async for ev in token.send_message(message(context_id), context=token_ctx)]
    task = events[0].task
    page = await key.list_tasks(ListTasksRequest(context_id=context_id), context=key_ctx)
    assert list(page.tasks) == []
    with pytest.raises(Exception):
        await key.get_task(GetTaskRequest(id=task.id), context=key_ctx)
    await token.close()
    await key.close()
