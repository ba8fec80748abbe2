"""A real `trainyard server` subprocess that tests can kill and restart."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.server_fork import Forker, ForkedProcess


class ServerProcess:
    def __init__(self, home: Path, args: list[str] | None = None, db: str | None = None,
                 verify: ssl.SSLContext | bool = True, wrapper: list[str] | None = None, fork: bool = True) -> None:
        """``verify``: what to trust of a server that serves HTTPS with its own certificate; ``wrapper``: a
        command that execs the server's command line after it (so the server keeps the wrapper's pid);
        ``fork``: forked from a process that has imported the server's code (:mod:`tests.support.server_fork`),
        else (and always with a wrapper, or with ``TRAINYARD_TEST_SERVER_EXEC=1`` in the tests' environment)
        ``python -m trainyard server`` as a user starts it."""
        self.home = Path(home)
        self.wrapper = list(wrapper or [])
        self.fork = fork
        self.verify = verify
        self.args = list(args or [])
        if db:
            self.args += ["--db", db]
        self.proc: subprocess.Popen | ForkedProcess | None = None
        self.url = ""
        self.log_path = self.home / "server-test-main.log"
        self.extra_env: dict[str, str] = {}  # e.g. TRAINYARD_TEST_CRASH_AT for the next start (crashpoints)

    @property
    def env(self) -> dict[str, str]:
        env = {**os.environ, "TRAINYARD_HOME": str(self.home), **self.extra_env}
        env.pop("TRAINYARD_SERVER", None)
        return env

    def start(self, timeout: float = 30, *, port: int | None = None) -> None:
        """Start and wait until it answers: as the home's announced server, or (``port`` given, for a
        server that may not lead) on that port."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_path = self.home / f"server-test-{port or 'main'}.log"
        args = [*self.args, *(["--port", str(port)] if port else [])]
        # PYTHON* variables are the interpreter's settings: a fork keeps the fork process's
        if (self.fork and not self.wrapper and os.environ.get("TRAINYARD_TEST_SERVER_EXEC", "") in ("", "0")
                and not any(k.startswith("PYTHON") for k in self.extra_env)):
            self.proc = Forker.start(["server", *args], self.env, os.getcwd(), str(self.log_path))
        else:
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen([*self.wrapper, sys.executable, "-m", "trainyard", "server", *args],
                                             env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if port:
                    url = f"http://127.0.0.1:{port}"
                else:
                    info = json.loads((self.home / "server.json").read_text())
                    url = info["url"] if info["pid"] == self.proc.pid else ""
                if url and httpx.get(url + "/healthz", timeout=1, verify=self.verify).status_code == 200:
                    self.url = url
                    return
            except (OSError, ValueError, KeyError, httpx.HTTPError):
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    @property
    def token(self) -> str:
        """The token this server requires: the home's own, made at its first start."""
        return (self.home / "token").read_text().strip()

    @property
    def headers(self) -> dict[str, str]:
        """What a raw HTTP request to this server needs to be let in (for tests using httpx directly)."""
        return {"Authorization": f"Bearer {self.token}"}

    def client(self):  # noqa: ANN201
        from trainyard.sdk.client import Client

        return Client(self.url, token=self.token)

    def role(self) -> str:
        return httpx.get(self.url + "/healthz", timeout=5).json()["role"]

    def kill(self) -> None:
        """SIGKILL: no clean-up at all, as a crash would."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def stop_all(self) -> None:
        """Stop the server, then whatever it started that outlived it: jobs keep running when a server
        stops, and a launcher keeps offering its result for an hour; after a test nobody will take it."""
        self.stop()
        import psutil

        for p in psutil.process_iter():
            try:
                if p.environ().get("TRAINYARD_HOME") == str(self.home):
                    p.kill()
            except psutil.Error:
                pass

    def cli(self, *args: str, timeout: float = 120, cwd: Path | None = None,
            env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
        """`trainyard ARGS` against this server, in ``cwd``, with ``env`` added to the environment (and
        ``stdin`` on its standard input)."""
        env = {**self.env, "TRAINYARD_SERVER": self.url, **(env or {})}
        return subprocess.run([sys.executable, "-m", "trainyard", *args], env=env, capture_output=True,
                              text=True, timeout=timeout, cwd=cwd, input=stdin)


def started_with_config(tmp_path: Path, text: str) -> ServerProcess:
    """A server of its own under ``tmp_path``, started with ``trainyard server --config`` of ``text`` and no
    container runtime; the caller stops it (``stop_all``)."""
    config = tmp_path / "server.yaml"
    config.write_text(text)
    srv = ServerProcess(tmp_path / "home", ["--config", str(config), "--container-runtime", "none"])
    srv.start()
    return srv
