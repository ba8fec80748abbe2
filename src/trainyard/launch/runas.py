"""Running a job as the OS account its user is mapped to (local engine, server run as root).

The launcher stays root: it reads ``launch.json`` (0600, root's: the attempt's
credential never reaches the job), manages the memory cgroup and uploads the
outputs. Only the command drops to the account, through ``setpriv`` after the
cgroup shim has joined the group. What the job writes to (its work dir, outputs,
checkpoints, metrics file) is handed to the account and closed to everyone else
(0700); the folders above them are only traversable (0711), never listable.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from trainyard import envvars
from trainyard.launch.files import open_folder, walk_held


# where what root runs before the drop (the cgroup shim, the read-only mounts, setpriv) is found: by absolute path,
# never on the job's PATH, where the job may have put its own `sh` or `mount`
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# with 0, any account may hard-link a file of root's into its own folders, which root then captures, uploads or
# hands over (chown) by that name: the kernel's own check, which trainyard's walks rely on for files as O_NOFOLLOW and
# their folder fds do for links
PROTECTED_HARDLINKS = Path("/proc/sys/fs/protected_hardlinks")


def node_problem() -> str | None:
    """Why jobs may not run as an account on this node, or None."""
    try:
        value = PROTECTED_HARDLINKS.read_text().strip()
    except OSError:
        return None  # not Linux's /proc (nothing else runs setpriv): prefix() says what is missing
    if value != "0":
        return None
    return ("this node lets users hard-link files they do not own (fs.protected_hardlinks=0), so a job could have "
            "root copy or give it any file: jobs do not run as an account here until it is 1 "
            "(sysctl -w fs.protected_hardlinks=1, the default of every major distribution)")


class RunAs:
    def __init__(self, spec: dict) -> None:
        self.uid = int(spec["uid"])
        self.gid = int(spec["gid"])
        self.name = str(spec.get("name") or self.uid)
        self.home = spec.get("home")

    def prefix(self) -> list[str]:
        """What goes before the command: drop to the account, its groups only."""
        setpriv = shutil.which("setpriv", path=ROOT_PATH)
        if setpriv is None:
            raise OSError(f"running as {self.name} needs setpriv (util-linux) on this machine")
        return [setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--"]

    def drop(self, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """``(prefix, start_env)``: run ``prefix + argv`` with ``start_env`` to run ``argv`` as the account with
        ``env``. What runs as root before the drop (setpriv, and whatever a caller puts before it) starts with
        ``start_env``: ``env`` with the variables that make a program read or run other files (``envvars.LOADS_CODE``)
        as this launcher has them (the node's, trusted); where the job's differ (``LD_LIBRARY_PATH``, say), they
        reach the command through env(1) and sh's ``exec``, run after the drop."""
        risky = {k for k in {*env, *os.environ} if k in envvars.LOADS_CODE_NAMES or k.startswith(envvars.LOADS_CODE)}
        held = {k: env[k] for k in risky if k in env and env[k] != os.environ.get(k)}  # the node's own are trusted
        start = {k: v for k, v in env.items() if k not in risky}
        start.update({k: os.environ[k] for k in risky if k in os.environ})
        if not held and all(k in env for k in risky if k in os.environ):
            return self.prefix(), start
        # a command whose name holds "=" would be one more assignment to env(1): sh's exec takes it as a name
        back = [shutil.which("env", path=ROOT_PATH) or "/usr/bin/env", *(f"-u{k}" for k in risky if k not in env),
                *(f"{k}={v}" for k, v in held.items()), shutil.which("sh", path=ROOT_PATH) or "/bin/sh", "-c",
                'exec "$@"', "sh"]
        return self.prefix() + back, start

    def hand_over(self, *paths: Path) -> None:
        """Give the job's own folders and files (recursively) to the account, closed to others. The walk holds each
        folder open (``files.walk_held``, no link followed): the account may already own a folder here and swap it for a
        link meanwhile, which a walk by path would follow, chowning what is not the job's."""
        for top in paths:
            if not top.exists():
                continue
            if top.is_dir() and not top.is_symlink():
                held = open_folder(top)
                try:
                    for _, dirs, files, fd in walk_held(held):
                        for name in [*dirs, *files]:
                            os.chown(name, self.uid, self.gid, dir_fd=fd, follow_symlinks=False)
                finally:
                    os.close(held)
            os.lchown(top, self.uid, self.gid)
            if not top.is_symlink():
                top.chmod(0o700 if top.is_dir() else 0o600)

    def can_run(self, path: str) -> bool:
        """Whether the account may run the program at ``path``: every folder on the way to it, as written and as
        its links lead, searchable, and the file executable, by the account as owner, group or other (its other
        groups aside)."""
        try:
            for way in {os.path.abspath(path), os.path.realpath(path)}:
                for p in [*reversed(Path(way).parents), Path(way)]:
                    st = os.stat(p)
                    shift = 6 if st.st_uid == self.uid else 3 if st.st_gid == self.gid else 0
                    if not (st.st_mode >> shift) & 0o1:
                        return False
        except OSError:
            return False
        return True

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """The account's own name and home, as a login would give them."""
        out = {**env, "USER": self.name, "LOGNAME": self.name}
        if self.home:
            out["HOME"] = str(self.home)
        return out


def traversable(path: Path, up_to: Path) -> None:
    """Let other accounts pass through ``path`` and its parents up to ``up_to`` (0711: no listing)."""
    path, up_to = path.resolve(), up_to.resolve()
    for p in [path, *path.parents]:
        if up_to != p and up_to not in p.parents:
            break
        if p.stat().st_mode & 0o111 != 0o111:
            p.chmod((p.stat().st_mode & 0o7777) | 0o711)
        if p == up_to:
            break


def group_folder(path: Path, gid: int, up_to: Path) -> Path:
    """``path``, made if missing, this process's, which the group ``gid`` may list and pass through and no one else
    may (0750), with its parents up to ``up_to`` passable (:func:`traversable`): where root keeps what only one
    account's jobs read (their cached inputs), in a home that is otherwise root's alone."""
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, os.geteuid(), gid)
    path.chmod(0o750)
    traversable(path.parent, up_to)
    return path
