"""The server with nginx in front (``trainyard server --front nginx``): the services' own tests through it, the fast
path's requests as a replica sees them, what goes to the Python server instead, and nginx's life with the server's.

Which way a request went shows at the replica (tests/support/replica_app.py ``/whoami`` keeps the headers in the
order sent): nginx writes its own headers (the replica's token first) before the caller's, the Python hop after."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import threading
import time

import httpx
import psutil
import pytest

from tests.conftest import need
from tests.e2e.helpers import until
from tests.e2e.test_server_flags import refused, server as server_cli
from tests.e2e.test_services import (  # noqa: F401 (collected again here, on this module's server)
    spec, test_a_cold_start_that_takes_too_long_answers_503_with_retry_after,
    test_a_replica_killed_mid_traffic_is_replaced_and_requests_to_the_other_succeed,
    test_a_rollout_keeps_answering_and_ends_with_only_new_replicas,
    test_a_service_scales_from_zero_on_a_request_and_back_to_zero_when_idle,
    test_a_websocket_through_the_proxy_cold_starts_echoes_both_ways_and_passes_close_codes,
    test_two_replicas_answer_through_one_address_with_the_path_stripped_the_token_kept_and_bodies_streamed,
    test_with_auth_a_service_is_its_teams_only)
from tests.support.certs import self_signed
from tests.support.servers import ServerProcess
from trainyard.spec.service import ServiceInfo

pytestmark = pytest.mark.slow
ARGS = ["--cpus", "4", "--memory", "8Gi", "--container-runtime", "none", "--front", "nginx"]


def nginx_installed() -> None:
    need(shutil.which("nginx") is not None or os.access("/usr/sbin/nginx", os.X_OK),
         "nginx is not installed (apt-get install nginx-light)")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    nginx_installed()
    srv = ServerProcess(tmp_path_factory.mktemp("front") / "home", ARGS)
    srv.start()
    yield srv
    srv.stop_all()


@pytest.fixture
def auth_server(tmp_path):
    """test_services.py's server with users, nginx in front (its teams test runs here too)."""
    nginx_installed()
    srv = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "2", "--memory", "4Gi", "--container-runtime", "none",
                                            "--front", "nginx"])
    srv.start()
    yield srv
    srv.stop_all()


def nginx_of(srv: ServerProcess) -> list[psutil.Process]:
    return [p for p in psutil.Process(srv.proc.pid).children(recursive=True) if p.name() == "nginx"]


def workers(srv: ServerProcess) -> list[int]:
    """nginx's worker processes ([] while one is going or coming)."""
    try:
        return [p.pid for p in nginx_of(srv) if "worker" in " ".join(p.cmdline())]
    except psutil.NoSuchProcess:
        return []


def fast(srv: ServerProcess, name: str) -> bool:
    """Whether a request to the service went nginx's fast way (its routes reach nginx up to half a second after
    a replica's readiness does)."""
    r = httpx.get(f"{srv.url}/serve/{name}/whoami", headers=srv.headers, timeout=30)
    return r.status_code == 200 and went_fast(r.json())


def ready_fast(srv: ServerProcess, name: str, **job) -> ServiceInfo:
    """Service ``name`` of one replica (test_services.py's app), ready and taken by nginx's fast path."""
    srv.client().services.apply(spec(name, {"replicas": 1}, **job))
    info = srv.client().services.wait_ready(name, 1, timeout=60)
    until(lambda: fast(srv, name), timeout=10)
    return info


def went_fast(seen: dict) -> bool:
    return list(seen["headers"])[:2] == ["host", "x-trainyard-service-token"]


