"""Each test session starts real ``chatmem serve`` processes (the binary ``CHATMEM_BIN`` names):
one over SQLite, and one over PostgreSQL when ``CHATMEM_TEST_PG_URL`` is set (skipped, with
the reason, otherwise). Both run with ``--auth``: two tenants whose names are new each session,
so runs that share a PostgreSQL database never see each other's conversations or users' facts.
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from chatmem import AsyncClient, Client


@dataclass(frozen=True)
class Server:
    """A running ``chatmem serve``: its URL, and one bearer token per tenant."""

    backend: str
    url: str
    token_a: str
    token_b: str

    def client(self, token: str | None = None) -> Client:
        """A client of tenant A (or of ``token``'s tenant)."""
        return Client(self.url, token=token or self.token_a, timeout=10.0)


def _start(store: str, auth: Path, log: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    """Starts ``chatmem serve`` on a free loopback port; returns it and its URL once
    ``/healthz`` answers. Its stderr (where it reports its address) goes on to ``log``."""
    binary = os.environ.get("CHATMEM_BIN")
    if not binary:
        pytest.fail(
            "CHATMEM_BIN is not set: the path of the chatmem binary (cargo build -p chatmem-cli)"
        )
    env = {k: v for k, v in os.environ.items() if k not in ("CHATMEM_STORE", "RUST_LOG")}
    env["CHATMEM_UPSTREAM_API_KEY"] = "test-upstream-key"
    proc = subprocess.Popen(
        [
            binary,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            store,
            "--auth",
            str(auth),
            "--retention",
            "keep-history",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    found: queue.Queue[str] = queue.Queue()

    def drain() -> None:  # "chatmem: serving conversation memory on http://127.0.0.1:PORT"
        assert proc.stderr is not None
        with log.open("wb") as out:
            for line in proc.stderr:
                out.write(line)
                out.flush()
                address = re.search(rb"serving .* on (http://127\.0\.0\.1:\d+)", line)
                if address:
                    found.put(address.group(1).decode())

    threading.Thread(target=drain, daemon=True).start()
    try:
        url = found.get(timeout=30)
    except queue.Empty:
        proc.kill()
        pytest.fail(f"chatmem serve did not report its address: {log.read_text()}")
    deadline = time.monotonic() + 20
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail(f"chatmem serve did not come up: {log.read_text()}")
        time.sleep(0.05)


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A ``chatmem serve`` over the parameter's store, stopped (SIGTERM) at the end."""
    backend: str = request.param
    with tempfile.TemporaryDirectory() as tmp:
        if backend == "sqlite":
            store = f"sqlite:{tmp}/chatmem.db"
        else:
            pg = os.environ.get("CHATMEM_TEST_PG_URL")
            if not pg:
                pytest.skip("CHATMEM_TEST_PG_URL is not set (postgres://USER@HOST:PORT/DATABASE)")
            store = pg
        run = uuid.uuid4().hex[:12]
        token_a, token_b = secrets.token_hex(16), secrets.token_hex(16)
        auth = Path(tmp, "tokens.toml")
        auth.write_text(
            f'[[token]]\ntoken = "{token_a}"\ntenant = "py-a-{run}"\n\n'
            f'[[token]]\ntoken = "{token_b}"\ntenant = "py-b-{run}"\n'
        )
        log = Path(tmp, "serve.log")
        # --facts: a turn naming its user is sent their facts (one naming none is not).
        proc, url = _start(store, auth, log, "--facts")
        try:
            yield Server(backend, url, token_a, token_b)
            for token in (token_a, token_b):  # leave nothing behind in a shared database
                with Client(url, token=token) as c:
                    for conversation in list(c.iter_conversations()):
                        c.delete_conversation(conversation)
        finally:
            proc.terminate()
            code = proc.wait(timeout=30)
            assert code == 0, f"chatmem serve exited {code}: {log.read_text()}"


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    """Tenant A's client."""
    with server.client() as c:
        yield c


@pytest.fixture
async def aclient(server: Server) -> AsyncIterator[AsyncClient]:
    """Tenant A's async client."""
    async with AsyncClient(server.url, token=server.token_a, timeout=10.0) as c:
        yield c


@pytest.fixture
def conversation() -> str:
    """A new conversation id, with a ``/`` in it (sent as ``%2F``)."""
    return f"user/{uuid.uuid4().hex}"


@pytest.fixture
def anyio_backend() -> str:
    """The async tests run on asyncio."""
    return "asyncio"


class _Upstream(BaseHTTPRequestHandler):
    """A loopback model speaking OpenAI's chat completions: it records each request body and
    answers whether the order number was among the messages it received."""

    received: ClassVar[list[dict[str, Any]]] = []

    def do_GET(self) -> None:
        self._answer({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append(body)
        seen = "LC202610060018" in json.dumps(body["messages"], ensure_ascii=False)
        text = "LC202610060018 未发货，可以退。" if seen else "请提供订单号。"
        self._answer(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
            }
        )

    def _answer(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass(frozen=True)
class Proxy:
    """A ``chatmem serve`` in front of the loopback model, and what that model received."""

    server: Server
    received: list[dict[str, Any]]


def _proxy(*extra: str) -> Iterator[Proxy]:
    """``chatmem serve --upstream-base-url`` (in-memory store, ``extra`` flags) before a
    loopback model."""
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{upstream.server_address[1]}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        token = secrets.token_hex(16)
        auth = Path(tmp, "tokens.toml")
        auth.write_text(f'[[token]]\ntoken = "{token}"\ntenant = "proxy"\n')
        log = Path(tmp, "serve.log")
        proc, url = _start("memory:", auth, log, "--upstream-base-url", base, *extra)
        try:
            yield Proxy(Server("memory", url, token, token), _Upstream.received)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            upstream.shutdown()


@pytest.fixture(scope="session")
def proxy() -> Iterator[Proxy]:
    """``chatmem serve --upstream-base-url`` (in-memory store) before a loopback model."""
    yield from _proxy()


@pytest.fixture(scope="session")
def facts_proxy() -> Iterator[Proxy]:
    """:func:`proxy` sending each named user's facts with their turns (``--facts``)."""
    yield from _proxy("--facts")


@pytest.fixture(scope="session")
def recalling() -> Iterator[Proxy]:
    """:func:`proxy` recalling up to 3 messages, with a window of 2."""
    yield from _proxy("--recall", "3", "--max-messages", "2")


FACTS_HEADING = "What is known about the user (kept across conversations):"
"""The first line of the message a user's facts are sent in (``chatmem::facts::FACTS_HEADING``)."""
FACT = "Allergic to nuts"
"""The fact the ``user`` fixture's user has."""
FACTS = f"{FACTS_HEADING}\n- {FACT}"
"""The facts message the ``user`` fixture's user is sent."""


@pytest.fixture
def user(server: Server) -> Iterator[str]:
    """A new user of tenant A with one fact (:data:`FACT`) added by hand; forgotten after the
    test."""
    uid = f"ada/{uuid.uuid4().hex}"
    with server.client() as c:
        c.add_fact(uid, FACT)
    yield uid
    with server.client() as c:
        c.forget_user(uid)
