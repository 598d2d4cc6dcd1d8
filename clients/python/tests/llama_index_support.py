"""A scripted loopback model for the LlamaIndex agent tests: an HTTP server speaking OpenAI's
chat completions (plain and streamed, with tool calls) whose answers depend only on the
messages it receives, so a test shows what the model was given.

Its script, an after-sale desk:

- the last message a tool result: it answers with that result;
- the last user message asks about shipping and names an order: it calls ``order_status``;
- the last user message asks for a refund: it calls ``refund`` with the order number found in
  the messages it received (without tools, it says that order can be refunded), and asks
  which order when there is none;
- anything else: it echoes the user's text.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ORDER = re.compile(r"LC\d{12}")


@dataclass
class Model:
    """A running scripted model: its ``/v1`` base URL and every request body it received."""

    base_url: str
    received: list[dict[str, Any]] = field(default_factory=list)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def answer(messages: list[dict[str, Any]], tools: bool) -> dict[str, Any]:
    """The assistant message the script answers ``messages`` with (``tools``: it was
    offered tools)."""
    last = messages[-1]
    if last["role"] == "tool":
        return {"role": "assistant", "content": f"查询结果：{_text(last)}"}
    user = next(_text(m) for m in reversed(messages) if m["role"] == "user")
    if "退款" in user:
        seen = ORDER.search(json.dumps(messages, ensure_ascii=False))
        if seen is None:
            return {"role": "assistant", "content": "请问是哪个订单？"}
        if not tools:
            return {"role": "assistant", "content": f"订单 {seen.group()} 可以退款。"}
        return _call("refund", {"order_id": seen.group()})
    named = ORDER.search(user)
    if "发货" in user and named is not None and tools:
        return _call("order_status", {"order_id": named.group()})
    return {"role": "assistant", "content": f"收到：{user}"}


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{name}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


class _Handler(BaseHTTPRequestHandler):
    model: Model

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.model.received.append(body)
        message = answer(body["messages"], bool(body.get("tools")))
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        base = {"id": "chatcmpl-1", "created": 1_700_000_000, "model": body["model"]}
        if not body.get("stream"):
            self._send(
                "application/json",
                json.dumps(
                    {
                        **base,
                        "object": "chat.completion",
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    }
                ).encode(),
            )
            return
        delta: dict[str, Any] = {"role": "assistant", "content": message["content"]}
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
        self._send("text/event-stream", events + b"data: [DONE]\n\n")

    def _send(self, kind: str, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def scripted_model() -> Iterator[Model]:
    """Serves the script on a free loopback port for the ``with`` block."""
    model = Model("")
    handler = type("Handler", (_Handler,), {"model": model})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    model.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield model
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
