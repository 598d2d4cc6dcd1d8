"""One loopback JSON server for the bench's stand-ins (an embeddings proxy, a facts model)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def json_server(answer):
    """A server on a free 127.0.0.1 port, serving in a thread of its own, that answers every
    POST with `answer(the request's JSON)` as JSON. Stop it with `.shutdown()`; its port is
    `.server_address[1]`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = json.dumps(answer(json.loads(self.rfile.read(n) or b"{}"))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
