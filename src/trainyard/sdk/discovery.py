"""Finding the server: ``TRAINYARD_SERVER``, else the one `trainyard login` saved, else the local
server's address file, else a local server started in the background (the embedded default).

A home holds one server. When one holds it but has not announced its address
yet (it is still starting), the client waits for it rather than starting a
rival that would refuse to start anyway.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from trainyard import envvars
from trainyard.errors import ServerUnavailable
from trainyard.home import held, read_address, read_login, secure
from trainyard.locations import ADDRESS_FILE, home, server_url
from trainyard.sdk.http import verify_for
from trainyard.sdk.trust import untrusted, untrusted_message

logger = logging.getLogger(__name__)  # the CLI shows its INFO on stderr: a server starting takes seconds
START_LOCK = "start.lock"  # serialises clients that start a server; the server itself holds server.lock


def healthy(url: str, timeout: float = 2.0) -> bool:
    """Whether ``url`` answers its health check; :class:`ServerUnavailable` at once if this client does
    not trust its certificate (waiting would not change that)."""
    try:
        return httpx.get(f"{url}/healthz", timeout=timeout, verify=verify_for(url)).status_code == 200
    except httpx.HTTPError as e:
        failed = untrusted(e)
        if failed is not None:
            raise ServerUnavailable(untrusted_message(url, failed)) from None
        return False


def local_server_url(home_dir: Path | None = None) -> str | None:
    """The URL of a live local server for ``home_dir``, or None.

    An address file that no server holds the home for is left behind (a server killed, a machine
    restarted) and is not asked: its port may be another program's by now, even another user's
    trainyard server, which would answer its health check."""
    home_dir = home_dir or home()
    info = read_address(home_dir / ADDRESS_FILE)
    if info and held(home_dir) and healthy(info["url"]):
        return info["url"]
    return None


def resolve_server(explicit: str | None = None, *, autostart: bool = True) -> str:
    """``explicit``, else ``TRAINYARD_SERVER``, else the server `trainyard login` saved, else the local one."""
    url = explicit or server_url() or (read_login() or {}).get("server")
    if url:
        return url.rstrip("/")
    found = local_server_url()
    if found:
        return found
    if held(home()):  # a server is starting (or stopping): wait for its address
        found = wait_for_holder(home())
        if found:
            return found
    if not autostart:
        raise ServerUnavailable("no trainyard server is running; start one with `trainyard server`")
    return start_local_server()


def wait_for_holder(home_dir: Path, wait: float = 60.0) -> str | None:
    """The address of the server holding ``home_dir`` once it answers; None if the home is let go."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        found = local_server_url(home_dir)
        if found:
            return found
        if not held(home_dir):
            return None
        time.sleep(0.05)
    log_path = home_dir / "server.log"  # only a server started in the background writes one
    see = f"; see {log_path}" if log_path.exists() else "; see the output of the `trainyard server` that holds it"
    raise ServerUnavailable(f"a trainyard server holds {home_dir} but did not answer within {wait:.0f}s{see}")


def start_local_server(home_dir: Path | None = None, extra_args: list[str] | None = None,
                       wait: float = 60.0) -> str:
    """Start ``trainyard server`` in the background for ``home_dir`` (once, under a lock)."""
    home_dir = home_dir or home()
    secure(home_dir)
    with open(home_dir / START_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = local_server_url(home_dir) or (wait_for_holder(home_dir, wait) if held(home_dir) else None)
        if found:
            return found
        log_path = home_dir / "server.log"
        logger.info("starting a local trainyard server for %s (its log: %s)", home_dir, log_path)
        began = time.monotonic()
        env = {**os.environ, envvars.HOME: str(home_dir)}
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "trainyard", "server", *(extra_args or [])],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, close_fds=True,
            )
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            info = read_address(home_dir / ADDRESS_FILE)
            if info and info.get("pid") == proc.pid and healthy(info["url"], timeout=1):
                logger.info("the local trainyard server is up at %s (%.1fs)", info["url"], time.monotonic() - began)
                return info["url"]
            if proc.poll() is not None:
                # lost a race with a server started by hand: that one is as good
                found = wait_for_holder(home_dir, wait) if held(home_dir) else None
                if found:
                    return found
                tail = log_path.read_text(errors="replace")[-2000:]
                raise ServerUnavailable(f"the local trainyard server did not start (exit {proc.returncode}):\n{tail}")
            time.sleep(0.05)
        proc.terminate()
        raise ServerUnavailable(f"the local trainyard server did not answer within {wait:.0f}s; see {log_path}")
