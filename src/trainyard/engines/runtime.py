"""Which container runtime runs ``image:`` jobs on this machine: podman, docker, or none.

A client binary is not enough: docker's CLI is often installed without a
daemon, so a runtime counts only once ``<tool> info`` answers. ``auto`` tries
podman first (daemonless, rootless, CDI for GPUs), then docker.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

CHOICES = ("auto", "podman", "docker", "none")
PROBE_TIMEOUT = 10.0  # seconds `info` may take before the runtime counts as not answering


@dataclass(frozen=True, slots=True)
class Runtime:
    kind: str  # podman or docker
    path: str  # the client binary


def answers(tool: str) -> Runtime | None:
    path = shutil.which(tool)
    if not path:
        return None
    try:
        ok = subprocess.run([path, "info"], capture_output=True, timeout=PROBE_TIMEOUT).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Runtime(tool, path) if ok else None


def find(choice: str = "auto") -> Runtime | None:
    """The runtime ``choice`` names (or the first that answers for ``auto``); None for ``none`` or if none answers."""
    if choice not in CHOICES:
        raise ValueError(f"container runtime {choice!r}: choose one of {', '.join(CHOICES)}")
    if choice == "none":
        return None
    for tool in (("podman", "docker") if choice == "auto" else (choice,)):
        found = answers(tool)
        if found:
            return found
    return None
