"""What the interop tests share (not a test module)."""

import uuid
from urllib.parse import urlsplit

import grpc
from a2a.client import ClientConfig
from a2a.types import Message, Part, Role, SendMessageRequest

# The three bindings every card announces.
BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]


def grpc_target(url: str) -> str:
    """The `host:port` a gRPC channel dials for the card's GRPC interface URL. The a2a-sdk hands
    the URL to the channel factory as it is, and grpc takes no scheme: `http://127.0.0.1:3391`
    (plaintext) and `https://localhost:4443` (TLS) give their authority (without user info, the
    scheme's default port when none is named); a bare `host:port`, the form cards announced
    before, is dialed as it is."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    authority = parts.netloc.rpartition("@")[2]
    return authority if parts.port else f"{authority}:{443 if parts.scheme == 'https' else 80}"


def insecure_channel(url: str) -> grpc.aio.Channel:
    """A plaintext HTTP/2 channel to the card's GRPC interface URL."""
    return grpc.aio.insecure_channel(grpc_target(url))


def secure_channel(credentials: grpc.ChannelCredentials):
    """A channel factory for TLS channels with `credentials` to the card's GRPC interface URL."""
    return lambda url: grpc.aio.secure_channel(grpc_target(url), credentials)


def config(binding: str, streaming: bool = False, polling: bool = False, **kw) -> ClientConfig:
    """A client that speaks only `binding`; over gRPC by default a plaintext HTTP/2 channel to
    the authority of the card's GRPC interface URL."""
    kw.setdefault("grpc_channel_factory", insecure_channel)
    return ClientConfig(streaming=streaming, polling=polling, supported_protocol_bindings=[binding], **kw)


def message(context_id: str) -> SendMessageRequest:
    """A message the scripted agent completes at once, in `context_id`."""
    m = Message(message_id=f"tck-complete-task-{uuid.uuid4()}", role=Role.ROLE_USER, parts=[Part(text="hi")])
    m.context_id = context_id
    return SendMessageRequest(message=m)
