"""A local webhook receiver for the tests: verifies every delivery's signature, can fail on purpose."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from app.webhooks.signing import WebhookVerificationError, verify


@dataclass
class Receiver:
    """Collects ``(webhook-id, event)`` of verified deliveries; answers 500 to the first ``fail_first``."""

    secret: str = ""
    fail_first: int = 0
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    rejected: int = 0
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, body: bytes, headers: dict[str, str]) -> int:
        with self.lock:
            self.requests += 1
            if self.requests <= self.fail_first:
                return 500
            try:
                event = verify(body, headers, self.secret)
            except WebhookVerificationError:
                self.rejected += 1
                return 400
            self.received.append((headers.get("webhook-id", headers.get("Webhook-Id", "")), event))
            return 204

    def events(self) -> list[str]:
        with self.lock:
            return [e["type"] for _, e in self.received]


def serve(receiver: Receiver) -> tuple[ThreadingHTTPServer, str]:
    """Start an HTTP server on 127.0.0.1 (a free port) in a daemon thread; returns it and its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            status = receiver.handle(body, dict(self.headers.items()))
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/hook"
