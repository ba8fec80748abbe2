"""The reporter's small HTTP client, against a real local server with each reply framing."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trainyard.launch.transport import connect, post_json


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        echo = json.dumps({"path": self.path, "body": body.decode(), "auth": self.headers.get("Authorization")})
        data = echo.encode()
        if self.path.startswith("/missing"):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path.startswith("/chunked"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (data[:5], data[5:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path.startswith("/peer"):  # which connection carried it
            data = json.dumps({"port": self.client_address[1]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif self.path.startswith("/close"):
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True
        else:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def base_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("prefix", ["", "/chunked", "/close"])
def test_reply_framings(base_url, prefix):
    status, data = post_json(base_url + prefix, "/internal/x", b'{"a": "\xc3\xa9"}', {"Authorization": "Bearer t"}, 5)
    assert status == 200
    assert json.loads(data) == {"path": f"{prefix}/internal/x", "body": '{"a": "é"}', "auth": "Bearer t"}


def test_status_is_returned(base_url):
    assert post_json(base_url + "/missing", "/x", b"{}", {}, 5) == (404, b"")


def test_refused_connection_raises_oserror():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(OSError):
        post_json(f"http://127.0.0.1:{port}", "/x", b"{}", {}, 2)


def test_https_trusts_the_servers_certificate_given_as_its_text(tmp_path):
    """A Ray node of its own root has no copy of the server's certificate file: the engine sends its text."""
    import shutil
    import ssl
    import subprocess

    from tests.conftest import need
    from trainyard.launch.config import LaunchConfig

    need(shutil.which("openssl") is not None, "needs openssl to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        config = LaunchConfig(job_id="j", attempt_id="a", attempt=1, server=url, command=["true"],
                              server_ca=str(cert))
        config.carry_ca()
        assert config.server_ca is None and config.server_ca_pem == cert.read_text()
        cert.unlink()  # what the node does not have
        status, data = post_json(url, "/x", b"{}", {}, 5, config.server_ca, config.server_ca_pem)
        assert status == 200 and json.loads(data)["path"] == "/x"
        with pytest.raises(ssl.SSLCertVerificationError):  # not trusted without it
            post_json(url, "/x", b"{}", {}, 5)
    finally:
        server.shutdown()
        server.server_close()


def test_a_connection_opened_ahead_carries_the_post_and_is_closed(base_url):
    kept = connect(base_url, 5)
    port = kept.getsockname()[1]
    status, data = post_json(base_url + "/peer", "/x", b"{}", {}, 5, kept=kept)
    assert status == 200 and json.loads(data) == {"port": port}
    assert kept.fileno() == -1


def test_a_connection_the_server_let_go_is_sent_again_on_a_new_one(base_url):
    """A server restarted (or closing idle connections) since: the report still goes, and the work done
    while the server answers (the launcher writes result.json then) runs once."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        kept = socket.create_connection(listener.getsockname(), timeout=5)
        conn, _ = listener.accept()
        conn.close()  # let go before any request
    calls = []
    status, data = post_json(base_url, "/x", b'{"n": 1}', {}, 5, sent=lambda: calls.append(1), kept=kept)
    assert status == 200 and json.loads(data)["body"] == '{"n": 1}'
    assert calls == [1]
    assert kept.fileno() == -1


def test_no_connection_ahead_for_https_or_a_server_not_there():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert connect(f"http://127.0.0.1:{port}", 2) is None
    assert connect("https://127.0.0.1:1", 2) is None
