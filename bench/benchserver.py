"""A trainyard server of its own for a benchmark: started in a fresh TRAINYARD_HOME, stopped after."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from trainyard import Client


class BenchServer:
    """``python -m trainyard server`` (or ``argv``) in its own process group, for one home."""

    def __init__(self, home: Path, argv: list[str] | None = None, ready_timeout: float = 60.0) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "TRAINYARD_HOME": str(home)}
        env.pop("TRAINYARD_SERVER", None)
        self.home, self.log = home, open(home / "server.log", "ab")
        self.proc = subprocess.Popen(argv or [sys.executable, "-m", "trainyard", "server"], env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.url = self._wait_ready(home / "server.json", ready_timeout)
        self.client = Client(self.url, token=(home / "token").read_text().strip())  # the home's own token

    def _wait_ready(self, address: Path, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = (self.home / "server.log").read_text(errors="replace").strip().splitlines()[-5:]
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n    " + "\n    ".join(tail))
            try:
                info = json.loads(address.read_text())
                if info.get("pid") == self.proc.pid and httpx.get(f"{info['url']}/healthz", timeout=1).is_success:
                    return info["url"]
            except (OSError, ValueError, httpx.HTTPError):
                pass
            time.sleep(0.02)
        raise RuntimeError(f"server did not answer within {timeout:.0f}s; see {self.home / 'server.log'}")

    def close(self) -> None:
        """SIGTERM the server's process group, SIGKILL it after 30 s."""
        self.client.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
