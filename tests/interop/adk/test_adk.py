"""Interop: Google ADK's RemoteA2aAgent (ADK 2.13 on the a2a-sdk 1.3 client) against a running
a2a-edge instance on the scripted preset, which echoes a text it has no behaviour for
(A2A_EDGE_AGENT = the instance's endpoint URL, its card at /agent-card.json). No LLM: the remote
agent is the root agent of an ADK Runner, and each turn is one A2A message.

ADK refuses a card fetched over the network if any interface URL on it is not https (or http on
a loopback host) on the origin the card was fetched from: a bare `host:port` GRPC url is refused
although ADK never dials gRPC. It reports that, like a failed call, as an event with an
`error_message`, not as an exception, so every turn checks that none came."""

import os
import uuid

os.environ.setdefault("ADK_SUPPRESS_A2A_EXPERIMENTAL_FEATURE_WARNINGS", "1")

import pytest
from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

AGENT = os.environ["A2A_EDGE_AGENT"]
APP = "interop"
USER = "interop-user"
# ADK's keys in an event's custom_metadata for the A2A task and context it came from.
TASK_ID = "a2a:task_id"
CONTEXT_ID = "a2a:context_id"


def texts(events: list[Event]) -> list[str]:
    return [p.text for ev in events if ev.content for p in ev.content.parts or [] if p.text and not p.thought]


def show(events: list[Event]) -> str:
    """The events in short, for an assertion's message."""
    meta = lambda ev: {k: v for k, v in (ev.custom_metadata or {}).items() if k in (TASK_ID, CONTEXT_ID)}
    return "\n".join(
        f"{ev.author} partial={ev.partial} error={ev.error_message!r} texts={texts([ev])} {meta(ev)}" for ev in events
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("use_legacy", [True, False], ids=["legacy", "new-integration"])
async def test_two_turns_of_one_adk_session_are_one_a2a_context(use_legacy):
    # The card URL as clients reach the server: ADK compares its origin with the card's URLs.
    agent = RemoteA2aAgent(name="edge", agent_card=f"{AGENT}/agent-card.json", use_legacy=use_legacy)
    sessions = InMemorySessionService()
    runner = Runner(app_name=APP, agent=agent, session_service=sessions)
    session = await sessions.create_session(app_name=APP, user_id=USER)
    tasks, contexts = [], []
    try:
        for text in (f"hello from adk {uuid.uuid4().hex[:8]}", "and a second turn"):
            message = types.Content(role="user", parts=[types.Part(text=text)])
            events = [ev async for ev in runner.run_async(user_id=USER, session_id=session.id, new_message=message)]
            assert events, "the turn yielded no event"
            assert not [ev.error_message for ev in events if ev.error_message], show(events)
            assert {ev.author for ev in events} == {"edge"}, show(events)
            # Streamed, the echo arrives as partial chunks, then the settled task: the chunks add
            # up to the answer, and the events ADK keeps (the non-partial ones) hold it once.
            streamed = "".join(texts([ev for ev in events if ev.partial]))
            assert streamed in ("", text), show(events)
            assert "".join(texts([ev for ev in events if not ev.partial])) == text, show(events)
            tasks.append({ev.custom_metadata[TASK_ID] for ev in events if TASK_ID in (ev.custom_metadata or {})})
            contexts.append({ev.custom_metadata[CONTEXT_ID] for ev in events if CONTEXT_ID in (ev.custom_metadata or {})})
            assert len(tasks[-1]) == 1 and len(contexts[-1]) == 1, show(events)
    finally:
        await runner.close()
    # The second turn carried the first's contextId (its task ended, so no taskId): a new task
    # in the same context.
    assert contexts[0] == contexts[1], contexts
    assert tasks[0] != tasks[1], tasks
    # What the session kept: each user text, then the agent's answer to it.
    kept = await sessions.get_session(app_name=APP, user_id=USER, session_id=session.id)
    said = [(ev.author, "".join(texts([ev]))) for ev in kept.events if texts([ev])]
    assert [who for who, _ in said] == ["user", "edge", "user", "edge"], said
    assert said[0][1] == said[1][1] and said[2][1] == said[3][1], said
