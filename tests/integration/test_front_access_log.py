"""The nginx front's access log, read from a real nginx (skipped without one, required on CI): each request it
answers reaches the callback and Traffic; lines of any other form are dropped; ServingService.front_request
writes a live service's demand down for the autoscaler."""

from __future__ import annotations

import os
import queue
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import need
from tests.support.model_server import free_port
from tests.support.waiting import until
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.front.access_log import MAX_DATAGRAM, AccessLog
from trainyard.services.platform import Platform
from trainyard.services.service_traffic import WINDOW, Traffic
from trainyard.spec.records import NodeInfo
from trainyard.spec.service import ServiceSpec

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
CONF = """{user}
worker_processes 1;
pid {prefix}/nginx.pid;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  map $uri $ty_name {{ "~^/serve/(?<ty>[^/]+)/" $ty; default ""; }}
  log_format trainyard_serve '$ty_name $status $request_time $msec';
  server {{
    listen 127.0.0.1:{port};
    access_log syslog:server=unix:{sock},nohostname,tag=trainyard trainyard_serve;
    location ~ ^/serve/[^/]+/fail {{ return 503; }}
    location /serve/ {{ return 200 "ok"; }}
  }}
}}
"""


@pytest.fixture
def folder():
    """A private folder short enough for a unix socket's path (under 108 bytes)."""
    path = tempfile.mkdtemp(prefix="ty-", dir="/tmp")
    yield Path(path)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def told(folder):
    """An AccessLog at ``folder/log.sock`` whose lines go to a Traffic and to a queue the test reads."""
    lines: queue.Queue = queue.Queue()
    traffic = Traffic()

    def on_request(name: str, status: int, seconds: float, ended_at: float) -> None:
        traffic.observed(name, status, seconds, ended_at)
        lines.put((name, status, seconds, ended_at))

    access = AccessLog(str(folder / "log.sock"), on_request)
    yield access, lines, traffic
    access.close()


