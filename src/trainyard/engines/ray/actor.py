"""The Ray actors that start the trainyard launcher on a node and wait for it.

:class:`NodeAgent`, one per node, long-lived: it starts the launchers of the
replicas that ask for no GPUs once Ray has reserved their placement-group
bundle (Ray accounts for their CPUs and memory there). A new actor per replica
would cost a Ray worker process per job, which is most of a short job's time;
the agent is a call into a process that is already up.

:class:`ReplicaActor`, one per replica that asks for GPUs: it holds its bundle
itself, because Ray hands out GPU ids only to a worker it places in the bundle.

Either way the launcher is the one the local engine starts, so logs, metrics,
memory limit, outputs, checkpoints and cancel behave the same. A stop is a
SIGTERM to the launcher, which stops the command and kills its tree after the
grace period; should the command still run :data:`KILL_SLACK` seconds past
that (a launcher that cannot act: stopped, hung), the actor SIGKILLs the
launcher and every process under it itself. Both are named and detached, so a
restarted control plane finds them again and re-attaches (``config=None``).

Imports no Ray at module level: it is loaded by Ray workers, which have Ray,
and by the engine, which wraps it with ``ray.remote`` itself.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from trainyard import envvars
from trainyard.launch.config import CONFIG_NAME, RESULT_NAME, LaunchConfig
from trainyard.spec.reports import LaunchResult
from trainyard.status import Reason

PR_SET_PDEATHSIG = 1
NOT_STARTED = "not-started"  # what attaching to an actor that never started a launcher returns
LOST = "lost"  # what attaching to an agent answers for a launcher it started and no longer knows (it restarted)
AGENT_THREADS = 1000  # calls an agent serves at once: one per replica waiting for its bundle or running
KILL_SLACK = 5.0  # seconds past the grace period the launcher has to end the command before the actor does
EARLY_KEPT = 10_000  # stops an agent keeps for run calls yet to come (see NodeAgent.stop); the oldest go first


def _die_with_parent() -> None:
    """In the launcher, before exec: SIGTERM when the thread that started it dies.

    The actor's process goes when its placement group is removed or its node
    dies; a SIGTERM makes the launcher stop the command and reap its tree
    instead of leaving it running with nobody to report to. The launcher tells
    that SIGTERM from a cancel by ``TRAINYARD_LAUNCHER_STARTER`` and reports
    the replica lost, not cancelled.
    """
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass
    # and SIGTERM blocked until the launcher's handler is in place: an early stop() is then a cancel
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _on_this_node(config: dict[str, Any], workdir: str, root: str | None) -> tuple[dict[str, Any], Path]:
    """The config and replica folder with the server's home path replaced by this node's own root."""
    node_root = os.environ.get(envvars.NODE_ROOT)
    if not node_root or not root:
        return config, Path(workdir)

    def here(path: str | None) -> str | None:
        if path is None or not Path(path).is_relative_to(root):
            return path
        return str(Path(node_root) / Path(path).relative_to(root))

    config = {**config, **{k: here(config.get(k)) for k in ("venv_cache", "input_cache", "checkpoint_dir")}}
    return config, Path(here(workdir))


class ReplicaActor:
    def __init__(self, gpus_from_ray: bool = True) -> None:
        self._gpus_from_ray = gpus_from_ray  # an agent's replicas ask for none: no need to ask Ray
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._dir: Path | None = None
        self._exited = threading.Event()
        self._stopped = False
        self._grace = 0.0  # the config's grace period, read when the launcher starts (a stop needs one only then)
        self._armed = False  # a kill after the grace period is due
        self._killed = False  # the actor killed the launcher's tree: the launcher did not stop it in time
        self._kill_done = threading.Event()  # ... and nothing of it is left

    def run(self, config: dict[str, Any] | None, workdir: str, root: str | None = None) -> LaunchResult | None:
        """Start the launcher (once) and wait for it; the launcher's result, or None if it left none.

        ``config=None`` only attaches: a restarted control plane waits on a
        launcher that an earlier one started. If none was ever started (the
        earlier one died between creating this actor and its ``run`` call), it
        returns :data:`NOT_STARTED` at once, and the engine launches again.

        ``root`` is the server's home path, under which ``workdir`` and the config's caches and
        checkpoint dir are named; a node whose ``TRAINYARD_NODE_ROOT`` says otherwise keeps them there.
        """
        if (early := self.start(config, workdir, root)) is not None:
            return early
        if not self.started:
            return NOT_STARTED
        self._exited.wait()
        if self._killed:  # the launcher died first: its command and their children may still be going
            self._kill_done.wait()
        try:
            text = (self._dir / RESULT_NAME).read_bytes()
        except OSError:
            return self._killed_result() if self._killed else None
        return LaunchResult.read(text, self._dir / RESULT_NAME)

    def start(self, config: dict[str, Any] | None, workdir: str, root: str | None = None) -> LaunchResult | None:
        """The start-once half of :meth:`run`: a result only for a launcher that never will start."""
        with self._lock:
            if self._pid is None and config is not None:
                if self._stopped:  # cancelled before it could start: the launcher never runs
                    return LaunchResult(reason=Reason.CANCELLED, message="cancelled before it started")
                self._start(*_on_this_node(config, workdir, root))
        return None

    def _killed_result(self) -> LaunchResult:
        """What a launcher this actor had to kill would have said; kept where an attaching agent reads it."""
        result = LaunchResult(reason=Reason.CANCELLED, message=(
            f"cancelled: the command still ran {KILL_SLACK:g} s past its grace period of {self._grace:g} s; "
            "the launcher and its process tree were killed"))
        tmp = self._dir / (RESULT_NAME + ".tmp")
        try:
            tmp.write_text(result.model_dump_json())
            tmp.replace(self._dir / RESULT_NAME)
        except OSError:
            pass
        return result

    def _start(self, values: dict[str, Any], workdir: Path) -> None:
        config = LaunchConfig(**values)
        self._grace = float(config.grace_period)
        if self._gpus_from_ray:
            import ray

            # the GPUs Ray gave this actor's bundle, whatever the planner thought they would be
            config.gpus = [str(g) for g in ray.get_gpu_ids()]
        workdir.mkdir(parents=True, exist_ok=True, mode=0o700)  # launch.json in it holds the attempt's credential
        workdir.chmod(0o700)  # mkdir's mode is masked by the umask, and not applied to a folder already there
        config.write(workdir)
        self._dir = workdir
        started = threading.Event()

        def launch_and_wait() -> None:
            # a thread of its own that lives as long as the launcher: PDEATHSIG follows the thread
            try:
                with open(workdir / "launcher.log", "ab") as log:
                    proc = subprocess.Popen(
                        [sys.executable, "-m", "trainyard.launch", str(workdir)], stdin=subprocess.DEVNULL,
                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                        preexec_fn=_die_with_parent,
                        env={**os.environ, envvars.LAUNCHER_STARTER: f"{os.getpid()}:{threading.get_native_id()}"},
                    )
            except OSError as e:
                result = LaunchResult(reason=Reason.SETUP, message=f"cannot start the launcher: {e}")
                (workdir / RESULT_NAME).write_text(result.model_dump_json())
                self._pid = -1
                self._exited.set()
                started.set()
                return
            self._pid = proc.pid
            started.set()
            proc.wait()
            self._exited.set()

        threading.Thread(target=launch_and_wait, name="launcher", daemon=True).start()
        started.wait()

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def started(self) -> bool:
        return self._pid is not None

    def stop(self) -> bool:
        """SIGTERM to the launcher (it passes it on, waits the grace period, kills the tree); should the
        command outlive that by :data:`KILL_SLACK`, SIGKILL to the launcher and everything under it."""
        with self._lock:
            self._stopped = True
        if self._pid is None or self._pid < 0 or self._exited.is_set():
            return False
        try:
            os.kill(self._pid, signal.SIGTERM)
        except ProcessLookupError:
            return False
        with self._lock:  # one deadline per replica, counted from the first SIGTERM
            armed, self._armed = self._armed, True
        if not armed:
            deadline = time.monotonic() + self._grace + KILL_SLACK
            threading.Thread(target=self._kill_after, args=(deadline,), name="kill-after-grace", daemon=True).start()
        return True

    def _kill_after(self, deadline: float) -> None:
        if self._exited.wait(max(0.0, deadline - time.monotonic())):
            return
        # a launcher that stopped its command is left alone: it may still be saving checkpoints or outputs
        if self._pid and self._pid > 0 and procs_under(self._pid):
            self._killed = True
            try:
                kill_tree(self._pid)
            finally:
                self._kill_done.set()

    def where(self) -> dict[str, Any]:
        import ray

        ctx = ray.get_runtime_context()
        return {"node_id": ctx.get_node_id(), "pid": self._pid, "gpus": [str(g) for g in ray.get_gpu_ids()]}


class NodeAgent:
    """Starts and follows the launchers of one node's GPU-less replicas, each under a key (the actor
    name a :class:`ReplicaActor` would have had), with the same start-once, attach and stop rules."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, ReplicaActor] = {}
        self._early: dict[str, None] = {}  # keys stopped or released before their run call: it starts nothing
        self._placing: dict[str, int] = {}  # key -> run calls with a config waiting for its placement group
        self._placed_or_gone = threading.Condition(self._lock)  # one of those calls ended its wait

    def run(self, key: str, config: dict[str, Any] | None, workdir: str, root: str | None = None,
            placement_group: Any = None) -> LaunchResult | str | None:
        """As :meth:`ReplicaActor.run`, once ``placement_group`` (if given) is placed: Ray reserves the
        replica's resources there before its launcher starts, as it would before placing an actor in it.
        A group removed before it is placed, with no stop or forget for the key, answers ``LostContact``.

        Attaching (``config=None``) to a key whose start waits for its group follows that start (the
        server that asked restarted): answered NOT_STARTED, the engine would launch again with a new
        token, and the waiting call, placed first, would start a launcher with the old one, refused.
        To a key it never heard of: :data:`NOT_STARTED` if no launcher was started for ``workdir``
        on this node, else its result, or :data:`LOST` if it left none."""
        placing = config is not None and placement_group is not None
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                if config is None:
                    return _left_behind(workdir, root)
                if key in self._early:
                    del self._early[key]
                    return LaunchResult(reason=Reason.CANCELLED, message="cancelled before it started")
                slot = self._slots[key] = ReplicaActor(gpus_from_ray=False)
            if placing:
                self._placing[key] = self._placing.get(key, 0) + 1
            while config is None and self._placing.get(key) and not slot.started:
                self._placed_or_gone.wait()
        if placing:
            try:
                while not slot.stopped and not (placed := _placed(placement_group)):
                    # removed with no stop or forget for the key (an orphan sweep, by hand): free thread and slot
                    if placed is None:
                        with self._lock:
                            if self._slots.get(key) is slot and not slot.started:
                                del self._slots[key]
                        return LaunchResult(reason=Reason.LOST, message="its placement group was removed "
                                            "before it was placed; the launcher never started")
                if (early := slot.start(config, workdir, root)) is not None:
                    return early
            finally:
                with self._lock:
                    if left := self._placing.pop(key) - 1:
                        self._placing[key] = left
                    self._placed_or_gone.notify_all()
        return slot.run(config, workdir, root)

    def stop(self, key: str) -> bool:
        """Stop the key's launcher. One whose run call has not come yet is kept, and that call starts
        none: the agent serves calls on many threads in no set order (Ray keeps none for a threaded
        actor), so the engine's stop, sent after its run, is often served first on a fresh agent."""
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                self._stopped_early(key)
        return slot.stop() if slot is not None else False

    def forget(self, key: str) -> None:
        """The engine released the replica: stop its launcher if it still runs (as removing its actor
        would) and drop what is kept about it; a run call still to come starts nothing (as stop)."""
        with self._lock:
            slot = self._slots.pop(key, None)
            if slot is None:
                self._stopped_early(key)
        if slot is not None:
            slot.stop()

    def remove(self, root: str, items: list[tuple[str, str]]) -> tuple[int, int]:
        """Remove ended attempts' and jobs' folders on this node (:mod:`trainyard.engines.leftovers`): under
        ``TRAINYARD_NODE_ROOT`` where it is set, else under the server's ``root``; (removed, failed)."""
        from trainyard.engines import leftovers

        return leftovers.remove(Path(os.environ.get(envvars.NODE_ROOT) or root), items)

    def _stopped_early(self, key: str) -> None:
        """Under the lock. Bounded: a stop for a replica that already ended (and was forgotten) is kept
        too, and no run call comes for it."""
        self._early[key] = None
        while len(self._early) > EARLY_KEPT:
            del self._early[next(iter(self._early))]


