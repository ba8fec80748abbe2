"""The local engine: this machine is one node; each attempt is a launcher process.

Launchers run in their own session, detached from the server, so killing the
server (even with SIGKILL) leaves jobs running; a restarted server finds them
again through ``launcher.json`` in each attempt dir and their result files.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from trainyard.engines.base import Engine, Observation
from trainyard.errors import Unsupported
from trainyard.launch.config import RESULT_NAME, LaunchConfig
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, NodeInfo

HANDLE_NAME = "launcher.json"


def container_runtime() -> str | None:
    """docker or podman, only when its engine answers (the client alone is not enough)."""
    for tool in ("podman", "docker"):
        path = shutil.which(tool)
        if path and subprocess.run([path, "info"], capture_output=True, timeout=10).returncode == 0:
            return path
    return None


class LocalEngine(Engine):
    name = "local"

    def __init__(self, home: Path, node: NodeInfo) -> None:
        self.home = Path(home)
        self.node = node
        self._children: dict[str, subprocess.Popen] = {}
        self._runtime: str | None | bool = False  # False: not looked up yet

    def nodes(self) -> list[NodeInfo]:
        return [self.node]

    def attempt_dir(self, attempt_id: str) -> Path:
        return self.home / "attempts" / attempt_id

    def validate(self, spec: JobSpec) -> None:
        if spec.replicas > 1:
            raise Unsupported("replicas > 1: the local engine runs one replica per job for now",
                              field="replicas")
        if spec.image:
            if self._runtime is False:
                self._runtime = container_runtime()
            if not self._runtime:
                raise Unsupported(
                    f"image {spec.image!r} needs a container engine (docker or podman) and none is "
                    "running here; remove `image` to run on the host in `env`", field="image")

    def launch(self, attempt: AttemptInfo, spec: JobSpec, config: LaunchConfig) -> dict[str, Any]:
        workdir = self.attempt_dir(attempt.id)
        existing = _read_handle(workdir)
        if existing:
            return existing
        workdir.mkdir(parents=True, exist_ok=True)
        config.venv_cache = config.venv_cache or str(self.home / "venvs")
        config.input_cache = config.input_cache or str(self.home / "cache" / "inputs")
        config.checkpoint_dir = config.checkpoint_dir or str(self.home / "checkpoints" / attempt.job_id)
        if spec.image:
            config.command = self._containerize(spec.image, config, workdir / "work")
        config.write(workdir)
        with open(workdir / "launcher.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "trainyard.launch", str(workdir)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True,
            )
        handle = {"pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time(), "dir": str(workdir)}
        tmp = workdir / (HANDLE_NAME + ".tmp")
        tmp.write_text(json.dumps(handle))
        tmp.replace(workdir / HANDLE_NAME)
        self._children[attempt.id] = proc
        return handle

    def _containerize(self, image: str, config: LaunchConfig, cwd: Path) -> list[str]:
        """The command inside ``image``, with the attempt's files mounted at the same paths."""
        self.validate(JobSpec(command="true", image=image))
        envs = [a for k in config.env for a in ("-e", k)]
        return [str(self._runtime), "run", "--rm", "--init", "--network=host", *envs,
                "-v", f"{self.home}:{self.home}", "-w", str(cwd), image, *config.command]

    def cancel(self, attempt: AttemptInfo) -> None:
        proc = self._process(attempt)
        if proc is None:
            return
        try:
            proc.send_signal(signal.SIGTERM)
        except psutil.Error:
            pass

    def reconcile(self, attempts: list[AttemptInfo]) -> list[Observation]:
        self._reap()
        out = []
        for a in attempts:
            workdir = self.attempt_dir(a.id)
            result = _read_json(workdir / RESULT_NAME)
            if result is not None:
                out.append(Observation(a.id, "exited", result))
            elif self._process(a) is not None:
                out.append(Observation(a.id, "alive"))
            elif not (a.handle or _read_handle(workdir)):
                out.append(Observation(a.id, "not_launched"))
            else:
                out.append(Observation(a.id, "lost", detail="the launcher process is gone and left no result"))
        return out

    def _process(self, attempt: AttemptInfo) -> psutil.Process | None:
        """The live launcher of ``attempt``, matched on pid and start time (pids get reused)."""
        handle = attempt.handle or _read_handle(self.attempt_dir(attempt.id))
        if not handle:
            return None
        try:
            proc = psutil.Process(handle["pid"])
            if abs(proc.create_time() - handle["create_time"]) > 0.05 or proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return proc
        except psutil.Error:
            return None

    def _reap(self) -> None:
        for attempt_id, proc in list(self._children.items()):
            if proc.poll() is not None:
                del self._children[attempt_id]

    def close(self) -> None:
        self._reap()


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _read_handle(workdir: Path) -> dict[str, Any] | None:
    return _read_json(workdir / HANDLE_NAME)
