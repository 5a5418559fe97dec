"""A remote A2A 1.0 agent on the official Python SDK (a2a-sdk 1.3), for a2a-edge's outbound tests.

Behaviour by the first word of the message text:
  fail ...   -> FAILED with the status message "remote failure: <text>"
  ask ...    -> INPUT_REQUIRED ("which one?"); a follow-up on that taskId completes it
  slow ...   -> stays WORKING for 30 s unless canceled (cancellations are recorded)
  anything   -> COMPLETED with the artifact "echo: <text>" (streamed in two chunks)

Test hooks (plain HTTP): GET /test/seen (messages received: text, skill, contextId, taskId),
GET /test/cancels (task ids canceled), POST /test/fail-next?n=K (the next K JSON-RPC calls
answer 503).

Usage: python remote_agent.py PORT [--no-streaming] [--token TOKEN]
"""

import asyncio
import sys

import uvicorn
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part

SEEN: list = []
CANCELS: list = []
FAIL_NEXT = {"n": 0}


class Executor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        skill = json_format.MessageToDict(context.message.metadata).get("skill") if context.message else None
        SEEN.append({"text": text, "skill": skill, "contextId": context.context_id, "taskId": context.task_id})
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        word = text.split(" ", 1)[0]
        if word == "fail":
            await updater.failed(message=updater.new_agent_message(parts=[Part(text=f"remote failure: {text}")]))
        elif word == "ask" and context.current_task is None:
            await updater.requires_input(message=updater.new_agent_message(parts=[Part(text="which one?")]))
        elif word == "slow":
            for _ in range(300):
                await asyncio.sleep(0.1)
            await updater.complete()
        else:
            await updater.add_artifact(parts=[Part(text="echo: ")], artifact_id="out", name="echo")
            await updater.add_artifact(parts=[Part(text=text)], artifact_id="out", append=True, last_chunk=True)
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        CANCELS.append(context.task_id)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def build(port: int, streaming: bool, token: str | None) -> Starlette:
    base = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="Python Remote",
        description="Echoes, fails, asks or waits, by the first word",
        version="3.1.4",
        supported_interfaces=[AgentInterface(url=f"{base}/", protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="echo", name="Echo", description="Echoes the input", tags=["echo"]),
            AgentSkill(id="web.search", name="Search", description="Pretends to search", tags=["search"]),
        ],
    )
    handler = DefaultRequestHandler(agent_executor=Executor(), task_store=InMemoryTaskStore(), agent_card=card)

    async def seen(_: Request):
        return JSONResponse(SEEN)

    async def cancels(_: Request):
        return JSONResponse(CANCELS)

    async def fail_next(request: Request):
        FAIL_NEXT["n"] = int(request.query_params.get("n", "1"))
        return JSONResponse({"ok": True})

    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/")
    routes += [Route("/test/seen", seen), Route("/test/cancels", cancels), Route("/test/fail-next", fail_next, methods=["POST"])]
    async def gate(request: Request, call_next):
        if request.method == "POST" and request.url.path == "/":
            if FAIL_NEXT["n"] > 0:
                FAIL_NEXT["n"] -= 1
                return PlainTextResponse("temporarily unavailable", status_code=503)
            if token is not None and request.headers.get("authorization") != f"Bearer {token}":
                return PlainTextResponse("unauthorized", status_code=401)
        return await call_next(request)

    return Starlette(routes=routes, middleware=[Middleware(BaseHTTPMiddleware, dispatch=gate)])


def main() -> None:
    port = int(sys.argv[1])
    streaming = "--no-streaming" not in sys.argv
    token = sys.argv[sys.argv.index("--token") + 1] if "--token" in sys.argv else None
    uvicorn.run(build(port, streaming, token), host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
