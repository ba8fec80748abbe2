"""The namespaces of a replica's command, held for a command run beside it (``trainyard exec``) to join.

A replica's command started by a root launcher with cached inputs, or as an account, runs in a mount namespace of
its own, and an account's single replica also in an IPC namespace with a ``/dev/shm`` of its own
(:func:`trainyard.launch.readonly.mount_prefix`). A command beside it sees what it sees only in those: it enters
them with ``nsenter``, as ``kubectl exec`` enters a container's; a fresh ``unshare`` showed it the node's
``/dev/shm`` and IPC, and with them what other jobs of the account had left there.

They are taken from the command's process through ``/proc/PID``, checked after the reads to be still running
and unreaped by the launcher (its parent): until then no other process can have that pid. Held open, they stay
those namespaces until ``nsenter`` has joined them (it opens them as ``/proc/<launcher>/fd/N``), whatever the
process does meanwhile. Not joined, but waited out: the launcher's own namespaces and a mount namespace whose
read-only mounts are not all made yet (the command's first instants, from its spawn to the mount script's last
mount, while the process is still ``unshare`` or the script). Joined once the script has exec'd the rest, as the
mounts are then: a job run as root may take its read-only inputs' mounts off, as it may anything in its own
namespace, and a command beside it sees what it sees (it waited 5 s for mounts that would never come, and said
the job had not made its namespaces). Refused: namespaces the command made itself, in a user namespace of its
own: an account can, and mount there over the programs that root runs on the way to the drop (``setpriv``).
Standard library only.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from trainyard.launch import readonly
from trainyard.launch.runas import ROOT_PATH

_CD = 'cd -- "$1" || exit 126; shift; exec "$@"'  # then the rest, the drop to the account first, as the replica's
READY_WITHIN = 5.0  # seconds a replica just spawned gets to make its mounts (a few mount(8) runs) before one joins
# the namespaces of a replica's own: its command's pid (the launcher's child), the cached inputs mounted read-only
# in them, and whether they have an IPC namespace and /dev/shm of their own
Spaces = tuple[int, tuple[str, ...], bool]


class NotJoined(Exception):
    """The replica's namespaces cannot be joined (the message says why)."""


class Held:
    """The replica's mount and IPC namespaces, open until :meth:`close` (``with``)."""

    def __init__(self, mnt: int, ipc: int) -> None:
        self.mnt, self.ipc = mnt, ipc

    def prefix(self, work: str) -> list[str]:
        """What goes before a command to run it in them, in ``work``. It needs root, as the replica's own
        ``unshare`` did; the drop to an account comes after it."""
        me = os.getpid()
        # entering a mount namespace moves to its root; nsenter's --wd would open the folder before, in this
        # namespace, where a path relative to it does not cross the replica's mounts (its read-only inputs)
        return [shutil.which("nsenter", path=ROOT_PATH) or "nsenter", f"--mount=/proc/{me}/fd/{self.mnt}",
                f"--ipc=/proc/{me}/fd/{self.ipc}", "--", shutil.which("sh", path=ROOT_PATH) or "/bin/sh", "-c",
                _CD, "trainyard-exec", work]

    def close(self) -> None:
        for fd in (self.mnt, self.ipc):
            os.close(fd)

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def hold(spaces: Spaces, within: float = READY_WITHIN) -> Held:
    """The namespaces of ``spaces`` once they are ready (waiting up to ``within`` seconds for a command that is
    starting); raises :class:`NotJoined` where its command has ended, made namespaces of its own, or is not ready."""
    if shutil.which("nsenter", path=ROOT_PATH) is None:
        raise NotJoined("no nsenter (util-linux) on this node to enter the replica's namespaces")
    end = time.monotonic() + within
    while (held := _try(spaces)) is None:
        if time.monotonic() > end:
            raise NotJoined(f"the replica's command has not made its namespaces after {within:g}s: try again")
        time.sleep(0.01)
    return held


def _try(spaces: Spaces) -> Held | None:
    """The namespaces held, or None where they are not ready."""
    pid, cached, own_ipc = spaces
    fds: list[int] = []
    try:
        try:
            for name in ("mnt", "ipc"):
                fds.append(os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY | os.O_CLOEXEC))
            user = os.stat(f"/proc/{pid}/ns/user")
            # before the mounts: once its argv is the rest's, the script has made them all (then exec'd)
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            mounts = Path(f"/proc/{pid}/mountinfo").read_text()
            now = os.stat(f"/proc/{pid}/ns/mnt")  # the mounts read are those of the namespace held
        except OSError as e:
            _check_running(pid)  # an exited process has no namespaces left
            raise NotJoined(f"cannot read the replica's namespaces: {e}") from e
        _check_running(pid)  # so what was read is the command's, not a later process's of that pid
        mnt, ipc = (os.fstat(fd) for fd in fds)
        mine = {name: os.stat(f"/proc/self/ns/{name}") for name in ("mnt", "ipc", "user")}
        if (user.st_dev, user.st_ino) != (mine["user"].st_dev, mine["user"].st_ino):
            raise NotJoined("the replica's command runs in namespaces it made itself: not joined")
        # made: its script went past (a root job may unmount its read-only inputs since, as it may anything there:
        # what it sees is what a command beside it sees), or is at its end, its mounts all in place
        ready = (mnt.st_ino != mine["mnt"].st_ino and (mnt.st_dev, mnt.st_ino) == (now.st_dev, now.st_ino)
                 and (not own_ipc or ipc.st_ino != mine["ipc"].st_ino)
                 and (not readonly.mounting(argv) or _mounted(mounts, cached, own_ipc)))
        if not ready:
            return None
        held, fds = Held(*fds), []
        return held
    finally:
        for fd in fds:
            os.close(fd)


def _check_running(pid: int) -> None:
    try:  # WNOWAIT: the status stays the launcher's to take
        running = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:  # reaped already
        running = False
    if not running:
        raise NotJoined("the replica's command has ended")


def _mounted(mountinfo: str, cached: tuple[str, ...], own_shm: bool) -> bool:
    """Whether the mount script is done (proc(5)'s mountinfo): each cached input mounted read-only over itself,
    and the ``/dev/shm`` of its own; the script makes that first and the input's read-only remount last."""
    read_only, shm = set(), False
    for line in mountinfo.splitlines():
        fields, _, fs = line.partition(" - ")
        fields, fs = fields.split(), fs.split()
        if len(fields) < 6 or len(fs) < 2:
            continue
        point = _unescape(fields[4])
        if "ro" in fields[5].split(","):
            read_only.add(point)
        shm = shm or (point == "/dev/shm" and fs[:2] == ["tmpfs", "trainyard-shm"])
    return (shm or not own_shm) and all(os.path.realpath(p) in read_only or p in read_only for p in cached)


def _unescape(field: str) -> str:
    """A mountinfo path as it is: the kernel writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field
