"""What this machine has: CPUs, memory, NVIDIA GPUs (NVML; none is fine), memory cgroups."""

from __future__ import annotations

import os
import socket

import psutil

from trainyard.launch import cgroup
from trainyard.spec.records import NodeInfo


def detect_gpus() -> tuple[list[str], str | None]:
    """Indices and the product name of this machine's NVIDIA GPUs, or ``([], None)``."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no driver, no library, no GPU: all mean "no GPUs"
        return [], None
    try:
        count = pynvml.nvmlDeviceGetCount()
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
        names = [n.decode() if isinstance(n, bytes) else n for n in names]
        gpu_type = names[0].replace("NVIDIA ", "").replace(" ", "-") if names else None
        return [str(i) for i in range(count)], gpu_type
    finally:
        pynvml.nvmlShutdown()


def local_node(
    *, cpus: float | None = None, memory: int | None = None, gpus: int | None = None,
    gpu_type: str | None = None, labels: dict[str, str] | None = None, cgroup_root: str = cgroup.MOUNT,
) -> NodeInfo:
    """This machine as one node; declared values replace detected ones.

    ``memory_enforcement`` is what the launcher will do here with a memory limit
    (see :mod:`trainyard.launch.cgroup`), found the same way it finds it.
    """
    if cpus is None:
        cpus = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    if memory is None:
        memory = psutil.virtual_memory().total
    if gpus is None:
        ids, detected_type = detect_gpus()
        gpu_type = gpu_type or detected_type
    else:
        ids = [str(i) for i in range(gpus)]
    return NodeInfo(
        name=socket.gethostname() or "local", cpu=cpus, memory=memory, gpu=len(ids),
        gpu_type=gpu_type if ids else None, gpu_ids=ids, labels=labels or {},
        memory_enforcement=cgroup.detect(cgroup_root),
    )
