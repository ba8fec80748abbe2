"""A job's python_env when the job runs as an OS account (:mod:`trainyard.launch.runas`): built by that account.

A package's build runs its own code (``setup.py``, a build backend), which must not run as this launcher's root;
and a venv the account builds is the account's to change, so it is never another account's: each account has its
own folder of venvs, ``<venv_cache>/uid-N`` (0700, made once). Root writes nothing in that folder: the account
might have put a link where root would write. So the venv's last touches (the in-job helpers' ``.pth``, the ready
marker) are made by the account too, the requirements reach it in a file of root's, and the build's lock is
kept in root's own ``<venv_cache>/.locks``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from trainyard.launch.prepare import SetupError
from trainyard.launch.runas import RunAs

def own_cache(account: RunAs, top: Path) -> tuple[Path, Path]:
    """(root's folder of build locks, the account's own folder of venvs) under the node's venv cache ``top``, which
    must be root's alone: a folder the account could write in would let it put links where root makes these."""
    top.mkdir(parents=True, exist_ok=True)
    _roots(top)
    if top.stat().st_mode & 0o111 != 0o111:  # the account passes through to its own folder, and lists nothing
        top.chmod((top.stat().st_mode & 0o7777) | 0o711)
    locks = top / ".locks"
    try:
        os.mkdir(locks, 0o700)
    except FileExistsError:
        pass
    _roots(locks)
    mine = top / f"uid-{account.uid}"
    try:
        os.mkdir(mine, 0o700)
    except FileExistsError:  # made before, or by another launcher of this account's at this moment
        pass
    try:
        fd = os.open(mine, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:  # a link, or a file
        raise SetupError(f"python_env: {mine} is not a folder of {account.name}'s") from None
    try:
        st = os.fstat(fd)
        if st.st_uid == 0 and st.st_mode & 0o077 == 0:  # made just now (or by root): given to the account, by fd
            os.fchown(fd, account.uid, account.gid)
        elif st.st_uid != account.uid:
            raise SetupError(f"python_env: {mine} is not a folder of {account.name}'s")
    finally:
        os.close(fd)
    return locks, mine


def _roots(folder: Path) -> None:
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        raise SetupError(f"python_env: {folder} must be a folder of root's that no one else may write in")


def can_build(account: RunAs, python: str, uv: str | None) -> str | None:
    """The uv the account builds with (None: python -m venv and pip); SetupError when it cannot run ``python``."""
    if not account.can_run(python):
        raise SetupError(f"python_env: the environment is built as {account.name}, who cannot run this node's "
                         f"Python ({os.path.realpath(python)}): install trainyard where every account can run it "
                         "(/usr, /opt), or give the job an image")
    return uv if uv is not None and account.can_run(uv) else None


def requirements_file(attempt_dir: Path, reqs: list[str]) -> Path:
    """The requirements, in a file of root's the account reads (the attempt's folder, which it only passes)."""
    path = attempt_dir / "python-requirements.txt"
    path.write_text("\n".join(reqs) + "\n")
    path.chmod(0o644)
    return path
