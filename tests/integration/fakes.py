"""Small local HTTP servers that misbehave on purpose (loopback only, stopped by the test)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _http_body(name: str) -> bytes:
    """The body of a captured HTTP response (headers end at the first blank line, CRLF or LF)."""
    raw = (FIXTURES / name).read_bytes().replace(b"\r\n", b"\n")
    return raw.split(b"\n\n", 1)[1]


def _first_chunk() -> bytes:
    text = (FIXTURES / "completion-ngram-simple.sse").read_bytes()
    return text.split(b"\n\n")[0] + b"\n\n"


@contextmanager
def serve(kind: str) -> Iterator[str]:
    """Serve on a free loopback port; ``kind``: 'stall' (a llama-server whose stream hangs after
    one token) or 'not-llama' (a plain web page everywhere). Yields the base URL."""
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, kind_: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind_)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if kind == "not-llama":
                self._send(200, b"<html><body>hello</body></html>", "text/html")
            elif self.path == "/health":
                self._send(200, b'{"status":"ok"}', "application/json")
            elif self.path == "/props":
                self._send(200, (FIXTURES / "props.json").read_bytes(), "application/json")
            else:
                self._send(404, _http_body("error-404.http"), "application/json")

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if kind == "not-llama":
                self._send(405, b"<html>method not allowed</html>", "text/html")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(_first_chunk())
            self.wfile.flush()
            release.wait(60)  # then stall: no byte until the test ends

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release.set()
        server.shutdown()
        server.server_close()
