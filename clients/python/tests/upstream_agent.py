"""A scripted model on loopback that speaks OpenAI's chat completions, tool calls included:
``scripted_model(brain)`` answers each request with what ``brain(messages)`` returns (a
message: text, or tool calls; :data:`FAIL` answers 500), and keeps every request body."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Brain = Callable[[list[dict[str, Any]]], dict[str, Any]]


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
            message = brain(body["messages"])
            if message is FAIL:
                self._send(500, {"error": {"message": "scripted failure", "type": "server_error"}})
                return
            answer = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
            self._send(200, answer)

        def _send(self, status: int, answer: dict[str, Any]) -> None:
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
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