def test_the_fast_path_sends_the_replica_its_own_token_its_address_and_the_raw_path(server):
    client = server.client()
    # CHECK_TOKEN: the replica answers only a request with its own token, as a user's service may
    info = ready_fast(server, "fast", env_vars={"CHECK_TOKEN": "1"})
    address = info.replicas[0].address

    r = httpx.get(server.url + "/serve/fast/whoami?x=1&y=a%2Fb%20c", timeout=30,
                  headers={**server.headers, "X-Forwarded-For": "6.6.6.6", "X-Forwarded-Host": "evil.example"})
    assert r.status_code == 200, r.text
    seen = r.json()
    assert went_fast(seen) and seen["headers"]["host"] == address
    assert seen["path"] == "/whoami?x=1&y=a%2Fb%20c"  # as the caller wrote it, not decoded
    names = {k.lower(): v for k, v in seen["headers"].items()}
    assert "authorization" not in names and names["x-forwarded-prefix"] == "/serve/fast"
    # the caller's X-Forwarded-For extended (as the Python hop does), what the proxy itself says set anew
    assert names["x-forwarded-for"] == "6.6.6.6, 127.0.0.1" and names["x-forwarded-proto"] == "http"
    assert names["x-forwarded-host"] == server.url.removeprefix("http://")
    assert r.headers["server"] == "nginx" and len(r.headers.get_list("date")) == 1
    # a caller's other claims of what a proxy says never reach the replica: those in common use dropped by nginx,
    # one of any other name the Python way, which drops them all
    for claim, fast_way in (({"X-Forwarded-Port": "1"}, True), ({"x-forwarded-user": "admin"}, True),
                            ({"Forwarded": "for=6.6.6.6"}, True), ({"X-Real-IP": "6.6.6.6"}, True),
                            ({"X-Forwarded-Tenant": "other"}, False), ({"x-forwarded-for-real": "6.6.6.6"}, False)):
        seen = httpx.get(server.url + "/serve/fast/whoami", headers={**server.headers, **claim}, timeout=30).json()
        assert went_fast(seen) == fast_way and not {k.lower() for k in claim} & {k.lower() for k in seen["headers"]}, \
            claim

    # a service may not set the server's sign-in cookie nor widen a service worker, the fast way as the other
    cookies = httpx.get(server.url + "/serve/fast/cookies", headers=server.headers)
    assert cookies.headers.get_list("set-cookie") == ["session=abc; Path=/serve/echo/"]
    assert "service-worker-allowed" not in cookies.headers
    # a Host not of loopback (a page whose name now points here: DNS rebinding) is refused, the fast way too
    assert httpx.get(server.url + "/serve/fast/whoami", headers={**server.headers, "Host": "evil.example"}
                     ).status_code == 421
    # a cookie (a browser's) goes to the Python server, which answers the same
    python = httpx.get(server.url + "/serve/fast/whoami", headers={**server.headers, "Cookie": "a=b"}, timeout=30)
    assert python.status_code == 200 and not went_fast(python.json()) and python.json()["headers"]["host"] == address
    assert python.json()["headers"]["cookie"] == "a=b"
    assert python.json()["headers"]["x-forwarded-for"] == "127.0.0.1"  # read from nginx's header, not added twice
    # another token, or none: the Python server's refusal, never the replica's
    for headers in ({"Authorization": "Bearer " + "x" * 43}, {}):
        assert httpx.get(server.url + "/serve/fast/whoami", headers=headers).status_code == 401
    # counted as the Python hop counts its own (nginx's access log, read by the server)
    counted = client.services.get("fast").traffic.requests
    httpx.get(server.url + "/serve/fast/whoami", headers=server.headers)
    until(lambda: client.services.get("fast").traffic.requests == counted + 1, timeout=10)
    assert client.services.get("fast").traffic.errors == 0
    client.services.delete("fast")
    until(lambda: httpx.get(server.url + "/serve/fast/whoami", headers=server.headers).status_code == 404, timeout=30)


def test_the_api_jobs_and_their_logs_go_through_nginx_on_the_servers_port(server):
    port = int(server.url.rsplit(":", 1)[1])
    listening = {c.pid for c in psutil.net_connections("tcp") if c.status == "LISTEN" and c.laddr.port == port}
    assert listening and listening <= {p.pid for p in nginx_of(server)}
    ran = server.cli("run", "--wait", "--", "sh", "-c", "echo through-the-front")
    assert ran.returncode == 0, ran.stderr
    job = ran.stdout.split()[0]
    assert "through-the-front" in server.cli("logs", job).stdout


