"""A homeserver that answers its versions and then never again: ``mindroom run`` still stops on
SIGTERM while logging in."""

from __future__ import annotations

import json
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.integration.test_startup import start_run, stop_run


class StuckHomeserver(ThreadingHTTPServer):
    """Answers the versions endpoint; every other request hangs until the server closes."""

    daemon_threads = True

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self) -> None:
                server.paths.append(self.path)
                if self.path.startswith("/_matrix/client/versions"):
                    body = json.dumps({"versions": ["v1.11"]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                server.release.wait(60)

            do_GET = do_POST = do_PUT = _answer

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def test_run_stops_on_sigterm_while_logging_in_to_a_homeserver_that_never_answers(
    tmp_path: Path,
) -> None:
    server = StuckHomeserver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        proc, log = start_run(tmp_path, server.url)
        try:
            deadline = time.monotonic() + 60
            # wait until an account request (register or login) is in flight and stuck
            while not any("versions" not in p for p in server.paths):
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
        finally:
            code = stop_run(proc, signal.SIGTERM)
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
    text = log.read_text()
    assert code == 0, text
    assert "stopping" in text
    assert "cannot reach the homeserver" not in text  # it did answer
