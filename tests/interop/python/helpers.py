"""What the interop tests share (not a test module)."""

import uuid

import grpc
from a2a.client import ClientConfig
from a2a.types import Message, Part, Role, SendMessageRequest

# The three bindings every card announces.
BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]


def config(binding: str, streaming: bool = False, polling: bool = False, **kw) -> ClientConfig:
    """A client that speaks only `binding`; over gRPC by default a plaintext HTTP/2 channel to
    the card's `host:port`."""
    kw.setdefault("grpc_channel_factory", grpc.aio.insecure_channel)
    return ClientConfig(streaming=streaming, polling=polling, supported_protocol_bindings=[binding], **kw)


def message(context_id: str) -> SendMessageRequest:
    """A message the scripted agent completes at once, in `context_id`."""
    m = Message(message_id=f"tck-complete-task-{uuid.uuid4()}", role=Role.ROLE_USER, parts=[Part(text="hi")])
    m.context_id = context_id
    return SendMessageRequest(message=m)
