"""What the interop tests share (not a test module)."""

import uuid

from a2a.types import Message, Part, Role, SendMessageRequest


def message(context_id: str) -> SendMessageRequest:
    """A message the scripted agent completes at once, in `context_id`."""
    m = Message(message_id=f"tck-complete-task-{uuid.uuid4()}", role=Role.ROLE_USER, parts=[Part(text="hi")])
    m.context_id = context_id
    return SendMessageRequest(message=m)