def test_nginx_goes_with_the_server_and_the_server_with_nginx(tmp_path):
    nginx_installed()
    srv = ServerProcess(tmp_path / "a", ARGS)
    srv.start()
    try:
        port = int(srv.url.rsplit(":", 1)[1])
        masters = nginx_of(srv)
        srv.kill()  # no clean-up at all: nginx learns of it from the kernel (PR_SET_PDEATHSIG)
        until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in masters), timeout=15)
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0  # nobody holds the port
    finally:
        srv.stop_all()

    srv = ServerProcess(tmp_path / "b", ARGS)
    srv.start()
    try:
        port = int(srv.url.rsplit(":", 1)[1])
        every = nginx_of(srv)
        os.kill(min(p.pid for p in every), signal.SIGKILL)  # the master: its workers live on, holding the port
        srv.proc.wait(30)  # nobody can reach a server whose port is gone: it stops, saying why
        assert "nginx in front of this server exited" in srv.log_path.read_text()
        until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in every), timeout=15)
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0
        srv.start()  # and it starts again, on the same home
        assert httpx.get(srv.url + "/api/v1/jobs", headers=srv.headers).status_code == 200
    finally:
        srv.stop_all()


def test_behind_proxies_nginx_believes_their_forwarded_headers_and_no_one_elses(tmp_path):
    said = refused(server_cli(tmp_path / "bad", "--front", "nginx", "--forwarded-allow-ips", "10.0.0.1,lb.local"))
    assert "--forwarded-allow-ips" in said and "'lb.local': name each proxy by its address or network" in said
    nginx_installed()
    srv = ServerProcess(tmp_path / "home", ["--auth", "--front", "nginx", "--container-runtime", "none",
                                            "--forwarded-allow-ips", "10.9.0.0/16,127.0.0.1"])
    srv.start()
    try:
        client = srv.client()
        client.services.apply(spec("proxied", {"replicas": 1}))
        client.services.wait_ready("proxied", 1, timeout=60)
        said = {"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"}  # by a load balancer on loopback
        with httpx.Client(headers={**srv.headers, **said}, timeout=30) as http:
            # the caller the proxy names is the one the audit log records (the Python server behind nginx)
            assert http.post(srv.url + "/api/v1/teams", json={"name": "vision"}).status_code == 201
            sources = {e["action"]: e["source"] for e in http.get(srv.url + "/api/v1/audit").json()}
            assert sources["team.create"] == "203.0.113.7"
            # and what a replica is told, the Python way (the token's first request) and then the fast way
            ways = []
            for _ in range(40):
                seen = http.get(srv.url + "/serve/proxied/whoami").json()
                ways.append(went_fast(seen))
                names = {k.lower(): v for k, v in seen["headers"].items()}
                assert names["x-forwarded-for"] == "203.0.113.7" and names["x-forwarded-proto"] == "https", ways
                if ways[-1]:
                    break
                time.sleep(0.25)
            assert not ways[0] and ways[-1]
    finally:
        srv.stop_all()


