"""A loopback OpenAI-compatible model for the schemathesis run: `GET /v1/models` and
`POST /v1/chat/completions` (streamed as server-sent events when the request asks), each
answering a fixed text. Like OpenAI's API it refuses, with a 400 naming the field, a request
whose fields chatmem passes on unread do not have their types (`model` a string, `temperature` a
number, ...), the types the document declares for them. It prints `http://127.0.0.1:PORT/v1` on
its first line, then serves until it is terminated.

    python3 model.py
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "loopback-model"
ANSWER = "Noted."
INT32_MAX = 2**31 - 1


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _count(v: object) -> bool:
    return _number(v) and float(v).is_integer() and 0 <= v <= INT32_MAX  # type: ignore[operator]


# Each field chatmem forwards unread, and what OpenAI's API takes for it.
FIELDS = {
    "temperature": lambda v: v is None or _number(v),
    "top_p": lambda v: v is None or _number(v),
    "max_tokens": lambda v: v is None or _count(v),
    "max_completion_tokens": lambda v: v is None or _count(v),
    "stream_options": lambda v: v is None or isinstance(v, dict),
    "response_format": lambda v: v is None or isinstance(v, dict),
    "tools": lambda v: v is None or (isinstance(v, list) and all(isinstance(t, dict) for t in v)),
}


def refusal(request: dict[str, object]) -> str | None:
    """The field OpenAI's API would refuse in `request`, if any."""
    if not isinstance(request.get("model"), str):
        return "model"
    for field, ok in FIELDS.items():
        if field in request and not ok(request[field]):
            return field
    return None


class Model(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base's name)
        pass

    def _json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.rstrip("/") == "/v1/models":
            self._json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": MODEL, "object": "model", "created": 0, "owned_by": "chatmem"}
                    ],
                },
            )
        else:
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        try:
            request = json.loads(raw)
        except ValueError:
            request = {}
        if not isinstance(request, dict):
            request = {}
        field = refusal(request)
        if field is not None:
            error = {"message": f"invalid `{field}`", "type": "invalid_request_error", "param": field}
            self._json(400, {"error": {**error, "code": None}})
            return
        model = request["model"]
        created = int(time.time())
        usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        if request.get("stream") is True:
            self._stream(model, created, usage, request.get("stream_options"))
            return
        self._json(
            200,
            {
                "id": "chatcmpl-loopback",
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": ANSWER},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": usage,
            },
        )

    def _stream(self, model: str, created: int, usage: dict[str, int], options: object) -> None:
        def chunk(choices: list[object], **extra: object) -> bytes:
            body = {
                "id": "chatcmpl-loopback",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": choices,
                **extra,
            }
            return f"data: {json.dumps(body)}\n\n".encode()

        events = [
            chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]),
            chunk([{"index": 0, "delta": {"content": ANSWER}, "finish_reason": None}]),
            chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
        ]
        if isinstance(options, dict) and options.get("include_usage") is True:
            events.append(chunk([], usage=usage))
        events.append(b"data: [DONE]\n\n")
        data = b"".join(events)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
