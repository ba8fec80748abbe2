"""What the command uses: its process tree's CPU and memory and its GPUs, sampled every few seconds.

A daemon thread, which the launcher starts once the first sample is due (a
second after the command's start, or ``every`` if sooner; a shorter job never
has it), so nothing here sits between the spawn and the command's first
instruction: psutil (and NVML) are imported in the thread. Each sample is one line appended to ``metrics.jsonl`` in the
in-job SDK's format, named ``system/…`` (as MLflow names its system metrics),
so the reporter sends it with the job's own metrics and the server stores it
next to them. One ``write`` per line on an ``O_APPEND`` file: the job's own
lines and these never tear each other.

In a container (``launch.container``) the tree is the container's own: its
first process (``State.Pid`` from the runtime) and its descendants, not the
runtime's client or monitor (``podman``, ``conmon``), which the launcher's tree
also holds and whose memory is not the job's; docker's containers are not in
the launcher's tree at all. The runtime is asked for that pid once, when the
container is up.

GPUs are read through NVML (``pynvml`` from nvidia-ml-py) when the replica has
any and the library loads; ``nvml`` is the seam tests pass a fake through.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable

FIRST_AFTER = 1.0  # seconds after the start: a job that ends sooner was not worth sampling
PREFIX = "system/"


class Sampler:
    """Samples the launcher's descendants (the launcher is their subreaper: daemons included).

    ``root``, when given, says whose tree instead: a callable that returns the pid of the
    container's first process, or None while it is not known yet (no sample then).
    """

    def __init__(self, metrics_path: str, gpus: list[str], every: float, nvml: Any = None,
                 root: Callable[[], int | None] | None = None) -> None:
        self.metrics_path = metrics_path
        self.root = root
        self._root_pid: int | None = None
        self.gpus = [str(g) for g in gpus]
        self.every = every
        self.nvml = nvml
        self.peak_memory = 0
        self.gpu_util_sum = 0.0
        self.gpu_samples = 0
        self._procs: dict[int, Any] = {}  # pid -> psutil.Process, kept between samples
        self._cpu: dict[int, tuple[float, float, float]] = {}  # pid -> (its create time, CPU seconds, when read)
        self._handles: list[tuple[str, Any]] = []
        self.first_after = min(FIRST_AFTER, every)  # seconds from the start to the first sample
        self._first_wait = self.first_after
        # made by start(): a short job's sampler never starts, and these cost its launcher ~0.05 ms
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self, first_wait: float | None = None) -> "Sampler":
        """Start sampling; the first sample after ``first_wait`` seconds (default :attr:`first_after`).
        The launcher starts it only once the first sample is due: a short job never has the thread."""
        if first_wait is not None:
            self._first_wait = first_wait
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainyard-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:  # started
            self._stop.set()
            self._thread.join(timeout=5)
        if self._handles and self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - a broken driver must not fail the attempt
                pass

    # -- the thread ------------------------------------------------------------

    def _run(self) -> None:
        if self._stop.wait(self._first_wait):
            return
        import psutil

        self._open_gpus()
        while True:
            try:
                values = self.sample(psutil)
                if values:
                    self._write(values)
            except Exception:  # noqa: BLE001 - sampling is best effort; the attempt goes on
                pass
            if self._stop.wait(self.every):
                return

    def _open_gpus(self) -> None:
        if not self.gpus:
            return
        if self.nvml is None:
            try:
                import pynvml
            except ImportError:
                return
            self.nvml = pynvml
        try:
            self.nvml.nvmlInit()
            for g in self.gpus:
                get = self.nvml.nvmlDeviceGetHandleByUUID if g.startswith(("GPU-", "MIG-")) else \
                    self.nvml.nvmlDeviceGetHandleByIndex
                self._handles.append((g, get(g if g.startswith(("GPU-", "MIG-")) else int(g))))
        except Exception:  # noqa: BLE001 - no driver, or a GPU id NVML does not know: no GPU samples
            self._handles = []

    def _tree(self, psutil: Any) -> list[Any] | None:
        """The processes to sample; None while a container's first process is not known yet."""
        if self.root is None:
            return psutil.Process(os.getpid()).children(recursive=True)
        if self._root_pid is None:
            self._root_pid = self.root()
            if self._root_pid is None:
                return None
        try:
            top = self._procs.get(self._root_pid) or psutil.Process(self._root_pid)
            return [top, *top.children(recursive=True)]
        except psutil.Error:  # the container has ended
            return []

    def sample(self, psutil: Any) -> dict[str, float]:
        """One sample of the tree and the GPUs, as ``system/…`` values ({} when there is nothing to sample yet)."""
        tree = self._tree(psutil)
        if tree is None:
            return {}
        live: dict[int, Any] = {}
        seen: dict[int, tuple[float, float, float]] = {}
        cpu = 0.0
        memory = 0
        for p in tree:
            proc = self._procs.get(p.pid, p)
            try:
                with proc.oneshot():
                    times, born = proc.cpu_times(), proc.create_time()
                    memory += proc.memory_info().rss
            except psutil.Error:
                continue
            now, used = time.time(), times.user + times.system
            cpu += self._percent(self._cpu.get(p.pid), born, used, now)
            live[p.pid], seen[p.pid] = proc, (born, used, now)
        self._procs, self._cpu = live, seen
        self.peak_memory = max(self.peak_memory, memory)
        values: dict[str, float] = {PREFIX + "cpu_percent": round(cpu, 1), PREFIX + "memory_bytes": memory}
        values.update(self._gpu_values())
        return values

    @staticmethod
    def _percent(last: tuple[float, float, float] | None, born: float, used: float, now: float) -> float:
        """Percent of one core since the last sample; for a process not seen before, since it started (psutil's
        own ``cpu_percent`` reads 0 on its first call: a job sampled once, or a new worker, would show none)."""
        if last is not None and last[0] == born:  # the same process (a pid may be reused)
            used, since = used - last[1], last[2]
        else:
            since = born
        cap = 100.0 * (os.cpu_count() or 1)  # a young process's start time is read to the clock tick
        return min(cap, max(0.0, used) * 100.0 / max(now - since, 1e-3))

    def _gpu_values(self) -> dict[str, float]:
        if not self._handles:
            return {}
        values: dict[str, float] = {}
        utils, used = [], 0
        for gpu, handle in self._handles:
            try:
                util = float(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                mem = int(self.nvml.nvmlDeviceGetMemoryInfo(handle).used)
            except Exception:  # noqa: BLE001 - one GPU unreadable for a moment
                continue
            utils.append(util)
            used += mem
            values[f"{PREFIX}gpu{gpu}_util"] = util
            values[f"{PREFIX}gpu{gpu}_memory_bytes"] = mem
        if utils:
            mean = sum(utils) / len(utils)
            values[PREFIX + "gpu_util"] = mean
            values[PREFIX + "gpu_memory_bytes"] = used
            self.gpu_util_sum += mean
            self.gpu_samples += 1
        return values

    def _write(self, values: dict[str, float]) -> None:
        line = json.dumps({"step": None, "ts": time.time(), "values": values}) + "\n"
        fd = os.open(self.metrics_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def make(metrics_path: str, gpus: list[str], every: float | None,
         root: Callable[[], int | None] | None = None) -> Sampler | None:
    """A sampler not started yet, or None when sampling is off (``every`` 0 or None); ``root``: see :class:`Sampler`."""
    if not every or every <= 0:
        return None
    return Sampler(metrics_path, gpus, every, root=root)


def start(metrics_path: str, gpus: list[str], every: float | None,
          root: Callable[[], int | None] | None = None) -> Sampler | None:
    """A running sampler, or None when sampling is off (see :func:`make`)."""
    sampler = make(metrics_path, gpus, every, root)
    return sampler.start() if sampler is not None else None