def test_with_users_and_tls_a_token_takes_the_fast_path_once_let_in_and_not_after_its_revocation(tmp_path):
    nginx_installed()
    cert, key = self_signed(tmp_path)
    trust = ssl.create_default_context(cafile=str(cert))
    srv = ServerProcess(tmp_path / "home", ["--auth", "--cpus", "2", "--memory", "4Gi", "--container-runtime", "none",
                                            "--front", "nginx", "--tls-cert", str(cert), "--tls-key", str(key)],
                        verify=trust)
    srv.start()
    try:
        assert srv.url.startswith("https://")
        admin = {"Authorization": "Bearer " + (srv.home / "first-admin-token").read_text().strip()}
        http = httpx.Client(verify=trust, timeout=30)
        made = http.post(srv.url + "/api/v1/tokens", headers=admin, json={"name": "serving"})
        assert made.status_code == 201, made.text
        token, token_id = made.json()["secret"], made.json()["info"]["id"]
        caller = {"Authorization": f"Bearer {token}"}
        assert http.post(srv.url + "/api/v1/services", headers=admin, json={"spec": spec(
            "guarded", {"replicas": 1}, env_vars={"CHECK_TOKEN": "1"})}).status_code == 200
        until(lambda: http.get(srv.url + "/api/v1/services/guarded", headers=admin).json()["ready"] == 1, timeout=60)

        def ask() -> httpx.Response:
            r = http.get(srv.url + "/serve/guarded/whoami", headers=caller)
            assert r.status_code == 200, r.text
            # either way: a service's pages never act as the UI
            assert "sandbox" in r.headers["content-security-policy"]
            return r

        first = ask()  # the Python way lets it in, and tells nginx
        assert not went_fast(first.json()) and first.json()["headers"]["x-forwarded-proto"] == "https"
        until(lambda: went_fast(ask().json()), timeout=10)
        # a browser opening the page gets the UI's frame page from the server, whatever nginx was told
        page = http.get(srv.url + "/serve/guarded/whoami", headers={**caller, "Sec-Fetch-Dest": "document"})
        assert page.status_code == 200 and "serve_frame.js" in page.text

        revoked = http.post(f"{srv.url}/api/v1/tokens/{token_id}/revoke", headers=admin)
        assert revoked.status_code == 200, revoked.text
        assert http.get(srv.url + "/serve/guarded/whoami", headers=caller).status_code == 401  # at once, not later
        time.sleep(2.5)  # and after the grant would have lapsed
        assert http.get(srv.url + "/serve/guarded/whoami", headers=caller).status_code == 401
    finally:
        srv.stop_all()


def test_a_rollout_waits_for_a_slow_request_nginx_has_under_way_to_the_old_replica(server):
    client = server.client()
    ready_fast(server, "slowroll", env_vars={"APP_VERSION": "1"})
    answers: list[httpx.Response] = []
    slow = threading.Thread(target=lambda: answers.append(httpx.get(
        server.url + "/serve/slowroll/slow?s=6", headers=server.headers, timeout=60)))
    slow.start()
    time.sleep(0.5)  # under way, on the fast path, to version 1's replica
    client.services.apply(spec("slowroll", {"replicas": 1}, env_vars={"APP_VERSION": "2"}))
    until(lambda: [r.version for r in client.services.get("slowroll").replicas] == [2], timeout=90)
    slow.join(60)
    # the old replica was drained, and stopped only once nginx's request to it was answered
    assert answers and answers[0].status_code == 200 and answers[0].json()["version"] == "1"
    assert went_fast(answers[0].json())
    client.services.delete("slowroll")


def test_a_post_the_replica_hung_up_on_is_answered_502_and_not_sent_again(server):
    client = server.client()
    ready_fast(server, "hangup")
    base = server.url + "/serve/hangup"
    with httpx.Client(headers=server.headers, timeout=30) as http:
        read = len(http.get(base + "/seen").json()["seen"])
        errors = client.services.get("hangup").traffic.errors
        # the replica answers, then drops the next request on that connection: nginx's kept-alive one
        assert went_fast(http.get(base + "/drop-next").json())
        r = http.post(base + "/echo", content=b"once")
        assert r.status_code == 502 and r.json()["code"] == "replica_unreachable", r.text
        assert "did not answer" in r.json()["message"]
        # the replica read it once: it may have begun it, so it is not sent again (the Python hop's rule)
        posts = [line for line in http.get(base + "/seen").json()["seen"][read:] if line.startswith("POST")]
        assert posts == ["POST /echo HTTP/1.1"]
        until(lambda: client.services.get("hangup").traffic.errors == errors + 1, timeout=10)  # counted once
        # a GET cut the same way is sent again, and answered
        assert went_fast(http.get(base + "/drop-next").json())
        assert http.get(base + "/whoami").status_code == 200
    client.services.delete("hangup")