def _placed(placement_group: Any, wait: float = 1.0) -> bool | None:
    """Whether Ray placed the group, waiting up to ``wait`` seconds (one call to the GCS, no task);
    None once it is removed. A group still pending, or a GCS that cannot answer, is False: wait on."""
    try:
        return placement_group.wait(wait)
    except Exception:  # a bare "... does not exist." once removed (Ray 2.60; a GCS that is away answers False)
        pass
    from ray.util import placement_group_table

    try:  # a bare Exception says little: the table (which keeps a removed group's entry) says for certain
        if placement_group_table(placement_group).get("state") == "REMOVED":
            return None
    except Exception:  # the GCS is away for a moment
        pass
    time.sleep(wait)
    return False


def _left_behind(workdir: str, root: str | None) -> str | LaunchResult | None:
    _, folder = _on_this_node({}, workdir, root)
    if not (folder / CONFIG_NAME).exists():
        return NOT_STARTED
    try:
        text = (folder / RESULT_NAME).read_bytes()
    except OSError:
        return LOST
    return LaunchResult.read(text, folder / RESULT_NAME)


def procs_under(pid: int) -> list:
    """The live processes under ``pid`` (the launcher): the command and whatever it started."""
    import psutil

    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [p for p in found if _alive(p)]


def kill_tree(pid: int, rounds: int = 20) -> None:
    """SIGKILL ``pid`` and every process under it, with the process groups they lead.

    Read again until nothing is left: a process forked meanwhile is under one
    read before, or (orphaned by a kill) still in its parent's process group.
    """
    import psutil

    try:
        tree = {pid: psutil.Process(pid)}
    except psutil.Error:
        return
    own_group, groups = os.getpgrp(), set()
    for _ in range(rounds):
        for p in list(tree.values()):
            try:
                tree.update((c.pid, c) for c in p.children(recursive=True))
            except psutil.Error:
                pass
        live = [p for p in tree.values() if _alive(p)]  # all read before any dies: orphans leave the tree
        if not live:
            return
        for p in live:
            try:
                if os.getpgid(p.pid) == p.pid != own_group:  # a group the launcher or the command leads
                    groups.add(p.pid)
            except ProcessLookupError:
                pass
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in live:
            try:
                p.kill()
            except psutil.Error:
                pass
        time.sleep(0.05)


def _alive(p: Any) -> bool:
    import psutil

    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
