"""nginx in front of the server (``trainyard server --front nginx``): its process, its files, its routes.

Why a front at all: a request through ``/serve/NAME`` costs a Python hop ~1.3× a direct request to a trivial
replica on these machines, where any user-space hop costs ~1.1× (bench/RESULTS.md, sessions 16–39: the
extra is Python's own work per request, whatever the loop or threads). nginx pays the floor. It takes the
port the server bound (handed over as an inherited socket: ``NGINX=fd;``, its own binary-upgrade way, so the
port-0 rules and the bind's errors stay the server's), sends small ``/serve/`` requests straight to a ready
replica (where front/fast_path.lua, told the routes on a control socket, chooses) and everything else to the
Python server on a unix socket in a private folder. Each fast request's line comes back on a unix datagram
socket (front/access_log.py) to be counted as the Python hop counts its own.

The master runs as a child of the server's main thread with ``PR_SET_PDEATHSIG``: a server killed outright
takes nginx with it, and the port with it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

import httpx

from trainyard.errors import TrainyardError
from trainyard.front.access_log import AccessLog
from trainyard.front.grants import Grants, control
from trainyard.front.nginx_conf import TOKEN, FastRoute, main_conf, routes_text
from trainyard.home import write_private

log = logging.getLogger("trainyard.front")
START_WAIT = 10.0  # seconds nginx may take to read its configuration and start its worker
STOP_WAIT = 5.0  # seconds its workers may finish what they serve after the server stops
_PR_SET_PDEATHSIG = 1


INSTALL = "Debian and Ubuntu: apt-get install nginx-light libnginx-mod-http-lua"


def find_nginx() -> tuple[str, str]:
    """The nginx binary and the folder of its Lua module, or an error saying how to get them."""
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                           if os.access(p, os.X_OK)), None)
    if found is None:
        raise TrainyardError(f"--front nginx: no nginx found on PATH or in /usr/sbin; install it ({INSTALL}) or "
                             "leave --front out")
    built = subprocess.run([found, "-V"], capture_output=True, text=True, timeout=30).stderr
    modules = re.search(r"--modules-path=(\S+)", built)
    folder = modules.group(1) if modules else "/usr/lib/nginx/modules"
    if not all((Path(folder) / m).is_file() for m in ("ndk_http_module.so", "ngx_http_lua_module.so")):
        raise TrainyardError(f"--front nginx: {found} has no Lua module in {folder} (it routes /serve/ requests "
                             f"without reloads); install it ({INSTALL}) or leave --front out")
    return found, folder


class NginxFront:
    def __init__(self, home: Path, listener: socket.socket, server_token: str | None,
                 on_request: Callable[[str, int, float, float], None], *, users: bool = False,
                 loopback: bool = True, tls: tuple[str, str] | None = None, trusted: tuple[str, ...] = ()) -> None:
        """``listener``: the public socket the server bound; ``server_token``: the one token the fast path always
        takes (None: none); ``on_request(name, status, seconds, ended_at)``: each fast request's line; ``users``:
        a server with users, whose tokens take the fast path once granted (:attr:`grants`); ``loopback``: a
        server on loopback (answers only loopback's names); ``tls``: (certificate, key) nginx serves with;
        ``trusted``: the proxies in front of nginx (``--forwarded-allow-ips``), whose X-Forwarded-* it reads."""
        self.binary, self.modules = find_nginx()
        # a folder per port: servers sharing a home (PostgreSQL) each have their own nginx
        self.prefix = Path(home) / "front" / str(listener.getsockname()[1])
        self.prefix.mkdir(mode=0o700, parents=True, exist_ok=True)
        for made in (self.prefix.parent, self.prefix):  # its configuration names the server's own token
            os.chmod(made, 0o700)
        self.run_dir = run_folder(self.prefix)
        self.api_socket = self.run_dir / "api.sock"
        self.control_socket = self.run_dir / "control.sock"
        self.listener = listener
        self.server_token = server_token if server_token is not None and TOKEN.match(server_token) else None
        self.on_request = on_request
        self.users, self.loopback, self.tls, self.trusted = users, loopback, tls, trusted
        self.grants: Grants | None = None
        self.access: AccessLog | None = None
        self.process: subprocess.Popen | None = None
        self._routes: str | None = None

    def api_listener(self) -> socket.socket:
        """The unix socket the Python server serves on, which only this account (nginx's workers) can reach."""
        for stale in (self.api_socket, self.control_socket):  # a server killed outright left them: the home is ours
            stale.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(self.api_socket))
        os.chmod(self.api_socket, 0o600)
        sock.listen(511)
        return sock

    def start(self) -> None:
        log_socket = self.run_dir / "log.sock"
        self.access = AccessLog(str(log_socket), self.on_request)
        host, port = self.listener.getsockname()[:2]
        listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        write_private(self.prefix / "nginx.conf", main_conf(
            user=pwd.getpwuid(os.geteuid()).pw_name, modules=self.modules, listen=listen,
            api_socket=str(self.api_socket), control_socket=str(self.control_socket), log_socket=str(log_socket),
            prefix=str(self.prefix), server_token=self.server_token, users=self.users, loopback=self.loopback,
            tls=self.tls, trusted=self.trusted))
        (self.prefix / "nginx.pid").unlink(missing_ok=True)
        fd = self.listener.fileno()
        os.set_inheritable(fd, True)
        with open(self.prefix / "stderr.log", "ab") as stderr:  # a pipe nobody reads could stop it
            self.process = subprocess.Popen(
                [self.binary, "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"), "-e",
                 str(self.prefix / "error.log"), "-g", "daemon off;"],
                env={**os.environ, "NGINX": f"{fd};"}, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=_die_with_parent,
                start_new_session=True)  # its group is its own: a master that died leaves workers to kill
        deadline = time.monotonic() + START_WAIT
        while not (self.prefix / "nginx.pid").exists():  # written once its configuration is read and checked
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise TrainyardError(f"--front nginx: nginx did not start: {self._why()}")
            time.sleep(0.01)
        if self.users:
            self.grants = Grants(self.control_socket)
        log.info("nginx %s in front (pid %d): /serve/ requests go straight to ready replicas",
                 self.binary, self.process.pid)

    def update(self, routes: list[FastRoute]) -> bool:
        """Send nginx the fast routes, if they changed since the last it took; whether they did."""
        text = routes_text(routes) if self.server_token is not None or self.users else ""
        if text == self._routes:
            return False
        control(self.control_socket, "PUT", "/routes", content=text.encode())
        self._routes = text
        return True

    def in_flight(self, address: str) -> int:
        """Requests nginx has sent the replica at ``address`` on the fast path and not yet seen answered (0 if
        nginx cannot say: a drained replica is then stopped as without a front)."""
        try:
            return int(control(self.control_socket, "GET", "/inflight", 2, params={"address": address}).text or 0)
        except (httpx.HTTPError, ValueError):
            return 0

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: requests under way are answered
            try:
                self.process.wait(STOP_WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process is not None:
            try:  # workers outlive a master that was killed, and would keep the port
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.access is not None:
            self.access.close()
        if self.grants is not None:
            self.grants.close()
        for name in ("api.sock", "control.sock", "log.sock"):
            (self.run_dir / name).unlink(missing_ok=True)
        if self.run_dir != self.prefix:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def _why(self) -> str:
        err = b""
        for name in ("stderr.log", "error.log"):
            try:
                err += (self.prefix / name).read_bytes()[-2000:]
            except OSError:
                pass
        lines = [ln for ln in err.decode(errors="replace").splitlines() if "[emerg]" in ln or "[alert]" in ln]
        return (lines or err.decode(errors="replace").splitlines() or ["no word from it"])[-1].strip()


def run_folder(prefix: Path) -> Path:
    """Where the front's sockets go: ``prefix``, or where a path to it is too long for a unix socket (107 bytes: a
    home deep in a test's folder) a private folder in the temporary one, named for this process. Such folders of
    this account's servers that died without removing theirs are removed first."""
    if len(str(prefix / "control.sock")) < 100:
        return prefix
    for left in Path(tempfile.gettempdir()).glob("ty-front-*-*"):
        try:
            pid = int(left.name.split("-")[2])
            if left.lstat().st_uid != os.geteuid() or pid == os.getpid():
                continue
            os.kill(pid, 0)
        except ProcessLookupError:  # its server is gone
            shutil.rmtree(left, ignore_errors=True)
        except (ValueError, OSError):  # not one of these, or a process of another account
            pass
    return Path(tempfile.mkdtemp(prefix=f"ty-front-{os.getpid()}-"))


def _die_with_parent() -> None:
    # in the child, before exec: nginx's master gets SIGTERM when the server's main thread ends, however it ends
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
