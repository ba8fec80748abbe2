"""A real `trainyard server` subprocess that tests can kill and restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx


class ServerProcess:
    def __init__(self, home: Path, args: list[str] | None = None, db: str | None = None) -> None:
        self.home = Path(home)
        self.args = list(args or [])
        if db:
            self.args += ["--db", db]
        self.proc: subprocess.Popen | None = None
        self.url = ""

    @property
    def env(self) -> dict[str, str]:
        env = {**os.environ, "TRAINYARD_HOME": str(self.home)}
        env.pop("TRAINYARD_SERVER", None)
        return env

    def start(self, timeout: float = 30) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        log = open(self.home / "server-test.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "trainyard", "server", *self.args], env=self.env,
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                info = json.loads((self.home / "server.json").read_text())
                if info["pid"] == self.proc.pid and httpx.get(info["url"] + "/healthz", timeout=1).status_code == 200:
                    self.url = info["url"]
                    return
            except (OSError, ValueError, KeyError, httpx.HTTPError):
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {(self.home / 'server-test.log').read_text()[-3000:]}")
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    @property
    def headers(self) -> dict[str, str]:
        """What a raw HTTP request to this server needs to be let in (for tests using httpx directly)."""
        return {}

    def client(self):  # noqa: ANN201
        from trainyard.sdk.client import Client

        return Client(self.url)

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

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {**self.env, "TRAINYARD_SERVER": self.url}
        return subprocess.run([sys.executable, "-m", "trainyard", *args], env=env, capture_output=True,
                              text=True, timeout=timeout)
