"""The front's nginx configuration as written, checked by a real nginx (``nginx -t``), and the routes it is sent."""

from __future__ import annotations

import base64
import hashlib
import os
import pwd
import subprocess

import pytest

from tests.conftest import need
from tests.support.certs import self_signed
from trainyard.errors import TrainyardError
from trainyard.front.nginx import find_nginx
from trainyard.front.nginx_conf import FastRoute, Replica, grant_key, main_conf, routes_text, usable

TOKEN = "A" * 43


def nginx() -> tuple[str, str]:
    try:
        return find_nginx()
    except TrainyardError as e:
        need(False, str(e))


@pytest.mark.parametrize("server_token, users, tls, trusted", [
    (TOKEN, False, False, ()), (None, False, False, ()), (None, True, False, ()), (None, True, True, ()),
    (None, True, False, ("10.0.0.0/8", "2001:db8::1")), (TOKEN, False, False, ("*",))],
    ids=["one user", "no token", "users", "users and TLS", "behind proxies", "behind any proxy"])
def test_the_configuration_as_written_is_one_nginx_takes(tmp_path, server_token, users, tls, trusted):
    binary, modules = nginx()
    pair = None
    if tls:
        pair = tuple(map(str, self_signed(tmp_path)))
    prefix = tmp_path / "front"
    prefix.mkdir()
    conf = main_conf(user=pwd.getpwuid(os.geteuid()).pw_name, modules=modules, listen="127.0.0.1:1",
                     api_socket=str(tmp_path / "api.sock"), control_socket=str(tmp_path / "control.sock"),
                     log_socket=str(tmp_path / "log.sock"), prefix=str(prefix), server_token=server_token,
                     users=users, loopback=not users, tls=pair, trusted=trusted)
    (prefix / "nginx.conf").write_text(conf)
    done = subprocess.run([binary, "-t", "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e",
                           str(prefix / "error.log")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert ("Bearer" in conf) == (server_token is not None)  # no token: only grants take the fast path
    assert ("Content-Security-Policy" in conf) == users and ("ssl_certificate" in conf) == tls
    assert ("127.0.0.1 1;" in conf) == (not users)  # a server beyond loopback answers to any name
    believed = {line.split()[1].rstrip(";") for line in conf.splitlines() if "set_real_ip_from" in line}
    assert believed == ({"0.0.0.0/0", "::/0"} if "*" in trusted else {"10.0.0.0/8", "2001:db8::1/128"} if trusted
                        else set())


def test_a_grant_names_the_tokens_digest_and_the_service_never_the_token():
    key = grant_key("t" * 43, "digits")
    assert key == base64.b64encode(hashlib.sha1(b"t" * 43).digest()).decode() + " digits"
    assert "t" * 43 not in key


def test_the_routes_are_a_line_per_ready_replica_with_its_address_and_token():
    text = routes_text([FastRoute("default", (Replica("127.0.0.1:8001", "b" * 43), Replica("10.0.0.2:8002", None))),
                        FastRoute("v6", (Replica("[::1]:9100", "c" * 43),))])
    assert text.splitlines() == [f"default 127.0.0.1 8001 127.0.0.1:8001 {'b' * 43}", "default 10.0.0.2 8002 "
                                 "10.0.0.2:8002 -", f"v6 ::1 9100 [::1]:9100 {'c' * 43}"]


@pytest.mark.parametrize("route", [
    FastRoute("has space", (Replica("127.0.0.1:1", None),)),
    FastRoute("x\n", (Replica("127.0.0.1:1", None),)),
    FastRoute("-lead", (Replica("127.0.0.1:1", None),)),
    FastRoute("ok", (Replica("node-3:8000", None),)),  # a name: nginx's balancer takes addresses only
    FastRoute("ok", (Replica("127.0.0.1:1 x", None),)),
    FastRoute("ok", (Replica("127.0.0.1:70000", None),)),
    FastRoute("ok", (Replica("127.0.0.1:1", "tok en" * 5),)),
    FastRoute("ok", (Replica("127.0.0.1:1", "short"),)),
    FastRoute("ok", ()),
])
def test_a_route_that_would_not_be_read_as_it_is_stays_with_the_python_server(route):
    assert not usable(route)
    assert routes_text([route, FastRoute("good", (Replica("127.0.0.1:2", None),))]) == "good 127.0.0.1 2 127.0.0.1:2 -\n"



def test_the_cookie_no_service_may_set_is_the_servers_sign_in_cookie():
    from trainyard.api.serve_cookie import COOKIE
    from trainyard.front.nginx_conf import COOKIE as DROPPED

    assert DROPPED == COOKIE  # named twice: the front may not import the API (pyproject's layers)


def test_the_front_bounds_a_head_as_the_server_does():
    from trainyard.api.bounded_http import MAX_HEAD
    from trainyard.front import nginx_conf

    assert nginx_conf.MAX_HEAD == MAX_HEAD
