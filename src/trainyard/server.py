"""Running the API server: hold the home, bind, announce the address, serve, clean up."""

from __future__ import annotations

import errno
import gc
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from trainyard import startup
from trainyard.config import ServerSettings, serve_lane
from trainyard.launch import fdlimit
from trainyard.home import HomeLock, held, local_token, open_for_accounts, read_address, secure, write_private
from trainyard.db_url import database_name, normalize_url
from trainyard.auth.tokens import token_hash
from trainyard.errors import InvalidSpec, TrainyardError

if TYPE_CHECKING:
    from trainyard.services.platform import Platform

log = logging.getLogger("trainyard.server")
LOOPBACK = ("127.0.0.1", "::1", "localhost")
FIRST_ADMIN_FILE = "first-admin-token"


def check_gpu_type(settings: ServerSettings) -> None:
    """A --gpu-type without --gpus names the type of the GPUs detected here: with none detected the node had no GPUs,
    and the type was dropped without a word (--gpus 0 with a type: the settings refuse it)."""
    if settings.engine != "local" or settings.gpu_type is None or settings.gpus is not None:
        return
    from trainyard.engines.detect import detect_gpus

    if not detect_gpus()[0]:
        raise InvalidSpec.flag("--gpu-type", f"{settings.gpu_type}: no GPU was detected on this machine (NVML found "
                               "none); declare how many with --gpus N, or leave --gpu-type out")


def check_exposure(settings: ServerSettings) -> None:
    """Refuse what would expose the server: beyond loopback without users and tokens, half a TLS pair."""
    if settings.host not in LOOPBACK and not settings.auth:
        raise TrainyardError(
            f"refusing to listen on {settings.host} without authentication: anyone who can reach the port could "
            f"run commands on this machine. Add --auth (users and their tokens; the first admin is made at the "
            f"first start, or by `trainyard admin bootstrap`), and --tls-cert/--tls-key or a TLS proxy")
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise TrainyardError("--tls-cert and --tls-key go together: give both")


def first_admin(platform: "Platform", home: Path) -> None:
    """With --auth, make the first admin unless one exists; its token is shown once: on the terminal,
    or (no terminal: a service manager would keep it in its logs) in a 0600 file of the home."""
    made = platform.identity.bootstrap()
    if made is None:
        return
    if sys.stdout.isatty():
        print(f"first admin {made.user.name!r} created; its token, shown this once:\n{made.token.secret}", flush=True)
        return
    write_private(home / FIRST_ADMIN_FILE, made.token.secret + "\n")
    log.warning("first admin %r created; its token is in %s (0600): keep it elsewhere, then delete the file",
                made.user.name, home / FIRST_ADMIN_FILE)


def bootstrap_admin(settings: ServerSettings) -> tuple[str, str] | None:
    """`trainyard admin bootstrap`: the first admin's name and token, straight in the database; None if
    an admin exists."""
    from trainyard.services.audit import AuditLog
    from trainyard.services.identity import IdentityService
    from trainyard.store import Store

    secure(settings.home)  # a fresh home: made private before the database lands in it
    store = Store(settings.db_url)
    try:
        made = IdentityService(store, AuditLog(store), server_token_sha256=None, users=True).bootstrap()
        return (made.user.name, made.token.secret) if made else None
    finally:
        store.close()


def other_database(settings: ServerSettings) -> str | None:
    """The database of the server that holds ``settings.home``, where it is not ``settings``'s; None
    when it is the same, or when no server holds the home (or one too old to have recorded it)."""
    info = read_address(settings.address_file)
    if info is None or not held(settings.home):
        return None
    theirs = info.get("db")
    return theirs if isinstance(theirs, str) and theirs != database_name(settings.db_url) else None


def _bind(host: str, port: int, previous: int | None) -> socket.socket:
    """Bind ``port``; for 0, try the port of the last run first, so launchers find us again."""
    for candidate in ([previous] if port == 0 and previous else []) + [port]:
        # IPPROTO_TCP explicitly: with proto 0 asyncio does not set TCP_NODELAY on accepted
        # connections, and Nagle plus delayed ACKs add ~40 ms to every kept-alive response
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM,
                             socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.bind((host, candidate))
        except OSError as e:
            sock.close()
            if candidate == port:
                raise _refused(host, port, e) from None
            continue
        sock.listen(128)
        return sock
    raise OSError(f"cannot bind {host}:{port}")


