"""Start `trainyard server` processes forked from one that has already imported the server's code.

A test run starts about 330 servers; each spent ~1.6 s of CPU importing FastAPI, SQLAlchemy,
pydantic and our models before it could answer (bench/RESULTS.md, session 47), about a sixth of
the suite's CPU on CI's two cores. This process (one a pytest worker, started at its first server)
imports them once and forks a child per server, which then runs exactly what ``python -m trainyard
server ARGS`` runs: its own session, environment, folder and log, and the interpreter's own exit
(atexit, threads joined). Nothing is imported that reads the environment or the terminal as it
loads (the CLI's modules load in the child). Tests about the process itself (its command line, a
wrapper that execs it, interpreter variables) start it with exec as before
(:class:`tests.support.servers.ServerProcess`, ``fork=False``).

Protocol, one JSON line each way on stdin/stdout: ``{"start": {argv, env, cwd, log}}`` → ``{"pid"}``;
``{"wait": pid, "timeout": s}`` → ``{"status": waitpid's status or null}``. The children are this
process's: it reaps them only when asked, so a child that ended stays a zombie until its test waits,
as it did as the test's own ``Popen`` child.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# what `python -X importtime -m trainyard server` loads before it answers, less what reads the environment or the
# terminal as it loads (trainyard.cli.*: rich's consoles are made there)
PRELOAD = ("trainyard.server", "trainyard.api.app", "trainyard.store.db", "trainyard.engines.local", "uvicorn",
           "uvicorn.config", "uvloop", "alembic.command", "alembic.config", "alembic.script",
           "alembic.runtime.migration", "typer", "typer._adapters", "rich.console", "rich.markup", "httpcore",
           "fsspec", "psutil")


def _become(start: dict) -> None:
    """In the forked child: what ``Popen(..., start_new_session=True, stdout=log, stderr=STDOUT)`` and the
    interpreter's start would have set up."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(start["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, 65536)  # close_fds: the requests' pipes are not the server's
    os.chdir(start["cwd"])
    os.environ.clear()
    os.environ.update(start["env"])
    sys.path[0] = start["cwd"]  # as `python -m` sets it
    sys.argv = [sys.argv[0], *start["argv"]]  # runpy's alter_sys puts trainyard/__main__.py's path in argv[0]


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0  # reaped before (a second wait): Popen's answer too
        if done:
            return status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def main() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    requests, replies = sys.stdin.buffer, sys.stdout
    while True:
        line = requests.readline()
        if not line:
            return  # the pytest worker is gone
        request = json.loads(line)
        if "wait" in request:
            reply = {"status": _wait(request["wait"], request["timeout"])}
        else:
            pid = os.fork()
            if pid == 0:
                _become(request["start"])
                break
            reply = {"pid": pid}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    import runpy

    runpy.run_module("trainyard", run_name="__main__", alter_sys=True)


class Forker:
    """The pytest worker's side: one fork server, started at the first request."""

    _lock = threading.Lock()
    _proc: subprocess.Popen | None = None

    @classmethod
    def _ask(cls, request: dict) -> dict:
        with cls._lock:
            if cls._proc is None or cls._proc.poll() is not None:
                root = Path(__file__).resolve().parents[2]
                cls._proc = subprocess.Popen([sys.executable, "-m", "tests.support.server_fork"], cwd=root,
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert cls._proc.stdin and cls._proc.stdout
            cls._proc.stdin.write(json.dumps(request).encode() + b"\n")
            cls._proc.stdin.flush()
            line = cls._proc.stdout.readline()
            if not line:
                raise RuntimeError("the server fork process died (tests/support/server_fork.py)")
            return json.loads(line)

    @classmethod
    def start(cls, argv: list[str], env: dict[str, str], cwd: str, log: str) -> "ForkedProcess":
        pid = cls._ask({"start": {"argv": argv, "env": env, "cwd": cwd, "log": log}})["pid"]
        return ForkedProcess(pid, argv)

    @classmethod
    def wait(cls, pid: int, timeout: float) -> int | None:
        return cls._ask({"wait": pid, "timeout": timeout})["status"]


class ForkedProcess:
    """What tests use of a ``subprocess.Popen``: ``pid``, ``poll``, ``wait``, ``returncode``, signals."""

    def __init__(self, pid: int, args: list[str]) -> None:
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self._reap(0)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            # in slices, so that a test's other thread may start a server meanwhile
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if self._reap(max(left, 0)) is not None:
                return self.returncode  # type: ignore[return-value]
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)  # type: ignore[arg-type]

    def _reap(self, timeout: float) -> int | None:
        if self.returncode is None:
            status = Forker.wait(self.pid, timeout)
            if status is not None:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


if __name__ == "__main__":
    main()
