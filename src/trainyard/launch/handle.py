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
    btime = boot_time()
    found = None if btime is None else _stat(pid, btime)
    return None if found is None else found[1]


def boot_time() -> float | None:
    """The boot time as psutil reads it (``btime`` in /proc/stat), or None where there is no /proc."""
    try:
        with open("/proc/stat", "rb") as f:
            return next(float(line.split()[1]) for line in f if line.startswith(b"btime"))
    except (OSError, StopIteration, IndexError, ValueError):
        return None


def running(handle: dict, btime: float) -> bool:
    """Whether the handle's process still runs (its pid, started then, not a zombie), read from /proc in one
    look (psutil took three files, most of a reconcile's CPU). ``btime``: :func:`boot_time`, read once a look."""
    found = _stat(handle["pid"], btime)
    return found is not None and found[0] != b"Z" and abs(found[1] - handle["create_time"]) <= SAME_START


SAME_START = 0.05  # seconds: two start times this close are one process's (pids get reused, not this fast)


def _stat(pid: int, btime: float) -> tuple[bytes, float] | None:
    """(state, start time) of ``pid``, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()  # the name before ")" may hold spaces
        return fields[0], float(fields[19]) / _TICKS + btime  # field 3, state; field 22, starttime
    except (OSError, IndexError, ValueError):
        return None


def record(workdir: str, pid: int, create_time: float | None) -> dict:
    """The handle as the engine keeps it (in the attempt's row) and :func:`write` writes it."""
    return {"pid": pid, "create_time": create_time, "dir": workdir}


def write(workdir: str, pid: int, create_time: float | None) -> dict:
    """The handle, written beside the attempt's ``launch.json`` (renamed into place: never read half written)."""
    handle = record(workdir, pid, create_time)
    tmp = os.path.join(workdir, HANDLE_NAME + ".tmp")
    with open(tmp, "w") as f:  # the engine made this file ahead for most attempts: no new inode on the path
        f.write(json.dumps(handle))
    os.replace(tmp, os.path.join(workdir, HANDLE_NAME))
    return handle


def adopt(workdir: str) -> dict | None:
    """The handle of a launcher started for ``workdir`` without the zygote (``python -m trainyard.launch
    WORKDIR``) whose engine died before it wrote that handle, written now; None where there is none (or no
    /proc). Once ``Popen`` returns, the launcher has exec'd: its command line names the dir from then on."""
    want = ["-m", "trainyard.launch", workdir]
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")[:-1]
        except OSError:
            continue
        if argv[1:] == want and (started := start_time(pid)) is not None:
            return write(workdir, pid, started)
    return None
