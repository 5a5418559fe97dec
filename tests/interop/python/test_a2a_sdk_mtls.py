"""Interop: the Python a2a-sdk 1.3 client over mutual TLS (docs/auth.md "Authentication",
docs/serving.md "TLS"). A second a2a-edge serves TLS with a CA made here; its instance takes client
certificates, and each certificate is a principal of its own. The client's httpx transport presents
the certificate."""

import os
import socket
import ssl
import subprocess
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import grpc
from a2a.client import create_client
from a2a.types import GetTaskRequest, ListTasksRequest, TaskState
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from helpers import BINDINGS, message, secure_channel
from helpers import config as config_of


def issue(cn: str, ca=None, sans=(), usage=None):
    """A key and a certificate for `cn`, signed by `ca` (key, cert) or self-signed as a CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.now(timezone.utc)
    b = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca[1].subject if ca else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
    )
    if ca is None:
        b = b.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    else:
        b = b.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
        b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    cert = b.sign(ca[0] if ca else key, hashes.SHA256())
    return key, cert


def write(dir: Path, stem: str, key, cert):
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (dir / f"{stem}.pem").write_bytes(pem)
    (dir / f"{stem}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return dir / f"{stem}.pem", dir / f"{stem}.key"


@pytest.fixture(scope="module")
def site():
    """A TLS a2a-edge with an instance taking client certificates; the CA and a client's files."""
    dir = Path(tempfile.mkdtemp())
    ca = issue("interop CA")
    write(dir, "ca", *ca)
    import ipaddress

    server = issue(
        "localhost",
        ca,
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
        ExtendedKeyUsageOID.SERVER_AUTH,
    )
    write(dir, "server", *server)
    for who in ("alice", "bob"):
        write(dir, who, *issue(who, ca, (), ExtendedKeyUsageOID.CLIENT_AUTH))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (dir / "edge.toml").write_text(
        f"""
[tls]
certFile = "server.pem"
keyFile = "server.key"
clientCaFile = "ca.pem"

[[instances]]
id = "mtls"
name = "mtls"
description = "Scripted conformance agent behind client certificates"
preset = "scripted"
mtls = {{}}
"""
    )
    proc = subprocess.Popen(
        [
            os.environ["A2A_EDGE_BIN"],
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--control-listen",
            "127.0.0.1:0",
            "--data-dir",
            str(dir / "data"),
            "--config",
            str(dir / "edge.toml"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"https://localhost:{port}"
    for _ in range(100):
        try:
            httpx.get(f"{base}/a2a/mtls/agent-card.json", verify=ssl.create_default_context(cafile=dir / "ca.pem"))
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    yield dir, f"{base}/a2a/mtls"
    proc.kill()
    proc.wait()


async def client(site, who: str | None, binding: str):
    dir, agent = site
    tls = ssl.create_default_context(cafile=dir / "ca.pem")
    if who:
        tls.load_cert_chain(dir / f"{who}.pem", dir / f"{who}.key")
    http = httpx.AsyncClient(verify=tls)
    key, chain = (((dir / f"{who}.key").read_bytes(), (dir / f"{who}.pem").read_bytes()) if who else (None, None))
    credentials = grpc.ssl_channel_credentials((dir / "ca.pem").read_bytes(), key, chain)
    config = config_of(binding, httpx_client=http, grpc_channel_factory=secure_channel(credentials))
    return await create_client(agent, client_config=config, relative_card_path="/agent-card.json"), http


def test_the_card_announces_grpc_over_tls_as_an_https_url(site):
    dir, agent = site
    card = httpx.get(
        f"{agent}/agent-card.json",
        headers={"A2A-Version": "1.0"},
        verify=ssl.create_default_context(cafile=dir / "ca.pem"),
    ).json()
    urls = [urlsplit(i["url"]) for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"]
    assert [(u.scheme, u.port, u.path) for u in urls] == [("https", urlsplit(agent).port, "")], card["supportedInterfaces"]


@pytest.mark.asyncio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_client_certificate_names_the_caller_over_mutual_tls(site, binding):
    alice, alice_http = await client(site, "alice", binding)
    context_id = f"mtls-{uuid.uuid4()}"
    events = [ev async for ev in alice.send_message(message(context_id))]
    task = events[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    page = await alice.list_tasks(ListTasksRequest(context_id=context_id))
    assert [t.id for t in page.tasks] == [task.id]
    bob, bob_http = await client(site, "bob", binding)
    page = await bob.list_tasks(ListTasksRequest(context_id=context_id))
    assert list(page.tasks) == []
    with pytest.raises(Exception):
        await bob.get_task(GetTaskRequest(id=task.id))
    nobody, nobody_http = await client(site, None, binding)
    with pytest.raises(Exception, match="401|UNAUTHENTICATED"):
        await nobody.list_tasks(ListTasksRequest())
    for c, h in ((alice, alice_http), (bob, bob_http), (nobody, nobody_http)):
        await c.close()
        await h.aclose()
