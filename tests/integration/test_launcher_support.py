"""Helpers for the launcher tests: a recording report server and a way to run the launcher.

The server is a real HTTP server on 127.0.0.1 (a test double of the API, not
a mock): it records every report and answers as the test tells it to.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.stub_http import send_json
from trainyard.launch.config import RESULT_NAME, LaunchConfig

PYTHON = sys.executable


class ReportServer:
    """Records ``POST /internal/attempts/<id>/report`` bodies; ``answer`` picks the reply.

    ``reports`` holds the acknowledged (2xx) bodies, in order; ``requests`` counts all.
    With ``token`` set, a report without ``Authorization: Bearer <token>`` is answered 401, as the API does.
    """

    def __init__(self, port: int = 0):
        self.reports: list[dict] = []  # acknowledged ones
        self.requests = 0
        self.paths: list[str] = []
        self.headers: list[dict] = []
        self.answer = lambda body: (200, {"cancel": False})
        self.token: str | None = None
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, reply = outer.answer(body)
                if outer.token is not None and self.headers.get("Authorization") != f"Bearer {outer.token}":
                    status, reply = 401, {"code": "attempt_unauthorized"}
                with outer._lock:
                    outer.requests += 1
                    if 200 <= status < 300:  # only what the launcher was told was received
                        outer.reports.append(body)
                        outer.paths.append(self.path)
                        outer.headers.append(dict(self.headers))
                send_json(self, status, reply)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.reports)

    def log_bytes(self) -> bytes:
        """output.log as rebuilt from the reports, checking offsets leave no gap."""
        out = b""
        for r in self.snapshot():
            if "log" in r:
                data = r["log"]["data"].encode()
                assert r["log"]["offset"] <= len(out), "gap in log offsets"
                out = out[: r["log"]["offset"]] + data
        return out

    def metric_lines(self) -> list[str]:
        lines: list[str] = []
        seen: set[int] = set()
        for r in self.snapshot():
            m = r.get("metrics")
            if m and m["offset"] not in seen:
                seen.add(m["offset"])
                lines += m["lines"]
        return lines

    def final(self) -> dict | None:
        finals = [r for r in self.snapshot() if "result" in r]
        return finals[-1] if finals else None


@pytest.fixture
def report_server():
    server = ReportServer()
    yield server
    server.close()


# one per test process: the two workers' launchers share the host's cgroup tree, where the
# memory group is named for the attempt, and a shared name let one test see the other's group
ATTEMPT_ID = f"att-{os.getpid()}"


def make_config(attempt_dir: Path, server_url: str, command: list[str], **kw) -> LaunchConfig:
    attempt_dir.mkdir(parents=True, exist_ok=True)
    kw.setdefault("grace_period", 1.0)
    kw.setdefault("exit_report_deadline", 10.0)
    config = LaunchConfig(job_id="job-1", attempt_id=ATTEMPT_ID, attempt=1, server=server_url,
                          command=command, **kw)
    config.write(attempt_dir)
    return config


def start_launcher(attempt_dir: Path) -> subprocess.Popen:
    return subprocess.Popen([PYTHON, "-m", "trainyard.launch", str(attempt_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def run_launcher(attempt_dir: Path, timeout: float = 60) -> dict:
    """Run the launcher to the end; its result.json."""
    proc = start_launcher(attempt_dir)
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out.decode()
    return read_result(attempt_dir)


def read_result(attempt_dir: Path) -> dict:
    return json.loads((attempt_dir / RESULT_NAME).read_text())


def script(tmp_path: Path, name: str, text: str) -> list[str]:
    """A python script in tmp_path, as an argv."""
    path = tmp_path / name
    path.write_text(text)
    return [PYTHON, str(path)]


def pid_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def log_of(attempt_dir: Path) -> bytes:
    """output.log so far (empty before the launcher created it)."""
    try:
        return (attempt_dir / "output.log").read_bytes()
    except FileNotFoundError:
        return b""
