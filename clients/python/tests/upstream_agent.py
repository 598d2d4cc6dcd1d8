"""The scripted model of the agent tests, on loopback, speaking OpenAI's chat completions
(plain and streamed, tool calls included): ``scripted_model(brain)`` answers each request with
what ``brain(request)`` returns (a message: text, or tool calls; :data:`FAIL` answers 500), and
keeps every request body."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Brain = Callable[[dict[str, Any]], dict[str, Any]]
"""What answers a request (its whole body: ``messages``, ``tools``, ``stream``...)."""


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def says(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant message calling each ``(name, arguments)``, with new ids."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
            }
            for name, args in calls
        ],
    }


_ids = itertools.count(1)

FAIL: dict[str, Any] = {"fail": 500}
"""What a brain returns for the model to answer this request with a server error."""


class ScriptedModel:
    """The model's ``base_url`` (for ``ChatOpenAI``) and the requests it received."""

    def __init__(self, base_url: str, received: list[dict[str, Any]]) -> None:
        self.base_url = base_url
        self.received = received

    def prompts(self) -> list[list[dict[str, Any]]]:
        """The messages of every request, in order."""
        return [r["messages"] for r in self.received]


def _events(base: dict[str, Any], message: dict[str, Any], finish: str) -> bytes:
    """``message`` as a stream: one delta with all of it, one with the finish, ``[DONE]``."""
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    chunks = [
        {"index": 0, "delta": delta, "finish_reason": None},
        {"index": 0, "delta": {}, "finish_reason": finish},
    ]
    events = b"".join(
        b"data: "
        + json.dumps({**base, "object": "chat.completion.chunk", "choices": [c]}).encode()
        + b"\n\n"
        for c in chunks
    )
    return events + b"data: [DONE]\n\n"


@contextmanager
def scripted_model(brain: Brain) -> Iterator[ScriptedModel]:
    received: list[dict[str, Any]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                received.append(body)
                n = len(received)
            message = brain(body)
            if message is FAIL:
                error = {"error": {"message": "scripted failure", "type": "server_error"}}
                self._send(500, "application/json", json.dumps(error).encode())
                return
            finish = "tool_calls" if message.get("tool_calls") else "stop"
            base = {"id": f"chatcmpl-{n}", "created": 1_700_000_000, "model": body["model"]}
            if body.get("stream"):
                self._send(200, "text/event-stream", _events(base, message, finish))
                return
            answer = {
                **base,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
            self._send(200, "application/json", json.dumps(answer).encode())

        def _send(self, status: int, kind: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ScriptedModel(f"http://127.0.0.1:{server.server_address[1]}/v1", received)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
