"""A recording upstream for the guard's tests: every request's path and body
kept byte for byte as the upstream got it, then relayed to a real server of
its protocol (the session's Switchboard, whose echo model answers and calls
tools) and its reply streamed back as it comes. So a test reads exactly
what a hosted model would have been sent, and the agent gets a real reply."""
from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

_PASSED_HEADERS = ("content-type", "authorization", "x-api-key", "anthropic-version", "anthropic-beta",
                   "x-goog-api-key")


class RecordingRelay:
    def __init__(self, target: str):
        self.requests: list[dict] = []  # {"path", "body": bytes}
        self._lock = threading.Lock()
        relay, where = self, urlparse(target)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # a health probe
                self._relay(b"")

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with relay._lock:
                    relay.requests.append({"path": self.path, "body": body})
                self._relay(body)

            def _relay(self, body: bytes):
                upstream = http.client.HTTPConnection(where.hostname, where.port, timeout=120)
                headers = {k: v for k, v in self.headers.items() if k.lower() in _PASSED_HEADERS}
                upstream.request(self.command, self.path, body=body or None, headers=headers)
                reply = upstream.getresponse()
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.getheader("Content-Type", "application/json"))
                self.end_headers()  # (HTTP/1.0: the body ends when the connection closes)
                while chunk := reply.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                upstream.close()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def sent(self, since: int = 0) -> str:
        """Every body the upstream got (from the `since`-th request on), as one text."""
        with self._lock:
            return "\n".join(r["body"].decode(errors="replace") for r in self.requests[since:])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