def _refused(host: str, port: int, e: OSError) -> TrainyardError:
    """Why ``host:port`` cannot be listened on, as the flag to change says it (a usage error: exit 2)."""
    if isinstance(e, socket.gaierror):
        return InvalidSpec.flag("--host", f"{host}: no address found for this name ({e.strerror})")
    if e.errno == errno.EADDRINUSE:
        return InvalidSpec.flag("--port", f"{port} is in use by another process on {host}; choose another with "
                                "--port, or --port 0 for any free one")
    if e.errno == errno.EACCES:
        return InvalidSpec.flag("--port", f"{port}: a port below 1024 needs root (or CAP_NET_BIND_SERVICE); "
                                "choose one from 1024")
    if e.errno == errno.EADDRNOTAVAIL:
        return InvalidSpec.flag("--host", f"{host}: no network interface of this machine has this address")
    return TrainyardError(f"cannot listen on {host}:{port}: {e.strerror or e}")


def serve(settings: ServerSettings) -> None:
    """Serve until SIGTERM/SIGINT. Jobs keep running when the server stops. One that arrives before uvicorn answers
    it (start-up: trainyard.startup) stops the start-up where it is: nginx stopped, the home let go, one line said."""
    startup.guard()
    startup.log_to_stderr()
    # httpx logs each request at INFO: the /serve proxy and readiness probes would fill the log
    logging.getLogger("httpx").setLevel(logging.WARNING)
    check_exposure(settings)
    secure(settings.home)
    raised = fdlimit.raise_limit()  # each connection is a file; the jobs it starts get the limit back
    if raised:
        log.info("open files: soft limit raised from %d to %d", *raised)
    # SQLite: this server alone in its home (others with other homes may share its file with --db).
    # PostgreSQL: servers sharing the database may share the home. Either way a lease picks the one
    # that schedules (trainyard.store.lease), and no auto-started server joins them
    sqlite = normalize_url(settings.db_url).startswith("sqlite")
    lock = HomeLock(settings.home)
    lock.acquire(shared=not sqlite)  # held until this process ends, or its start-up is stopped
    try:
        _serve_holding(settings)
    except startup.StoppedStarting as e:
        lock.release()  # the kernel would at exit too: here, before the line says the home is free
        startup.stopped(e)


