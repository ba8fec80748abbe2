"""The local engine: this machine is one node; each replica is a launcher process.

Launchers run in their own session, detached from the server, so killing the
server (even with SIGKILL) leaves jobs running; a restarted server finds them
again through ``launcher.json`` in each replica's dir and their result files.
A server of another home that took over a shared SQLite file finds that dir
through the attempt's handle (:meth:`LocalEngine.launched_dir`).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from trainyard.crashpoints import crash_point
from trainyard.engines import runtime as runtimes
from trainyard.engines import leftovers
from trainyard.engines.ahead import AheadFolders
from trainyard.engines.base import Engine, Launch, Observation
from trainyard.engines.leftovers import Leftover
from trainyard.errors import Unsupported
from trainyard.launch import handle as handles
from trainyard.launch import handoff, leftover_tree
from trainyard.launch.handle import HANDLE_NAME
from trainyard.launch.config import CONFIG_NAME, RESULT_NAME, LaunchConfig, renew_token
from trainyard.launch.runas import group_folder, traversable
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, NodeInfo
from trainyard.spec.reports import LaunchResult

ZYGOTE_LOG = "zygote.log"  # in the home
_FORKS_PER_WRITE = 64  # dirs written to the zygote at once: their lines stay well inside a pipe's buffer


class LocalEngine(Engine):
    name = "local"

    def __init__(self, home: Path, node: NodeInfo, container_runtime: str = "auto") -> None:
        """``container_runtime``: podman, docker, auto (the first that answers) or none (host only)."""
        self.home = Path(home)
        self.node = node
        self._children: dict[tuple[str, int], subprocess.Popen] = {}
        if container_runtime not in runtimes.CHOICES:
            raise ValueError(f"container runtime {container_runtime!r}: choose one of {', '.join(runtimes.CHOICES)}")
        self._runtime_choice = container_runtime
        self._runtime: runtimes.Runtime | None | bool = False  # False: not looked up yet (it takes a moment)
        self._zygote: subprocess.Popen | None = None  # forks launchers (see trainyard.launch.zygote)
        self._zygote_lock = threading.Lock()
        self._closed = False
        self._ahead = AheadFolders(self.home)  # the next attempt's attempts/<id>/r0, made after the last launch

    def nodes(self) -> list[NodeInfo]:
        return [self.node.fresh()]

    def replica_dir(self, attempt_id: str, replica: int) -> Path:
        return self.home / "attempts" / attempt_id / f"r{replica}"

    def launched_dir(self, attempt: AttemptInfo, replica: int) -> Path:
        """Where the replica was launched: its handle's dir, which is in another home when another
        server sharing this one's SQLite file launched it (and then died: this one took over)."""
        try:
            there = Path(attempt.handle["replicas"][replica]["dir"])
        except (KeyError, IndexError, TypeError):
            there = None
        return there if there is not None and there.is_dir() else self.replica_dir(attempt.id, replica)

    def runtime(self) -> runtimes.Runtime | None:
        if self._runtime is False:
            self._runtime = runtimes.find(self._runtime_choice)
        return self._runtime or None

    def validate(self, spec: JobSpec) -> None:
        if spec.image and spec.image_fallback == "refuse" and self.runtime() is None:
            why = ("the server runs with --container-runtime none" if self._runtime_choice == "none" else
                   f"no container runtime ({'podman or docker' if self._runtime_choice == 'auto' else self._runtime_choice}) "
                   "answers here")
            raise Unsupported(f"image {spec.image!r} needs a container runtime and {why}; "
                              "remove `image` to run on the host in `env`", field="image")

    def rendezvous(self, attempt: AttemptInfo) -> tuple[str, int]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return "127.0.0.1", s.getsockname()[1]

    def launch(self, attempt: AttemptInfo, spec: JobSpec, configs: list[LaunchConfig]) -> dict[str, Any]:
        found = self.launch_many([Launch(attempt, spec, configs)])[0]
        if isinstance(found, Exception):
            raise found
        return found

    def launch_many(self, launches: list[Launch]) -> list[dict[str, Any] | Exception]:
        """Every replica's folder and ``launch.json`` first, then all their launchers forked by the
        zygote in one round trip: launched one by one, each waited for the zygote to get a core,
        which on a loaded machine was most of a launch, and admission waited behind it."""
        out: list[list[dict | None] | Exception] = []
        forks: list[tuple[int, int, Path]] = []  # (launch, replica, its dir) for replicas not started yet
        for i, (attempt, spec, configs) in enumerate(launches):
            try:
                prepared = [self._prepare(attempt, r, spec, cfg) for r, cfg in enumerate(configs)]
            except Exception as e:  # this attempt is ended by the caller; the others go on
                out.append(e)
                continue
            out.append([existing for _, existing in prepared])
            forks += [(i, r, workdir) for r, (workdir, existing) in enumerate(prepared) if existing is None]
        forked = self._fork_launchers([workdir for _, _, workdir in forks])
        for (i, r, workdir), (pid, written) in zip(forks, forked):
            made = out[i]
            if isinstance(made, Exception):
                continue
            try:
                made[r] = written or self._started(launches[i].attempt.id, r, workdir, pid)
            except Exception as e:
                out[i] = e
        if forks:  # the launchers are told and their handles written: the next attempt's folders, off its path
            self._ahead.make()
        return [o if isinstance(o, Exception) else {"replicas": o} for o in out]

    def _prepare(self, attempt: AttemptInfo, replica: int, spec: JobSpec, config: LaunchConfig) -> tuple[Path, dict | None]:
        """The replica's dir with its ``launch.json``, and its handle if a launcher was started already."""
        workdir = self.replica_dir(attempt.id, replica)
        existing = _read_json(workdir / HANDLE_NAME)
        if existing:
            renew_token(workdir, config.token)
            return workdir, existing
        made = replica == 0 and self._ahead.take(workdir)
        if not made:
            workdir.mkdir(parents=True, exist_ok=True, mode=0o700)  # launch.json in it holds the attempt's credential
            workdir.chmod(0o700)  # mkdir's mode is masked by the umask, and not applied to a folder already there
        config.venv_cache = config.venv_cache or str(self.home / "venvs")
        if config.run_as and not config.input_cache:  # the node's cache is root's alone: the account's own, apart
            config.input_cache = str(group_folder(self.home / "cache" / f"uid-{config.run_as['uid']}",
                                                  int(config.run_as["gid"]), self.home))
        config.input_cache = config.input_cache or str(self.home / "cache" / "inputs")
        config.checkpoint_dir = config.checkpoint_dir or str(self.home / "checkpoints" / attempt.job_id)
        image = spec.image_of(replica)  # a PyTorchJob's Workers keep their own image
        if image and (found := self.runtime()) is not None:
            config.container = {"runtime": found.path, "kind": found.kind, "image": image,
                                "pull_policy": spec.image_pull_policy, "cpus": spec.resources.cpu}
        if config.run_as:  # the job, as its own account, passes through to its folders (launch.runas)
            traversable(workdir, self.home)
        config.write(workdir, made=made)
        return workdir, None

    def _started(self, attempt_id: str, replica: int, workdir: Path, pid: int | None) -> dict:
        """The handle of the replica's launcher (``pid`` from a zygote that did not write its handle; started
        here if None), written beside it (:mod:`trainyard.launch.handle`)."""
        if pid is None:  # no zygote: start a launcher the slow way
            # born with SIGTERM blocked (the mask survives exec): an early cancel waits for the launcher's handler
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            try:
                with open(workdir / "launcher.log", "ab") as log:
                    proc = subprocess.Popen(
                        [sys.executable, "-m", "trainyard.launch", str(workdir)],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                        start_new_session=True, close_fds=True,
                    )
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            crash_point("local.launcher_started")
            self._children[(attempt_id, replica)] = proc
            pid = proc.pid
        try:
            create_time: float | None = psutil.Process(pid).create_time()
        except psutil.NoSuchProcess:
            # a quick command's launcher has already reported, exited and been reaped by the zygote: it
            # was launched, not a failed launch (reconcile finds no process and reads its result.json)
            create_time = None
        return handles.write(str(workdir), pid, create_time)

    def _fork_launchers(self, workdirs: list[Path]) -> list[tuple[int | None, dict | None]]:
        """The zygote's launcher for each of ``workdirs``: its pid (None where the zygote is not there) and its
        handle where the zygote wrote it. The dirs go down the pipe together and the answers come back in
        order: one round trip, not one each."""
        out: list[tuple[int | None, dict | None]] = []
        none = (None, None)
        with self._zygote_lock:
            for at in range(0, len(workdirs), _FORKS_PER_WRITE):
                chunk = workdirs[at:at + _FORKS_PER_WRITE]
                if self._closed:
                    return out + [none] * (len(workdirs) - len(out))
                if self._zygote is None or self._zygote.poll() is not None:
                    # its stderr, and its launchers' until each makes its launcher.log, is zygote.log
                    with open(self.home / ZYGOTE_LOG, "ab") as log:
                        self._zygote = subprocess.Popen(
                            [sys.executable, "-m", "trainyard.launch.zygote"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=log, start_new_session=True, close_fds=True,
                        )
                try:
                    self._zygote.stdin.write("".join(f"{w}\n" for w in chunk).encode())
                    self._zygote.stdin.flush()
                    for w in chunk:
                        pid, _, started = self._zygote.stdout.readline().partition(b" ")
                        written = handles.record(str(w), int(pid), float(started)) if started else None
                        out.append((int(pid), written))
                except (OSError, ValueError):
                    self._zygote.kill()
                    self._zygote = None
                    return out + [none] * (len(workdirs) - len(out))
        return out

    def cancel(self, attempt: AttemptInfo) -> None:
        for r in attempt.replicas:
            workdir = self.launched_dir(attempt, r.index)
            # held from the look to the signal: a launcher that left the attempt takes others (handoff)
            with handoff.held(workdir):
                proc = self._process(workdir)
                if proc is not None:
                    try:
                        proc.send_signal(signal.SIGTERM)
                    except psutil.Error:
                        pass
            if proc is None:  # no launcher to stop it: what it left, its command or container, goes now
                leftover_tree.kill_left(str(workdir))
                self._remove_container(workdir, attempt.id, r.index)

    def kill(self, attempt: AttemptInfo, replica: int) -> bool:
        workdir = self.launched_dir(attempt, replica)
        with handoff.held(workdir):
            if (proc := self._process(workdir)) is not None:
                try:
                    proc.kill()  # SIGKILL ends a stopped (SIGSTOP) process too
                except psutil.Error:
                    pass
        end = time.monotonic() + 1.0  # a killed process is gone in ms: the caller then says why it ended
        while (left := self._process(workdir) is not None or leftover_tree.kill_left(str(workdir))) \
                and time.monotonic() < end:
            time.sleep(0.02)
        if not left:
            self._remove_container(workdir, attempt.id, replica)
        return not left

    def reconcile(self, attempts: list[AttemptInfo]) -> list[Observation]:
        self._reap()
        out = []
        btime = handles.boot_time()  # None: no /proc, psutil looks
        for a in attempts:
            for r in a.replicas:
                if r.status.is_terminal():
                    continue
                workdir = self.launched_dir(a, r.index)
                if self._running(workdir, btime):
                    # even with result.json written: the launcher is still delivering its logs
                    out.append(Observation(a.id, r.index, "alive"))
                elif (result := _read_result(workdir / RESULT_NAME)) is not None:
                    out.append(Observation(a.id, r.index, "exited", result))
                elif not (workdir / HANDLE_NAME).exists():
                    # launched without the zygote as the server died, before its handle was written: found, it is
                    # not launched again beside itself
                    found = (workdir / CONFIG_NAME).exists() and handles.adopt(str(workdir)) is not None
                    out.append(Observation(a.id, r.index, "alive" if found else "not_launched"))
                elif leftover_tree.kill_left(str(workdir)):
                    # the launcher died and its command ran on: killed now, lost once gone (its retry must
                    # not run beside it)
                    out.append(Observation(a.id, r.index, "alive"))
                else:
                    self._remove_container(workdir, a.id, r.index)  # the launcher died: nobody else will
                    out.append(Observation(a.id, r.index, "lost",
                                           detail="the launcher process is gone and left no result"))
        return out

    def _remove_container(self, workdir: Path, attempt_id: str, replica: int) -> None:
        config = _read_json(workdir / CONFIG_NAME)
        section = (config or {}).get("container")
        if section:
            from trainyard.launch.container import container_name, remove

            remove(section["runtime"], container_name(attempt_id, replica))

    def _running(self, workdir: Path, btime: float | None) -> bool:
        """Whether the replica in ``workdir`` has a live launcher: :meth:`_process`, without psutil where there is
        a /proc (``btime``, :func:`trainyard.launch.handle.boot_time`)."""
        if btime is None:
            return self._process(workdir) is not None
        if (workdir / handoff.LEFT_NAME).exists():  # it left for another attempt, after this one's end
            return False
        handle = _read_json(workdir / HANDLE_NAME)
        return bool(handle) and handle.get("create_time") is not None and handles.running(handle, btime)

    def _process(self, workdir: Path) -> psutil.Process | None:
        """The live launcher of the replica in ``workdir``, matched on pid and start time (pids get reused)."""
        handle = _read_json(workdir / HANDLE_NAME)
        if not handle or handle.get("create_time") is None:  # None: seen gone when it was launched
            return None
        try:
            proc = psutil.Process(handle["pid"])
            if (abs(proc.create_time() - handle["create_time"]) > handles.SAME_START
                    or proc.status() == psutil.STATUS_ZOMBIE):
                return None
            # a launcher that left for another attempt (after this one's end): this one has none
            return None if (workdir / handoff.LEFT_NAME).exists() else proc
        except psutil.Error:
            return None

    def _reap(self) -> None:
        for key, proc in list(self._children.items()):
            if proc.poll() is not None:
                del self._children[key]

    def remove_leftovers(self, items: list[Leftover]) -> tuple[int, int]:
        return leftovers.remove(self.home, [(i.kind, i.name) for i in items if i.node == self.node.name])

    def close(self) -> None:
        with self._zygote_lock:
            self._closed = True
            zygote, self._zygote = self._zygote, None
        self._ahead.close()
        if zygote is not None and zygote.poll() is None:
            zygote.stdin.close()  # EOF: the zygote exits; launchers it forked go on
            zygote.wait(5)
        self._reap()


def _read_result(path: Path) -> LaunchResult | None:
    try:
        text = path.read_bytes()
    except OSError:
        return None
    return LaunchResult.read(text, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
