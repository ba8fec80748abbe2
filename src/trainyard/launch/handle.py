"""A launcher's handle: ``launcher.json`` in its attempt dir, its pid and start time (pids get reused).

The zygote writes it for the launchers it forks or hands an attempt to (it read their start
time once, at the fork): in the server, reading it through psutil and writing the file were
~3 % of its CPU in a burst, and the server's Python runs one thread at a time. The engine
writes it itself for a launcher it started without the zygote.
"""

from __future__ import annotations

import json
import os

HANDLE_NAME = "launcher.json"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def start_time(pid: int) -> float | None:
    """When ``pid`` started, as ``psutil.Process(pid).create_time()`` reads it on Linux (its start in
    clock ticks after boot, plus the boot time: the same float); None where it is gone or there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        with open("/proc/stat", "rb") as f:
            btime = next(float(line.split()[1]) for line in f if line.startswith(b"btime"))
        ticks = stat.rpartition(b")")[2].split()[19]  # field 22, starttime; the name before ")" may hold spaces
    except (OSError, StopIteration, IndexError):
        return None
    return float(ticks) / _TICKS + btime


def write(workdir: str, pid: int, create_time: float | None) -> dict:
    """The handle, written beside the attempt's ``launch.json`` (renamed into place: never read half written)."""
    handle = {"pid": pid, "create_time": create_time, "dir": workdir}
    tmp = os.path.join(workdir, HANDLE_NAME + ".tmp")
    with open(tmp, "w") as f:  # the engine made this file ahead for most attempts: no new inode on the path
        f.write(json.dumps(handle))
    os.replace(tmp, os.path.join(workdir, HANDLE_NAME))
    return handle