def test_a_drain_does_not_wait_for_requests_of_an_nginx_worker_that_died(server):
    client = server.client()
    ready_fast(server, "crashw", env_vars={"APP_VERSION": "1"})

    def cut() -> None:
        with pytest.raises(httpx.RemoteProtocolError):  # by the worker's death
            httpx.get(server.url + "/serve/crashw/slow?s=60", headers=server.headers, timeout=90)

    slow = threading.Thread(target=cut, daemon=True)
    slow.start()

    def reached() -> bool:  # under way on the fast path, counted by the worker (however slow the machine)
        seen = httpx.get(server.url + "/serve/crashw/seen", headers=server.headers, timeout=30).json()["seen"]
        return any("/slow?s=60" in line for line in seen)
    until(reached, timeout=30)
    (worker,) = workers(server)
    os.kill(worker, signal.SIGKILL)
    until(lambda: workers(server) not in ([], [worker]), timeout=10)  # nginx's master starts another in its place
    until(lambda: fast(server, "crashw"), timeout=10)
    began = time.monotonic()
    client.services.apply(spec("crashw", {"replicas": 1}, env_vars={"APP_VERSION": "2"}))
    until(lambda: [r.version for r in client.services.get("crashw").replicas] == [2], timeout=90)
    # the dead worker's request is not waited for (DRAIN_MAX, 30 s): the replica is stopped once drained
    assert time.monotonic() - began < 20
    client.services.delete("crashw")


def test_the_fast_paths_requests_are_timed_to_the_microsecond(server):
    client = server.client()
    names = ("timed-a", "timed-b")
    for name in names:
        client.services.apply(spec(name, {"replicas": 1}))
    p50s = []
    for name in names:
        client.services.wait_ready(name, 1, timeout=60)
        until(lambda: fast(server, name), timeout=10)  # a few quick requests, either way
        before = client.services.get(name).traffic.requests  # fast() lines may still be on their way

        def slow() -> None:  # ~20 ms at the replica: nginx's own clock reads 0.020 or 0.021 s
            r = httpx.get(f"{server.url}/serve/{name}/slow?s=0.02", headers=server.headers, timeout=30)
            assert went_fast(r.json())

        for _ in range(31):
            slow()
        until(lambda: client.services.get(name).traffic.requests >= before + 31, timeout=10)
        total = client.services.get(name).traffic.requests  # lines come in order: all counted by now
        if total % 2 == 0:  # an odd count in all: the median is one request's time, one of these
            slow()
            until(lambda: client.services.get(name).traffic.requests == total + 1, timeout=10)
        p50s.append(client.services.get(name).traffic.p50_ms)
        client.services.delete(name)
    assert all(20 <= p < 200 for p in p50s), p50s
    # to the millisecond both would be whole (to the microsecond each is with a chance of 1 in 1,000)
    assert any(p != round(p) for p in p50s), p50s


def test_a_header_line_the_server_takes_passes_nginx_and_a_head_it_refuses_is_refused_alike(server):
    client = server.client()
    ready_fast(server, "heads")
    url = server.url + "/serve/heads/whoami"
    # a 20 KiB cookie-like line (past nginx's usual 16 KiB line): taken, the fast way, as the server takes it
    r = httpx.get(url, headers={**server.headers, "X-Big": "a" * 20_000}, timeout=30)
    assert r.status_code == 200 and went_fast(r.json())
    assert {k.lower(): v for k, v in r.json()["headers"].items()}["x-big"] == "a" * 20_000
    # a head past the server's 64 KiB: refused 431 by the server, as without nginx (not nginx's own 400)
    for where in ("/serve/heads/whoami", "/api/v1/jobs"):
        r = httpx.get(server.url + where, headers={**server.headers, "X-Big": "a" * 70_000}, timeout=30)
        assert r.status_code == 431, (where, r.status_code, r.text[:200])
    client.services.delete("heads")
