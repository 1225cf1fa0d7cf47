"""A small OpenAI/Anthropic-style HTTP server on 127.0.0.1 for API comparator tests.

It checks the API key header, records every request body, and can be told to fail the next
requests (an HTTP status, or a body that is not the expected JSON).
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StubAPI:
    """Start with ``with StubAPI(key) as api: ...``; ``api.url`` is the endpoint."""

    def __init__(self, key: str, texts=("the fox sang", "a quiet robot waited all day")):
        self.key = key
        self.texts = list(texts)
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.failures: list = []  # queue of int status codes or "malformed"
        self.counter = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                return

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                stub.requests.append(body)
                stub.headers.append({k.lower(): v for k, v in self.headers.items()})
                if stub.failures:
                    failure = stub.failures.pop(0)
                    if failure == "malformed":
                        return self._send(200, b"<html>this is not json</html>")
                    return self._send(failure, b'{"error": "injected"}')
                if not stub._authorized(self.headers):
                    return self._send(401, b'{"error": "bad key"}')
                return self._send(200, json.dumps(stub._answer(self.path, body)).encode())

            def _send(self, status, payload):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url_base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _authorized(self, headers) -> bool:
        return (
            headers.get("Authorization") == f"Bearer {self.key}"
            or headers.get("x-api-key") == self.key
        )

    def _next_text(self) -> str:
        self.counter += 1
        return (
            f"{self.texts[self.counter % len(self.texts)]} {'more ' * (self.counter % 3)}".strip()
        )

    def _answer(self, path, body):
        if path.endswith("/messages"):
            return {"content": [{"type": "text", "text": self._next_text()}]}
        if path.endswith("/responses"):
            return {"output": [{"content": [{"type": "output_text", "text": self._next_text()}]}]}
        if path.endswith("/generate"):
            n = body.get("num_return_sequences", 1)
            return {"completions": [{"text": self._next_text()} for _ in range(n)]}
        n = body.get("n", 1)
        return {"choices": [{"message": {"content": self._next_text()}} for _ in range(n)]}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
