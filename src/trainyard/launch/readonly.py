"""Inputs fetched into a node's shared cache, kept intact for the next job on the node.

A fetched input is used in place, not copied: a job that wrote into it would change what every later
job on the node reads (the cache is keyed by the object's ETag, not by what is on disk). Three guards:

- the cached files and folders are made read-only (0444/0555) before they are renamed into place,
  which stops a job run as another account (``run_as``) and slips by mistake of its own account;
- in a container, the cached input is bind-mounted ``:ro`` (see :mod:`trainyard.launch.container`);
- a local process started by a root launcher runs in a mount namespace of its own in which each
  cached input is a read-only bind mount (``unshare`` and ``mount`` from util-linux). Permission bits
  do not stop root, nor an owner who can ``chmod`` them back; a read-only mount stops both (EROFS).
  Where the namespace cannot be made (no util-linux, no CAP_SYS_ADMIN) only the bits hold. A command run beside
  it (``trainyard exec``) enters that namespace (:mod:`trainyard.launch.nsjoin`), its mounts made.

Standard library only: this runs in the launcher.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from trainyard.launch.runas import ROOT_PATH

# mounts each path up to "--" read-only over itself, then execs the rest: pid and signals stay the job's
# (run as root with the job's PATH: `mount` is named by its path, never looked up there)
_SCRIPT = ('while [ "$1" != -- ]; do {m} --bind "$1" "$1" && {m} -o remount,bind,ro "$1" "$1" || exit 126; '
           'shift; done; shift; exec "$@"')
NAME = "trainyard-readonly"  # the script's $0: what tells its process (and unshare's on the way to it) from the job's
_usable: bool | None = None


def freeze(top: Path) -> None:
    """Make ``top`` (a file or a folder tree) read-only for everyone, links left alone."""
    for root, dirs, files in os.walk(top, followlinks=False) if top.is_dir() else ():
        for name in files:
            _drop_write(Path(root, name))
        for name in dirs:
            _drop_write(Path(root, name))
    _drop_write(top)


def confine(top: Path, gid: int) -> None:
    """``top`` (made by this process, read-only already) readable by the group ``gid`` as by its owner, and by no
    one else: an account's own (its primary group must be its alone, as user private groups are)."""
    for path in [top, *(Path(root, name) for root, dirs, files in os.walk(top) for name in [*dirs, *files])]:
        st = os.lstat(path)
        if not stat.S_ISLNK(st.st_mode):
            os.chown(path, -1, gid)
            mine = stat.S_IMODE(st.st_mode) & 0o500
            os.chmod(path, mine | mine >> 3)


def thaw(top: Path) -> None:
    """Its folders writable again by their owner, so that it can be removed (a stale cache entry)."""
    if not top.is_dir() or top.is_symlink():
        return
    folders = [top, *(Path(root, name) for root, dirs, _ in os.walk(top) for name in dirs)]
    for p in folders:
        if not p.is_symlink():
            os.chmod(p, stat.S_IMODE(os.lstat(p).st_mode) | stat.S_IWUSR)


def remove(top: Path) -> None:
    thaw(top)
    shutil.rmtree(top, ignore_errors=True)


def _drop_write(p: Path) -> None:
    st = os.lstat(p)
    if not stat.S_ISLNK(st.st_mode):
        os.chmod(p, stat.S_IMODE(st.st_mode) & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def mount_prefix(paths: list[str], shm: int | None = None) -> list[str]:
    """What goes before the command so that it sees ``paths`` read-only, or ``[]`` where this node
    cannot (not root, no util-linux, or mount namespaces refused); checked once per launcher.

    With ``shm`` (bytes; 0: the kernel's default size), also a ``/dev/shm`` and SysV IPC of its own: a tmpfs and an
    IPC namespace that the kernel frees with the command's last process. On the node's, what a job run as an account
    left there stayed the account's, in RAM, after its end; removing it then would need to know that no other job of
    that account on the node still uses it, and which files were whose."""
    if not (paths or shm is not None) or not usable():
        return []
    mount = shlex.quote(shutil.which("mount", path=ROOT_PATH) or "/bin/mount")
    script = _SCRIPT.format(m=mount)
    if shm is not None:
        size = f",size={shm}" if shm else ""
        script = f"{mount} -t tmpfs -o nosuid,nodev,mode=1777{size} trainyard-shm /dev/shm || exit 126; {script}"
    return [shutil.which("unshare", path=ROOT_PATH) or "/usr/bin/unshare", "--mount",
            *(["--ipc"] if shm is not None else []), "--propagation", "private",
            shutil.which("sh", path=ROOT_PATH) or "/bin/sh", "-c", script,
            NAME, *paths, "--"]


def mounting(argv: list[bytes]) -> bool:
    """Whether a process's ``argv`` (its /proc cmdline's fields) is that of :func:`mount_prefix`'s ``unshare`` or
    script, which have not exec'd the rest yet: its mounts may be unmade still. An empty one is a process mid-exec
    (the kernel sets the new image's args last), unshare's of the script among them: its mounts may be unmade too."""
    if argv == [b""]:
        return True
    at = argv.index(NAME.encode()) if NAME.encode() in argv else -1
    return at >= 2 and argv[at - 2] == b"-c" and argv[at - 1].endswith(b'exec "$@"')


def own_shm(cfg) -> int | None:  # noqa: ANN001  (a LaunchConfig)
    """The size of the ``/dev/shm`` of its own a command gets (0: the kernel's default), None for the node's: the
    server's own jobs keep it, and so do the replicas of a job of several, whose NCCL meets through it when two
    of them share a node (they run as one account anyway)."""
    if not cfg.run_as or cfg.replicas > 1:  # the server's count: a job's own env_vars may say anything
        return None
    return cfg.memory_limit or 0


def usable() -> bool:
    """Whether a read-only bind mount in a new mount namespace works here: tried on a scratch folder."""
    global _usable
    if _usable is None:
        _usable = False
        if os.geteuid() == 0 and shutil.which("unshare") and shutil.which("mount"):
            with tempfile.TemporaryDirectory(prefix="trainyard-ro-") as d:
                probe = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _SCRIPT.format(m="mount"),
                         "probe", d, "--",
                         "sh", "-c", 'touch "$1/x" 2>/dev/null && exit 1 || exit 0', "sh", d]
                try:
                    _usable = subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
                except (OSError, subprocess.TimeoutExpired):
                    _usable = False
    return _usable
