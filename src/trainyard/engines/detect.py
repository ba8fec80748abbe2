"""What this machine has: CPUs, memory, NVIDIA GPUs (NVML; none is fine), memory cgroups."""

from __future__ import annotations

import os
import re
import socket

import psutil

from trainyard.launch import cgroup
from trainyard.spec.records import NodeInfo


# The model token of an NVML product name: "NVIDIA H100 80GB HBM3" -> H100, "Tesla V100-SXM2-16GB" -> V100,
# "NVIDIA A10G" -> A10G, "NVIDIA GeForce RTX 4090" -> RTX-4090. Specs say `gpu_type: H100` (as Ray's
# accelerator_type does), so the memory size and the form factor must not be part of the detected type.
_MODEL = re.compile(r"\b([A-Z]{1,2}\d{1,4}[A-Z]?)\b")
_VENDOR_WORDS = {"NVIDIA", "TESLA", "GEFORCE", "QUADRO"}


def gpu_family(name: str) -> str:
    """The type a spec names for a GPU with this NVML product name (see ``_MODEL``)."""
    words = [w for w in re.split(r"[\s_]+", name.strip()) if w and w.upper() not in _VENDOR_WORDS]
    text = " ".join(words)
    rtx = re.match(r"(RTX|GTX)\s+(?:PRO\s+)?([A-Z]?\d{3,4}[A-Z]?)\b", text, re.IGNORECASE)
    if rtx:
        return f"{rtx.group(1).upper()}-{rtx.group(2).upper()}"
    found = _MODEL.search(text.replace("-", " "))
    if found:
        return found.group(1)
    return "-".join(words) or name  # unknown naming: the whole name, as before


def detect_gpus() -> tuple[list[str], str | None]:
    """Indices and the type (:func:`gpu_family` of the first one's name) of this machine's NVIDIA GPUs,
    or ``([], None)``."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no driver, no library, no GPU: all mean "no GPUs"
        return [], None
    try:
        count = pynvml.nvmlDeviceGetCount()
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
        names = [n.decode() if isinstance(n, bytes) else n for n in names]
        return [str(i) for i in range(count)], gpu_family(names[0]) if names else None
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
