"""An address file left behind by a server that is gone (killed, the machine restarted) is not followed
to whatever listens on its port now: only a server that holds the home is the home's server."""

import fcntl
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trainyard.home import LOCK_FILE
from trainyard.locations import ADDRESS_FILE
from trainyard.sdk.discovery import local_server_url


class Healthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args) -> None:  # noqa: ANN002
        pass


@pytest.fixture
def other_program():
    """Something else on the old port that answers ``/healthz`` (another user's server, say)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_address_no_server_holds_the_home_for_is_not_followed(tmp_path, other_program):
    (tmp_path / ADDRESS_FILE).write_text(json.dumps({"url": other_program, "pid": 999999, "port": 1}))
    assert local_server_url(tmp_path) is None
    with open(tmp_path / LOCK_FILE, "w") as lock:  # as a live server holds it
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert local_server_url(tmp_path) == other_program