def _serve_holding(settings: ServerSettings) -> None:
    # imported once the home is held: they took ~1.2 s from the start (more on a loaded machine), while a CLI started
    # beside this server found the home free and started a rival in the background (test_server_home.py)
    import uvicorn

    from trainyard.api.app import create_app
    from trainyard.api.bounded_http import BoundedProtocol, EveryFew
    from trainyard.api.serve_lane import lane_protocol
    from trainyard.services.platform import Platform

    class Stopping(uvicorn.Server):
        """uvicorn's server, saying why it stops: a server gone quiet looks the same as one killed."""

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                startup.handed_over()  # handle_exit answers from here; uvicorn raises the signal again once stopped
                yield

        def handle_exit(self, sig: int, frame: object) -> None:
            if not self.should_exit:  # the first signal: a second SIGINT only hurries the stop
                # before the lifespan's start-up has ended: uvicorn ends it, then shuts down (nothing is served)
                during = "" if self.started else " during start-up"
                log.info("got %s%s: stopping; running jobs keep running and report to the server that schedules "
                         "next", signal.Signals(sig).name, during)
            super().handle_exit(sig, frame)

    own_token = None
    if settings.token_sha256 is None:  # no token given: the home's own, which only this Unix user can read
        own_token = local_token(settings.home, create=True)
        settings = settings.model_copy(update={"token_sha256": token_hash(own_token)})
    previous = (read_address(settings.address_file) or {}).get("port")
    sock = _bind(settings.host, settings.port, previous)
    host, port = sock.getsockname()[:2]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # this machine's clients and launchers use loopback
    url = f"{'https' if settings.tls_cert else 'http'}://{'[' + host + ']' if ':' in host else host}:{port}"
    accounts = settings.auth and settings.engine == "local" and os.geteuid() == 0
    if accounts:  # users' jobs may run as their own Unix accounts: what the server makes is private
        os.umask(0o077)
    platform = Platform(settings)
    platform.artifacts.probe()  # wrong credentials or an unreachable store: a plain error now, not at the first job
    if settings.engine == "ray" and not platform.artifacts.remote:  # launchers write the folder themselves
        log.warning("artifacts in a folder (%s): every Ray node must mount it, and its checkpoints, at the same "
                    "path; nodes that share no filesystem need an object store (--artifacts s3://…)",
                    platform.artifacts.url)
    if accounts:
        open_for_accounts(settings.home)
    if settings.auth:
        first_admin(platform, settings.home)
    # public facts only (clients of this home read them): the certificate, never its key; the database
    # without its user or password
    me = {"url": url, "port": port, "pid": os.getpid(), "home": str(settings.home),
          "db": database_name(settings.db_url)}
    if settings.tls_cert is not None:  # the CLI and SDK of this home trust it for this URL (trainyard.sdk.trust)
        me["tls_cert"] = str(Path(settings.tls_cert).resolve())

    def announce() -> None:
        # the leader's address, where the CLI and every launcher look (a follower only logs its own)
        for path in {settings.address_file, settings.leader_file}:
            write_private(path, json.dumps(me))
        log.info("trainyard server on %s (engine %s, home %s): scheduling", url, platform.engine.name, settings.home)

    def ready() -> None:
        if not platform.leader:
            log.info("trainyard server on %s (engine %s, home %s): another server schedules; this one "
                     "serves the API and takes over if that one stops", url, platform.engine.name, settings.home)

    def withdraw() -> None:
        # here, not after run(): uvicorn raises the signal it stopped on again once it has shut down
        for path in {settings.address_file, settings.leader_file}:
            if (read_address(path) or {}).get("pid") == os.getpid():
                path.unlink(missing_ok=True)

    hosts = LOOPBACK if settings.host in LOOPBACK else None  # a loopback server answers no other name
    app = create_app(platform, server_url=url, on_ready=ready, on_stop=withdraw, on_lead=announce,
                     allowed_hosts=hosts)

    if settings.host not in LOOPBACK and settings.tls_cert is None:
        log.warning("serving plain HTTP on %s: tokens cross the network in clear unless a TLS proxy is in front "
                    "(--tls-cert/--tls-key serve HTTPS here)", settings.host)
    # proxy headers (X-Forwarded-For/-Proto) are read only from the proxies named: uvicorn would
    # otherwise trust them from 127.0.0.1, and the audit log would record whatever a local caller claims
    proxied = settings.forwarded_allow_ips
    front = None
    if settings.front == "nginx":
        from trainyard.front.nginx import NginxFront

        # the fast path takes the home's own token on a server without users (a token given by file or variable is
        # kept only as its hash); with users, a token once this server let it in to a service (front/grants.py)
        tls = (str(settings.tls_cert), str(settings.tls_key)) if settings.tls_cert is not None else None
        front = NginxFront(settings.home, sock, None if settings.auth else own_token, platform.serving.front_request,
                           users=settings.auth, loopback=settings.host in LOOPBACK, tls=tls,
                           trusted=tuple(p.strip() for p in (proxied or "").split(",") if p.strip()))
        sock = front.api_listener()
        proxied = "*"  # only nginx reaches the unix socket, and it writes X-Forwarded-For/-Proto itself
    # small /serve/ requests are proxied from the HTTP protocol itself (api/serve_lane.py); behind trusted
    # proxies the caller's address is read from their headers by uvicorn's ASGI middleware, so all go that way.
    # TRAINYARD_SERVE_LANE=off sends every request the usual way (bench/serve.py --no-lane measures it)
    http = lane_protocol(app.lane) if serve_lane() and not proxied else BoundedProtocol
    config = uvicorn.Config(app, http=http, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=5,
                            proxy_headers=bool(proxied), forwarded_allow_ips=proxied or None,
                            # in front, nginx serves TLS; the unix socket behind it speaks plain HTTP
                            ssl_certfile=None if front else settings.tls_cert,
                            ssl_keyfile=None if front else settings.tls_key)
    # uvicorn warns of each request that does not parse, one line each: anyone's garbage would fill the log
    logging.getLogger("uvicorn.error").addFilter(EveryFew())
    # start-up leaves ~150,000 objects that live as long as the server (modules, models, routes): each
    # full collection walked them all, 0.4 s with the event loop stopped on this busy machine (bench/
    # RESULTS.md, session 6). Frozen, collections skip them; start-up leaves almost no garbage (20 objects)
    # to keep by not collecting first
    gc.freeze()
    if front is None:
        return Stopping(config).run(sockets=[sock])
    from trainyard.front.routes import RouteSync

    routes = RouteSync(front, platform.serving)
    try:  # from its start on: a start-up stopped while nginx starts leaves no nginx behind
        front.start()
        if front.grants is not None:
            platform.serving.granted = front.grants.grant
            platform.identity.forgotten.append(front.grants.forget)
        platform.serving.front_in_flight = front.in_flight
        routes.start()
        Stopping(config).run(sockets=[sock])
    finally:
        routes.stop()
        front.stop()

