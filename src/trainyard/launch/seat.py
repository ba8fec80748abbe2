"""The command's seat: a child its launcher starts while it waits for an attempt, already inside the cgroups
the attempt will likely need, that execs the command when the attempt comes.

Moving a process into a cgroup costs 10-15 ms on a cgroup v1 host: the move waits out an RCU grace period
(the kernel's ``cgroup_threadgroup_rwsem``). Through the shim (:mod:`trainyard.launch.cgroup`) every job
with a memory limit, or on a server with ``pids_max``, paid that on the way to its command's start. The
launcher itself must stay outside its replica's groups (it survives the OOM kill to report it, and neither
its memory nor its threads are the job's), so it cannot join them ahead and let the command inherit them.
A child of its can: a launcher idle between attempts (forked ahead by the zygote, or kept after one:
:mod:`trainyard.launch.zygote`) makes the groups the attempt before needed, without limits, and starts
this child (a shell), which joins them and waits. When the attempt comes, the launcher writes the limits
(a write: cheap), names the groups after the replica (v1; v2 refuses to rename a group), and hands the
child the command to exec as :func:`trainyard.launch.procs.spawn` would have started it: what the shim did
at the spawn was done before it.

- The attempt needs a group the seat lacks (or another cgroup root, or an image): the seat is let go after
  the spawn, and the command joins its groups through the shim, as before.
- It needs fewer: the command runs in the seat anyway; a group it does not need keeps no limit (nothing
  there is limited or read: the ancestors' limits hold as they did) and is removed at the end with the
  others. Moving the child back out would cost the grace period the seat is there to save.
- It needs none: the command is spawned as it would be, and the seat let go after the spawn.
- The cpu group (:mod:`trainyard.launch.cpulimit`) is a weight that is not worth a move of its own: an attempt
  takes it where the seat holds it, even one that needs no other group (a seat holds one where the attempt
  before joined one). Where the host refuses it, the seat holds the others.
- The devices group (:mod:`trainyard.launch.devices`) is held wherever the node has GPUs: every attempt there
  needs one, unless it was given all of them (then the seat's keeps no rule, as any spare group). Which GPUs
  it denies is the attempt's, written at :meth:`Seat.take`. A node without GPUs holds none: no move for it.
- Let go (the zygote closed the launcher's pipe, the attempt took another path): the child is killed and
  its groups removed. A launcher killed while idle closes the child's request pipe with its death, so the
  child exits, and the groups, empty then, are swept as any dead launcher's are (:func:`cgroup.sweep`).
"""

from __future__ import annotations

import errno
import os
import re
import select
import signal
from typing import NamedTuple

from trainyard.launch import cgroup, cpulimit, devices, pidlimit, procs

AHEAD = "ahead"  # a seat's groups' name until its attempt's replaces it
READY = b"r"  # the child's first word once in its groups ("f": it could not join one)
READY_WAIT = 5.0  # seconds an attempt waits at most for its seat's child to be in (a move takes ~15 ms)
_SHELL_ENV = {"PATH": "/usr/bin:/bin"}  # the child shell's own, unset before the command's is exported
# a name the child's shell can export (an identifier; all a spec can name. OPTIND is not given to it: the launcher
# puts it after env(1) in the command's argv, as for the shim, whose dash would refuse one not a number: launch.optind)
_EXPORTABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# the child: join each group (cgroup.procs files), say so (or not) on fd 3, then source fd 4, which is the
# command's exec, or nothing when let go (EOF: the launcher closed its end, or died)
_SIT = 'for g; do echo 0 > "$g" || { echo f >&3; exit 0; }; done; echo r >&3; . /dev/fd/4'
# what the command would have found at its default through procs.spawn: the launcher's own handlers (reset by
# exec), the zygote's SIGINT ignored, and Python's SIGPIPE and SIGXFSZ ignored (setsigdef there too)
_DEFAULTS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGHUP", "SIGTERM", "SIGPIPE", "SIGXFSZ", "SIGXFZ",
                                                "SIGCHLD") if hasattr(signal, n))


