"""A remote A2A 0.3 agent on the official Python SDK's 0.3 line (a2a-sdk 0.3, pinned), for
a2a-edge's outbound tests: its card is a pure 0.3 card (`url`, `protocolVersion: 0.3.0`, no
`supportedInterfaces`) and it speaks 0.3 JSON-RPC only.

Behaviour by the first word of the message text:
  fail ...   -> failed, with the status message "remote failure: <text>"
  ask ...    -> input-required ("which one?"); a follow-up on that taskId completes it
  anything   -> completed with the artifact "echo: <text>" (streamed in two chunks)

Test hook: GET /test/seen (messages received: text, contextId, taskId).

Usage: python remote_agent_03.py PORT [--no-streaming]
"""

import sys

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentSkill, Part, TextPart
from a2a.utils import new_task

SEEN: list = []


class Executor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        SEEN.append({"text": text, "contextId": context.context_id, "taskId": context.task_id})
        task = context.current_task
        if task is None:
            task = new_task(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        word = text.split(" ", 1)[0]
        if word == "fail":
            await updater.failed(message=updater.new_agent_message([Part(root=TextPart(text=f"remote failure: {text}"))]))
        elif word == "ask" and context.current_task is None:
            await updater.requires_input(message=updater.new_agent_message([Part(root=TextPart(text="which one?"))]))
        else:
            await updater.add_artifact([Part(root=TextPart(text="echo: "))], artifact_id="out", name="echo")
            await updater.add_artifact([Part(root=TextPart(text=text))], artifact_id="out", append=True, last_chunk=True)
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def build(port: int, streaming: bool):
    card = AgentCard(
        name="Python 0.3 Remote",
        description="Echoes, fails or asks, by the first word",
        version="0.3.9",
        url=f"http://127.0.0.1:{port}/",
        protocol_version="0.3.0",
        preferred_transport="JSONRPC",
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes the input", tags=["echo"])],
    )
    handler = DefaultRequestHandler(agent_executor=Executor(), task_store=InMemoryTaskStore())
    app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()

    async def seen(_: Request):
        return JSONResponse(SEEN)

    app.router.routes.append(Route("/test/seen", seen))
    return app


def main() -> None:
    port = int(sys.argv[1])
    streaming = "--no-streaming" not in sys.argv
    uvicorn.run(build(port, streaming), host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
