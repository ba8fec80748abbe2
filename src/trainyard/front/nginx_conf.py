"""The front's nginx configuration: everything to the Python server, small ``/serve/`` requests straight to a replica.

``nginx.conf`` is written once, at start. Where a service's requests go is not in it: the server sends the
routes (:func:`routes_text`) to nginx's control socket whenever a service's ready replicas change, and
``front/fast_path.lua`` reads them from shared memory. A reload (SIGHUP) would do as well, but an old worker
closes its idle kept-alive connections at once, and a client sending on one just then gets no answer: every
rollout and scale would have cost some API and ``/serve/`` callers an error (ingress-nginx balances in Lua for
the same reason).

A request takes the fast path only when all of this holds, as for the Python lane (api/serve_lane.py); any other
goes to the Python server, which answers every case (a cold start, a browser's sign-in cookie, a WebSocket, a
body streamed or over 1 MB, another token, a service with no ready replica):

- ``/serve/NAME/…`` with NAME as written in a service's name (nothing to decode) and a ready replica;
- ``Authorization: Bearer`` the server's own token, on a server without users; with ``--auth``, a token the server
  let in to that service in the last :data:`GRANT_FOR` seconds (its first request, and one every few seconds,
  goes to the server, which then tells nginx: :func:`grant_key`), and the answer carries the sandbox;
- no Cookie, Upgrade, Expect or Transfer-Encoding; a body, if any, with a length under 1,000,000 bytes;
- a Host of loopback, on a server listening on loopback; not a browser opening a page, nor the sandboxed frame.

What the replica gets is what the Python hop sends (api/serve_hop.py ``forward_headers``): its own address as
Host, its token in ``X-Trainyard-Service-Token``, no ``Authorization``, the ``X-Forwarded-*`` headers, none of the
caller's claims of what a proxy says (:data:`CLAIMS`; a request with an ``X-Forwarded-*`` of another name goes the
Python way); what the caller gets back has no ``Set-Cookie`` of the server's sign-in cookie nor
``Service-Worker-Allowed``. A request nginx could not get answered (its own 502) goes to the Python server, which
tries the others, if it may be sent again as the Python hop's rule says (nothing of it sent, or idempotent with no
byte answered); else it is answered 502 (fast_path.lua ``broken``).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")  # what reaches nginx unquoted: nothing else does
TOKEN = re.compile(r"[A-Za-z0-9_-]{16,256}\Z")  # secrets.token_urlsafe's alphabet
LOG_FORMAT = "trainyard_serve"
LUA = Path(__file__).resolve().parent / "fast_path.lua"
# what proxies say of a request: the X-Forwarded-* headers the fast path sets itself, and those in common use it drops
# (as the Python hop drops every caller's X-Forwarded-* but the For it extends: a replica may trust them); a request
# with one of another name goes the Python way (:func:`claims_pattern`)
SETS = ("X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Forwarded-Prefix")
CLAIMS = ("X-Forwarded-Port", "X-Forwarded-Server", "X-Forwarded-Ssl", "X-Forwarded-Scheme", "X-Forwarded-Uri",
          "X-Forwarded-Path", "X-Forwarded-Method", "X-Forwarded-Client-Cert", "X-Forwarded-User", "X-Forwarded-Email",
          "X-Forwarded-Groups", "X-Forwarded-Access-Token", "Forwarded", "X-Real-IP")
MAX_HEAD = 64 * 1024  # api/bounded_http.py's: the most of a request's line and headers the server takes
COOKIE = "trainyard_serve"  # api/serve_cookie.py's: no service may set it (the Python hop drops it too)
SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"  # api/serve_origin.py's
# seconds a caller's token takes the fast path to a service after the server let it in there: as long as the
# server itself reuses a token's owner without a lookup (services/identity.py REMEMBER_FOR); a change made on
# this server (a revocation, a user disabled) forgets every grant at once
GRANT_FOR = 2.0


@dataclass(frozen=True, slots=True)
class Replica:
    address: str  # HOST:PORT, HOST an IP address (nginx's balancer takes no name)
    token: str | None


@dataclass(frozen=True, slots=True)
class FastRoute:
    name: str
    replicas: tuple[Replica, ...]


def _ip_port(address: str) -> tuple[str, int] | None:
    host, _, port = address.rpartition(":")
    try:
        ip = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None
    return (str(ip), int(port)) if port.isdigit() and 0 < int(port) < 65536 else None


def usable(route: FastRoute) -> bool:
    """Whether the route can go to nginx as it is: a name, IP addresses and tokens of the shapes above (anything
    else stays with the Python server, which resolves names and quotes what it sends)."""
    return (NAME.match(route.name) is not None and bool(route.replicas)
            and all(_ip_port(r.address) and (r.token is None or TOKEN.match(r.token)) for r in route.replicas))


def routes_text(routes: list[FastRoute]) -> str:
    """What fast_path.lua reads: a line per ready replica, ``NAME IP PORT HOST:PORT TOKEN`` (``-``: none). Routes
    not :func:`usable` are left out."""
    lines = []
    for route in routes:
        if usable(route):
            for r in route.replicas:
                ip, port = _ip_port(r.address)
                lines.append(f"{route.name} {ip} {port} {r.address} {r.token or '-'}\n")
    return "".join(lines)


def claims_pattern() -> str:
    """The PCRE fast_path.lua looks for in a request's head (case aside): an X-Forwarded-* header of a name nginx
    neither sets nor drops."""
    known = sorted(n.lower().removeprefix("x-forwarded-") for n in SETS + CLAIMS
                   if n.lower().startswith("x-forwarded-"))
    return rf"(?:^|\n)x-forwarded-(?!(?:{'|'.join(map(re.escape, known))})[ \t]*:)"


def grant_key(token: str, name: str) -> str:
    """What fast_path.lua looks up for a request bearing ``token`` to service ``name``: its SHA-1 (nginx's Lua has
    it built in; a token is 32 random bytes, so no preimage is to be found), never the token itself."""
    return f"{base64.b64encode(hashlib.sha1(token.encode()).digest()).decode()} {name}"


def proxies_conf(trusted: tuple[str, ...]) -> str:
    """What nginx makes of the proxies in front of it (``--forwarded-allow-ips``: addresses, networks, ``*``), as
    uvicorn does: from them, the caller is the last address in X-Forwarded-For that is not theirs (the Python server
    and the fast path's replica are told that one), and X-Forwarded-Proto says the scheme; from anyone else neither
    is believed."""
    if not trusted:
        return ("    map $scheme $ty_scheme { default $scheme; }\n"
                "    map $scheme $ty_forwarded_for { default $proxy_add_x_forwarded_for; }\n")
    nets = [str(ipaddress.ip_network(t, strict=False)) for t in trusted if t != "*"]
    nets += ["0.0.0.0/0", "::/0"] if "*" in trusted else []
    return ("".join(f"    set_real_ip_from {net};\n" for net in nets)
            + "    real_ip_header X-Forwarded-For;\n    real_ip_recursive on;\n"
            + f"    geo $realip_remote_addr $ty_trusted {{ default 0; {' '.join(f'{n} 1;' for n in nets)} }}\n"
            + '    map "$ty_trusted:$http_x_forwarded_proto" $ty_scheme { default $scheme; "1:http" http; '
              '"1:https" https; }\n'
            # a proxy's own X-Forwarded-For already ends with the caller: passed on as it came (the Python hop's way)
            + '    map "$ty_trusted:$http_x_forwarded_for" $ty_forwarded_for { default $proxy_add_x_forwarded_for; '
              '"~^1:." $http_x_forwarded_for; }\n')


def main_conf(*, user: str, modules: str, listen: str, api_socket: str, control_socket: str, log_socket: str,
              prefix: str, server_token: str | None, users: bool = False, loopback: bool = True,
              tls: tuple[str, str] | None = None, trusted: tuple[str, ...] = ()) -> str:
    """``nginx.conf``. ``listen``: ``HOST:PORT`` (the socket itself is handed over: ``NGINX`` in the environment);
    ``server_token``: the one token always taken (a server without users); ``users``: a server with ``--auth``,
    whose callers' tokens are taken once the server granted them the service (:func:`grant_text`), and whose
    services' answers are sandboxed (api/serve_origin.py); ``loopback``: answer only names of loopback;
    ``tls``: (certificate, key) files, served here; ``trusted``: the proxies in front (:func:`proxies_conf`)."""
    authorized = f'"Bearer {server_token}" 1;' if server_token is not None else ""
    local = "default 0; 127.0.0.1 1; localhost 1; \"::1\" 1; \"[::1]\" 1;" if loopback else "default 1;"
    ssl = f" ssl;\n        ssl_certificate {tls[0]};\n        ssl_certificate_key {tls[1]}" if tls else ""
    sandbox = f'            add_header Content-Security-Policy "{SANDBOX}" always;\n' if users else ""
    dropped = "".join(f'            proxy_set_header {name} "";\n' for name in CLAIMS)
    serve_log = f"access_log syslog:server=unix:{log_socket},nohostname,tag=trainyard {LOG_FORMAT}"  # each fast request
    return f"""\
# written by trainyard's server at each start (trainyard/front/nginx_conf.py): changes are lost
load_module {modules}/ndk_http_module.so;
load_module {modules}/ngx_http_lua_module.so;
user {user};
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    server_tokens off;
    map_hash_bucket_size 256;  # a key holds a token (~50 bytes), past the default bucket
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    merge_slashes off;
    keepalive_requests 100000;
    keepalive_timeout 75s;
    client_max_body_size 0;
    client_body_buffer_size 1m;
    # any header line the Python server takes (its bound is the whole head's, MAX_HEAD), and one past that bound
    # still read, to be answered 431 by the server as without nginx (nginx's own 400 only past twice that)
    large_client_header_buffers 4 {2 * MAX_HEAD // 1024}k;
    proxy_http_version 1.1;
    proxy_buffering off;
    proxy_read_timeout 24h;
    proxy_send_timeout 24h;
    lua_package_path "{LUA.parent}/?.lua;/usr/share/lua/5.1/?.lua;;";
    lua_shared_dict trainyard_routes 8m;
    lua_shared_dict trainyard_grants 16m;
    lua_shared_dict trainyard_inflight 1m;
    init_by_lua_block {{ require("fast_path").configure([[{claims_pattern()}]], {MAX_HEAD}) }}
    init_worker_by_lua_block {{ require("fast_path").worker_started() }}
    log_format {LOG_FORMAT} '$ty_name $status $ty_took $msec';

    # kept-alive connections are let go before the other side would (uvicorn: 5 s idle, as most servers' default):
    # one it closed as nginx sent on it fails a request nginx may not send again (a POST)
    upstream ty_api {{
        server unix:{api_socket};
        keepalive 32;
        keepalive_requests 100000;
        keepalive_timeout 4s;
    }}
    upstream ty_replica {{
        server 0.0.0.1;  # never used: the balancer names the replica fast_path.lua chose
        balancer_by_lua_block {{ require("fast_path").balance() }}
        keepalive 64;
        keepalive_requests 100000;
        keepalive_timeout 4s;
    }}
{proxies_conf(trusted)}    map $http_upgrade $ty_connection {{ default upgrade; "" ""; }}
    map $request_uri $ty_name {{ default ""; "~^/serve/(?<n>[A-Za-z0-9][A-Za-z0-9._-]*)/[^#]*$" $n; }}
    map $request_uri $ty_rest {{ default "/"; "~^/serve/[^/]+(?<r>/.*)$" $r; }}
    map $http_authorization $ty_authorized {{ default 0; {authorized} }}
    map $http_content_length $ty_small {{ default 0; "" 1; "~^[0-9]{{1,6}}$" 1; }}
    # a loopback server answers only names of loopback (api/guard.py: DNS rebinding), the fast path too
    map $host $ty_local {{ {local} }}
    # a browser opening a page, or the sandboxed frame's own request: the Python server's (api/serve_origin.py)
    map $http_sec_fetch_dest $ty_page {{ default 0; document 1; }}
    map $request_uri $ty_frame {{ default 0; "~trainyard-frame=1" 1; }}
    map "$ty_local$ty_small$ty_page$ty_frame:$http_cookie$http_upgrade$http_expect$http_transfer_encoding" $ty_plain {{
        default 0;
        "1100:" 1;
    }}

    server {{
        listen unix:{control_socket};
        access_log off;
        location = /routes {{
            client_body_buffer_size 8m;
            client_max_body_size 8m;
            content_by_lua_block {{ require("fast_path").put_routes() }}
        }}
        location = /grants {{
            client_body_buffer_size 1m;
            client_max_body_size 1m;
            content_by_lua_block {{ require("fast_path").put_grants({GRANT_FOR:g}) }}
        }}
        location = /inflight {{
            content_by_lua_block {{ require("fast_path").get_inflight() }}
        }}
        location / {{ return 404; }}
    }}

    server {{
        listen {listen} backlog=511{ssl};
        proxy_set_header Host $http_host;
        proxy_set_header Connection $ty_connection;
        proxy_set_header Upgrade $http_upgrade;
        proxy_set_header X-Forwarded-For $remote_addr;
        proxy_set_header X-Forwarded-Proto $ty_scheme;
        proxy_request_buffering off;
        set $ty_counted "";
        set $ty_answered "";
        set $ty_began "";
        set $ty_took 0.000;  # fast_path.lua sets it, to the microsecond, once it chose a replica
        log_by_lua_block {{ require("fast_path").done() }}

        location / {{
            proxy_pass http://ty_api;
        }}
        location @ty_api {{
            proxy_pass http://ty_api;
        }}
        location @ty_broken {{
            access_by_lua_block {{ require("fast_path").broken() }}
            proxy_pass http://ty_api;
            {serve_log} if=$ty_answered;
        }}
        location /serve/ {{
            set $ty_host "";
            set $ty_token "";
            access_by_lua_block {{ require("fast_path").choose({str(users).lower()}) }}
            # nginx got no answer from the replica: the Python server tries the others if it may (fast_path.lua broken)
            error_page 502 = @ty_broken;
            proxy_request_buffering on;
            proxy_pass http://ty_replica$ty_rest;
            # names in lower case, as the Python hop writes them: a replica may look them up as written
            proxy_set_header host $ty_host;
            proxy_set_header Connection "";
            proxy_set_header Upgrade "";
            proxy_set_header Authorization "";
            proxy_set_header Proxy-Authorization "";
            proxy_set_header TE "";
            proxy_set_header Keep-Alive "";
            proxy_set_header Trailer "";
            proxy_set_header x-trainyard-service-token $ty_token;
            proxy_set_header x-forwarded-for $ty_forwarded_for;
            proxy_set_header x-forwarded-proto $ty_scheme;
            proxy_set_header x-forwarded-host $http_host;
            proxy_set_header x-forwarded-prefix /serve/$ty_name;
{dropped}            proxy_hide_header X-Trainyard-Service-Token;
            proxy_hide_header Service-Worker-Allowed;
            header_filter_by_lua_block {{ require("fast_path").drop_cookie("{COOKIE}") }}
{sandbox}            {serve_log};
        }}
    }}
}}
"""
