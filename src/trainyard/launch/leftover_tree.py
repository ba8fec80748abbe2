"""What a replica's command leaves running when its launcher dies, and how the engine kills it.

The command runs in a session of its own (``procs.spawn``): a signal meant for the
launcher never reaches it, and nothing ties its life to the launcher's. A launcher
killed with SIGKILL (or by the OOM killer) leaves it running, unseen, while the
server calls the replica lost and retries the job beside it. So the launcher writes
down, right after the spawn, what its command is (``command.json`` beside its
handle): its process group, with the leader's start time (pids get reused), and its
cgroups where it has them (memory, pids: they also hold whatever left the group with
``setsid``). An engine that finds the launcher gone kills both before it says the
replica is lost. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal

from trainyard.launch import handle as handles

COMMAND_NAME = "command.json"


def record(workdir: str, pid: int, cgroups: list[str]) -> None:
    """Write down the command the launcher in ``workdir`` just spawned (``pid`` leads its process group) and the
    folders of its cgroups."""
    tmp = os.path.join(workdir, COMMAND_NAME + ".tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps({"pgid": pid, "start": handles.start_time(pid), "cgroups": cgroups}))
    os.replace(tmp, os.path.join(workdir, COMMAND_NAME))


def kill_left(workdir: str) -> bool:
    """SIGKILL what the command of the (dead) launcher in ``workdir`` left; returns whether any of it was
    still there, in which case it is not gone yet (a killed process takes a moment to die): ask again later.

    Zombies do not count: whoever they were reparented to reaps them, and they run nothing."""
    try:
        with open(os.path.join(workdir, COMMAND_NAME)) as f:
            found = json.load(f)
        pgid, start = int(found["pgid"]), found.get("start")
        # "cgroup": one path, as a launcher from before the pids limit wrote it
        cgroups = [str(p) for p in found.get("cgroups") or [found.get("cgroup")] if p]
    except (OSError, ValueError, KeyError, TypeError):
        return False  # none written: the launcher died before its command started, or before this existed
    left = _group_members(pgid) if _same_group(pgid, start) else []
    if left:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for cgroup in cgroups:
        in_group = _cgroup_members(cgroup)
        for pid in in_group:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if not in_group:
            try:
                os.rmdir(cgroup)  # else the next launcher's sweep removes it
            except OSError:
                pass
        left += [p for p in in_group if p not in left]
    return bool(left)


def _same_group(pgid: int, start: float | None) -> bool:
    """Whether process group ``pgid`` is still the command's: its leader, if it still runs, started when the
    command did. While any member lives the kernel keeps the number, so a leader gone means it is."""
    now = handles.start_time(pgid)
    return now is None or start is None or abs(now - start) <= handles.SAME_START


def _group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    out = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if name.isdigit() and (stat := _stat(int(name))) is not None and stat[2] == str(pgid).encode() \
                and stat[0] != b"Z":
            out.append(int(name))
    return out


def _cgroup_members(path: str) -> list[int]:
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            pids = [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []
    return [p for p in pids if (stat := _stat(p)) is not None and stat[0] != b"Z"]


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after its name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()
    except OSError:
        return None
