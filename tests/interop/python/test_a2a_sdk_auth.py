"""Interop: the Python a2a-sdk 1.3 client's own AuthInterceptor against a2a-edge instances that
take a bearer token and API keys, and OpenID Connect tokens from an issuer served here
(docs/auth.md "Authentication"). The interceptor reads the schemes the card announces (`bearer`,
`apiKey`, `oidc`) and sends the credential stored under each."""

import os
import uuid

import pytest
from a2a.client import (
    AuthInterceptor,
    ClientCallContext,
    InMemoryContextCredentialStore,
    create_client,
)
from a2a.types import GetTaskRequest, ListTasksRequest, TaskState
from helpers import BINDINGS, config, message

AGENT = os.environ["A2A_EDGE_KEYED_AGENT"]
# How each binding's client reports a refused credential: HTTP 401, or gRPC's status.
UNAUTHENTICATED = "401|UNAUTHENTICATED"
CREDENTIALS = {"bearer": os.environ["A2A_INTEROP_TOKEN"], "apiKey": os.environ["A2A_EDGE_KEY"]}


@pytest.fixture(params=BINDINGS)
def binding(request):
    return request.param


async def client(binding: str, scheme: str, credential: str | None = None, agent: str = AGENT):
    """A client of `agent` holding `credential` (by default the stored one) for `scheme` (the
    card's name for it), and the call context that selects it."""
    store = InMemoryContextCredentialStore()
    await store.set_credentials("interop", scheme, credential or CREDENTIALS[scheme])
    c = await create_client(
        agent, client_config=config(binding), interceptors=[AuthInterceptor(store)], relative_card_path="/agent-card.json"
    )
    return c, ClientCallContext(state={"sessionId": "interop"})


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
    with pytest.raises(Exception, match=UNAUTHENTICATED):
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


class Issuer:
    """An OpenID Connect issuer on loopback: its discovery document and one ES256 key."""

    def __init__(self):
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import jwt
        from cryptography.hazmat.primitives.asymmetric import ec

        self.key = ec.generate_private_key(ec.SECP256R1())
        jwk = jwt.algorithms.ECAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        jwk.update(kid="k1", alg="ES256", use="sig")
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                docs = {
                    "/.well-known/openid-configuration": {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks"},
                    "/jwks": {"keys": [jwk]},
                }
                body = json.dumps(docs.get(self.path, {})).encode()
                self.send_response(200 if self.path in docs else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, sub: str, scope: str) -> str:
        import time

        import jwt

        now = int(time.time())
        claims = {"iss": self.url, "aud": "interop", "sub": sub, "scope": scope, "iat": now, "exp": now + 600}
        return jwt.encode(claims, self.key, algorithm="ES256", headers={"kid": "k1"})


@pytest.fixture(scope="module")
def issuer():
    import json
    import urllib.request

    i = Issuer()
    body = {"action": "inbound.setOidc", "id": "oidc", "issuer": i.url, "audience": "interop", "scopes": ["a2a:call"]}
    req = urllib.request.Request(
        os.environ["A2A_EDGE_API"], data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req) as r:
        assert json.load(r)["ok"]
    yield i
    i.server.shutdown()


async def oidc_client(binding: str, token: str):
    """A client whose interceptor sends `token` for the card's `oidc` scheme."""
    return await client(binding, "oidc", token, os.environ["A2A_EDGE_OIDC_AGENT"])


@pytest.mark.asyncio
async def test_the_interceptor_sends_an_openid_connect_token_and_each_subject_sees_its_own(binding, issuer):
    alice, alice_ctx = await oidc_client(binding, issuer.token("alice", "openid a2a:call"))
    import json
    import urllib.request

    with urllib.request.urlopen(os.environ["A2A_EDGE_OIDC_AGENT"] + "/agent-card.json") as r:
        card = json.load(r)
    assert card["securitySchemes"]["oidc"]["openIdConnectSecurityScheme"]["openIdConnectUrl"].startswith(issuer.url)
    context_id = f"oidc-{uuid.uuid4()}"
    events = [ev async for ev in alice.send_message(message(context_id), context=alice_ctx)]
    task = events[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    page = await alice.list_tasks(ListTasksRequest(context_id=context_id), context=alice_ctx)
    assert [t.id for t in page.tasks] == [task.id]
    bob, bob_ctx = await oidc_client(binding, issuer.token("bob", "a2a:call"))
    page = await bob.list_tasks(ListTasksRequest(context_id=context_id), context=bob_ctx)
    assert list(page.tasks) == []
    with pytest.raises(Exception):
        await bob.get_task(GetTaskRequest(id=task.id), context=bob_ctx)
    narrow, narrow_ctx = await oidc_client(binding, issuer.token("carol", "openid"))
    with pytest.raises(Exception, match=UNAUTHENTICATED):
        await narrow.list_tasks(ListTasksRequest(), context=narrow_ctx)
    for c in (alice, bob, narrow):
        await c.close()