@pytest.fixture
def nginx(folder, told):
    """A real nginx on a free port whose /serve/NAME/ lines go to ``told``'s socket; its base URL."""
    need(os.access(NGINX, os.X_OK), "nginx is not installed (apt-get install nginx-light)")
    port = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(CONF.format(user="user root;" if os.geteuid() == 0 else "", prefix=folder, port=port,
                                sock=folder / "log.sock"))
    errors = folder / "error.log"
    proc = subprocess.Popen([NGINX, "-p", str(folder), "-c", str(conf), "-e", str(errors), "-g", "daemon off;"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        until(lambda: _listening(port) or proc.poll() is not None, timeout=10)
        assert proc.poll() is None, errors.read_text()
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_each_request_nginx_answers_reaches_the_callback_and_traffic(nginx, told):
    _, lines, traffic = told

    # when nginx answers three requests to two services, one of them a 503
    with httpx.Client(base_url=nginx) as client:
        assert client.get("/serve/web/a").status_code == 200
        assert client.get("/serve/web/fail").status_code == 503
        assert client.get("/serve/chat.v2/b").status_code == 200
    seen = [lines.get(timeout=5) for _ in range(3)]

    # then each is told in order, with its status, a time of its own and an end of just now
    assert [(name, status) for name, status, _, _ in seen] == [("web", 200), ("web", 503), ("chat.v2", 200)]
    for _, _, seconds, ended_at in seen:
        assert 0 <= seconds < 1 and abs(ended_at - time.time()) < 5
    web = traffic.snapshot("web")
    assert (web.requests, web.errors, web.p50_ms is not None) == (2, 1, True)
    assert traffic.last_request_at("chat.v2") == seen[2][3]


def test_a_slow_request_tells_its_length_and_counts_as_in_flight(nginx, told):
    _, lines, traffic = told

    # when a client takes 0.4 s to send its request's headers
    host, port = nginx.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"GET /serve/slow/ HTTP/1.1\r\n")
        time.sleep(0.4)
        s.sendall(b"Host: x\r\nConnection: close\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 200")

    # then nginx's time counts from its first byte, and the service had that much over the window in flight
    name, status, seconds, _ = lines.get(timeout=5)
    assert (name, status) == ("slow", 200) and 0.35 <= seconds < 2
    assert traffic.in_flight("slow") == pytest.approx(seconds / WINDOW, rel=0.1)


def test_lines_of_any_other_form_are_dropped_and_the_next_good_one_is_still_read(folder, told):
    access, lines, traffic = told
    good = b"<190>Dec  1 23:01:56 trainyard: web 200 0.012 1796166116.894"
    garbage = [
        b"", b"hello", b"\xff\xfe" + bytes(range(256)),
        good.replace(b"trainyard:", b"nginx:"),  # another tag
        good.replace(b"<190>", b""),  # no syslog header
        good + b"\n", good + b" " * MAX_DATAGRAM, b"x" * 60_000,  # more than a line of ours
        good.replace(b"0.012", b"-0.012"), good.replace(b"0.012", b"nan"), good.replace(b"0.012", b"inf"),
        good.replace(b"0.012", b"1e3"), good.replace(b"1796166116.894", b"1" * 40 + b".000"),
        good.replace(b" 200 ", b" 20x "), good.replace(b" 200 ", b" 2000 "),
        good.replace(b" web ", b" -web "), good.replace(b" web ", b" a/b "), good.replace(b" web ", b" - "),
        good.replace(b" web ", b" " + b"w" * 64 + b" "), good.replace(b" web ", b" we\\x22b "),
    ]

    # when each is sent straight to the socket, then a good line
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        for data in [*garbage, good]:
            s.sendto(data, access.path)

    # then only the good one is told, and each other one is counted as dropped
    assert lines.get(timeout=5) == ("web", 200, 0.012, 1796166116.894)
    assert lines.empty() and access.dropped == len(garbage) and access.received == len(garbage) + 1
    assert traffic.snapshot("web").requests == 1


def test_a_failing_callback_is_counted_and_the_next_line_still_read(folder):
    # given an access log whose callback fails on its first line
    lines: queue.Queue = queue.Queue()
    access = AccessLog(str(folder / "log.sock"), lambda *a: lines.put(a) if a[0] != "bad" else 1 / 0)
    try:
        # when a line it fails on comes, then one it takes
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            for name in (b"bad", b"web"):
                s.sendto(b"<190>Dec  1 23:01:56 trainyard: " + name + b" 200 0.000 1.000", access.path)
        # then the second is told all the same
        assert lines.get(timeout=5)[0] == "web" and access.failed == 1
    finally:
        access.close()


def test_a_stale_socket_is_replaced_and_close_stops_at_once_and_removes_it(folder):
    # given a socket file a server gone left behind, and a regular file of someone else's
    path = folder / "log.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as stale:
        stale.bind(str(path))
    other = folder / "not-a-socket"
    other.write_text("mine")

    # when an access log binds each path: the socket's is replaced (mode 0600), the file's refused and kept
    access = AccessLog(str(path), lambda *a: None)
    assert path.is_socket() and path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(OSError):
        AccessLog(str(other), lambda *a: None)
    assert other.read_text() == "mine"

    # then close stops its thread at once and removes its socket
    began = time.monotonic()
    access.close()
    assert time.monotonic() - began < 1 and not access._thread.is_alive() and not path.exists()
    access.close()


def test_front_request_counts_and_writes_a_live_services_demand_and_only_counts_an_unknown_name(tmp_path):
    # given a platform on SQLite with a live service
    nodes = [NodeInfo(name="a", cpu=4, memory=16 * 2**30, gpu=0, gpu_type=None, gpu_ids=[])]
    platform = Platform(ServerSettings(home=tmp_path / "home", db=f"sqlite:///{tmp_path / 'ty.db'}", token="s3cret"),
                        engine=FakeEngine(nodes))
    serving = platform.serving
    try:
        serving.apply(ServiceSpec.model_validate(
            {"name": "web", "command": ["python", "app.py"], "service": {"autoscale": {"min": 0, "max": 2}}}))
        assert serving.services.find("web")["demand_at"] is None

        # when the front tells of a request to it
        ended = time.time()
        serving.front_request("web", 502, 0.25, ended)

        # then it is counted, and its demand written down for the leader's autoscaler
        traffic = serving.get("web").traffic
        assert (traffic.requests, traffic.errors, traffic.last_request_at) == (1, 1, ended)
        assert abs(serving.services.find("web")["demand_at"] - time.time()) < 5

        # and a line naming no live service is only counted: no error, no traffic entry
        serving.front_request("nope", 200, 0.1, ended)
        assert serving.front_unknown == 1 and serving.traffic.snapshot("nope").requests == 0
    finally:
        platform.store.close()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False