class Wants(NamedTuple):
    """The groups a seat holds: the cgroup root, and whether a memory, a pids, a cpu and a devices group."""

    root: str
    memory: bool
    pids: bool
    cpu: bool = False
    devices: bool = False


def wants(config: object) -> Wants | None:
    """What an attempt of this launch config needs of a seat; None: none (an image, or no limit to hold)."""
    if getattr(config, "container", None) or not getattr(config, "cgroup_root", None):
        return None
    memory, pids = bool(config.memory_limit), bool(config.pids_max)
    gpus = bool(devices.node_gpus(config.dev_root))  # the node's, not the attempt's: the next may get others
    found = Wants(config.cgroup_root, memory, pids, cpulimit.wanted(config, memory or pids or gpus), gpus)
    return found if any(found[1:]) else None


class Taken(NamedTuple):
    """The groups of a seat an attempt took: its memory, pids, cpu and devices groups, with their limits, and the
    rest."""

    memory: cgroup.MemoryGroup | None
    pids: pidlimit.PidsGroup | None
    cpu: cpulimit.CpuGroup | None
    devices: devices.DevicesGroup | None
    spare: tuple[cgroup.Group, ...]


class Seat:
    """A child waiting in ``groups`` (controller -> (version, path)) under ``root``: :meth:`take` its groups
    for an attempt, then :meth:`spawn` the command in it; or :meth:`discard` it. One attempt, one seat."""

    def __init__(self, root: str, groups: dict[str, tuple[str, str]]) -> None:
        self.root, self.groups = root, groups
        self.pid: int | None = None
        self.taken = False
        self.cpu_refused = False  # the host has a cpu controller and refused us a group: the shim would be too
        self._status = self._request = -1

    @classmethod
    def make(cls, want: Wants | None) -> "Seat | None":
        """A seat with the groups ``want`` names where this host has them; None where it has none of them."""
        if want is None:
            return None
        groups: dict[str, tuple[str, str]] = {}
        seat = cls(want.root, groups)
        try:
            mem = cgroup.detect(want.root) if want.memory else cgroup.SAMPLED
            if mem != cgroup.SAMPLED:
                groups["memory"] = (mem, cgroup.group_for(want.root, mem, "memory", _name()))
            pids = pidlimit.detect(want.root) if want.pids else None
            if pids is not None:  # one group a replica on v2
                one = groups["memory"][1] if mem == cgroup.V2 else None
                groups["pids"] = (pids, cgroup.group_for(want.root, pids, "pids", _name(), one))
            seat._add_devices(want)
            seat._add_cpu(want)
            if not groups:
                return None
            seat._spawn()
        except OSError:
            seat.discard()
            return None
        return seat

    def _add_devices(self, want: Wants) -> None:
        """The devices group, where ``want`` names it and the host has one: on v2 the seat's one group where it has
        one, and ``ctypes`` imported now rather than at the attach (launch.devprog)."""
        version = devices.detect(want.root) if want.devices else None
        if version is None:
            return
        if version == cgroup.V2:
            from trainyard.launch import devprog

            devprog.prepare()
        one = next((p for v, p in self.groups.values() if v == cgroup.V2), None)
        self.groups["devices"] = (version, cgroup.group_for(want.root, version, "devices", _name(), one))

    def _add_cpu(self, want: Wants) -> None:
        """The cpu group, where ``want`` names it and the host has one: on v2 the seat's one group where it has
        one. Only a weight (launch.cpulimit): where it cannot be had, the seat still holds the others."""
        cpu = cpulimit.detect(want.root) if want.cpu else None
        if cpu is None:
            return
        one = next((p for v, p in self.groups.values() if v == cgroup.V2), None)
        try:
            self.groups["cpu"] = (cpu, cgroup.group_for(want.root, cpu, "cpu", _name(), one))
        except OSError:
            self.cpu_refused = True
            return
        cpulimit.weigh_parent(want.root, cpu)  # here while the launcher waits, not on an attempt's way to start

    def _spawn(self) -> None:
        """The child: a shell that joins the groups, says so on fd 3, then sources what comes on fd 4 (the
        command's exec, or EOF when let go, or when the launcher died: it then exits). posix_spawn, as
        procs.spawn: a forked copy of the launcher would share its pages, and each page the launcher then
        wrote would be copied (measured: ~4 ms of CPU a job in a burst)."""
        status_r, status_w = os.pipe()
        request_r, request_w = os.pipe()
        try:
            actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                       (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0), (os.POSIX_SPAWN_DUP2, 1, 2),
                       (os.POSIX_SPAWN_DUP2, status_w, 3), (os.POSIX_SPAWN_DUP2, request_r, 4)]
            self.pid = os.posix_spawn(cgroup.SHELL, [cgroup.SHELL, "-c", _SIT, "sh", *self._files()], _SHELL_ENV,
                                      file_actions=actions, setsid=True, setsigdef=_DEFAULTS, setsigmask=())
        except OSError:
            os.close(status_r)
            os.close(request_w)
            raise
        finally:
            os.close(status_w)
            os.close(request_r)
        self._status, self._request = status_r, request_w

    def _files(self) -> list[str]:
        return list(dict.fromkeys(os.path.join(p, "cgroup.procs") for _, p in self.groups.values()))

    def take(self, config: object, name: str, env: dict[str, str]) -> Taken | None:
        """The seat's groups for the attempt of ``config`` (replica ``name``, its command's environment ``env``),
        with its limits written; None where the seat does not fit it (see the module's docstring, and
        :meth:`spawn` on the names): then :meth:`discard` it."""
        deny = devices.denied(config)
        need = {"memory": bool(config.memory_limit), "pids": bool(config.pids_max),
                "devices": bool(deny) and ("devices" in self.groups or devices.detect(self.root) is not None)}
        # a weight rides along where the seat holds its group (no move to pay); where it lacks one the
        # attempt needs, the shim joins it, unless the host has none to give
        need["cpu"] = cpulimit.wanted(config, any(need.values()) or "cpu" in self.groups) and (
            "cpu" in self.groups or not self.cpu_refused and cpulimit.detect(self.root) is not None)
        if (self.pid is None or config.container or config.cgroup_root != self.root or not any(need.values())
                or deny is None  # GPU ids with no device file: the launcher says so in the job's log
                or not all(_EXPORTABLE.match(k) for k in env)
                or any(n and c not in self.groups for c, n in need.items()) or not self._ready()):
            return None
        paths = self._rename(name)
        memory = pids = cpu = gpus = None
        try:
            if need["memory"]:
                memory = cgroup.MemoryGroup(paths["memory"][1], paths["memory"][0], config.memory_limit)
                memory.apply_limit()
            if need["pids"]:
                version, path = paths["pids"]
                pids = pidlimit.PidsGroup(path, version, config.pids_max, owned=memory is None or path != memory.path)
                pids.apply_limit()
            if need["cpu"]:
                version, path = paths["cpu"]
                cpu = cpulimit.CpuGroup(path, version, config.cpu, bool(config.cpu_limit),
                                        owned=path not in {g.path for g in (memory, pids) if g is not None})
                cpu.apply_limit()
            if need["devices"]:
                version, path = paths["devices"]
                gpus = devices.DevicesGroup(path, version, deny,
                                            owned=path not in {g.path for g in (memory, pids, cpu) if g is not None})
                gpus.apply_limit()
        except OSError:
            return None
        self.taken = True
        used = {g.path for g in (memory, pids, cpu, gpus) if g is not None}
        spare = tuple(cgroup.Group(p) for p in dict.fromkeys(p for _, p in paths.values()) if p not in used)
        return Taken(memory, pids, cpu, gpus, spare)

    def _ready(self) -> bool:
        """Whether the child is in its groups: it says so once, within :data:`READY_WAIT`."""
        if not select.select([self._status], [], [], READY_WAIT)[0]:
            return False
        try:
            return os.read(self._status, 2) == READY + b"\n"
        except OSError:
            return False

    def _rename(self, name: str) -> dict[str, tuple[str, str]]:
        """The groups under the replica's name where the host lets us (v1; a name taken keeps the seat's)."""
        renamed: dict[str, str] = {}
        for version, path in self.groups.values():
            if version == cgroup.V1 and path not in renamed:
                to = os.path.join(os.path.dirname(path), name)
                try:
                    os.rename(path, to)  # refused onto a group that exists: a relaunch while the old one holds on
                    renamed[path] = to
                except OSError:
                    renamed[path] = path
        self.groups = {c: (v, renamed.get(p, p)) for c, (v, p) in self.groups.items()}
        return self.groups

    def spawn(self, argv: list[str], cwd: str, env: dict[str, str], log_path: str) -> procs.Child:
        """The command exec'd by the child, as :func:`trainyard.launch.procs.spawn` starts it: in ``cwd``, with
        ``env`` alone, stdin from /dev/null, stdout and stderr appended to ``log_path``. The shell exports ``env``
        itself (names :meth:`take` checked): given to ``env -i`` as arguments, the values (secrets among them)
        would sit in that process's argv, which /proc/PID/cmdline shows every user of the node.
        Check the command first (``procs.check_executable``), as for the shim: exec's error would be the job's.
        Returns once the child has read it all (as posix_spawn returns once the shim runs); raises ``OSError``
        where it could not go to ``cwd`` or open the log (the child then gone)."""
        bad = [k for k in env if not _EXPORTABLE.match(k)]
        if bad:  # take() refused such an env: only a name added since could be one (then discarded, as refused)
            raise OSError(errno.EINVAL, f"no shell can export {bad[0]!r}")
        pid, self.pid = self.pid, None  # the command's now, or gone
        # cd exports PWD and OLDPWD, and the shell's PATH is its own: none is the command's unless env says so
        export = "export " + " ".join(_q(f"{k}={v}") for k, v in env.items()) + "; " if env else ""
        script = (f"exec 4<&- </dev/null; cd -- {_q(cwd)} && exec >>{_q(log_path)} 2>&1 || "
                  f"{{ echo {errno.ENOENT} >&3; exit 127; }}; unset PATH PWD OLDPWD; {export}exec 3>&- "
                  + " ".join(_q(a) for a in argv) + "\n")
        try:
            data = script.encode("utf-8", "surrogateescape")
            while data:
                data = data[os.write(self._request, data):]
        finally:
            os.close(self._request)
            self._request = -1
        said = b""
        while more := os.read(self._status, 4096):  # EOF: the child closed it on its way to exec
            said += more
        os.close(self._status)
        self._status = -1
        if said.strip():
            os.waitpid(pid, 0)
            raise OSError(int(said), os.strerror(int(said)), cwd)
        return procs.Child(argv, pid)

    def discard(self) -> None:
        """Kill the child unless it exec'd, and remove the groups unless an attempt took them. Never raises."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = None
        for fd in (self._status, self._request):
            if fd >= 0:
                os.close(fd)
        self._status = self._request = -1
        if not self.taken:
            for path in dict.fromkeys(p for _, p in self.groups.values()):
                cgroup.Group(path).remove()
            self.groups = {}


def _name() -> str:
    return f"{AHEAD}-{os.getpid()}-{os.urandom(3).hex()}"


def _q(text: str) -> str:
    """``text`` quoted for the shell, whatever it holds."""
    return "'" + text.replace("'", "'\\''") + "'"
