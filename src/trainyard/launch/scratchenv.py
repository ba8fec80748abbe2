"""A virtualenv of the attempt's own, so that ``pip install`` in a job never lands in the server's.

A job with no ``env`` used to run with the server's interpreter on its PATH; a
``pip install`` in its command (Kubeflow components commonly start with
``python3 -m pip install …``) then changed the environment trainyard itself
runs from. Two kinds, made in the attempt's folder and gone with it:

- ``overlay`` (plain and notebook jobs with no ``env``): the server's interpreter and,
  read-only, its packages (a ``.pth`` adds the server's site-packages after
  the venv's own). Made by hand, a few files and links, no pip run; and made ahead:
  about fifteen file creations cost several milliseconds of a job's start on a slow
  disk, so the launcher takes a spare overlay (one rename, :func:`spare_pool`) and
  builds the next one after its attempt is reported (:func:`replenish`), or, when the
  job left its overlay exactly as it found it, puts that one back (:func:`recycle`). ``pip`` and
  ``python -m pip`` install into the overlay; pip leaves packages outside the
  environment alone (it says "Not uninstalling … outside environment").
- ``fresh`` (a Kubeflow component or an ``image`` job run on the host because no container
  runtime is here): an empty virtualenv with pip in it, as a fresh
  ``python:3`` image would be, plus ``import trainyard`` for the in-job helpers.
"""

from __future__ import annotations

import binascii
import os
import site
import sys
import time
from pathlib import Path
from typing import Callable

KINDS = ("overlay", "fresh")
SPARES = 2  # at most this many ready per pool: an attempt takes one, and builds one after its report
RECYCLED = 64  # at most this many ready in a pool for an unchanged overlay to be put back: a burst's launchers
#                start (and take) and end together, as many as a node holds; past this, the attempt folder keeps it
SPARES_DIR = ".overlay-spares"  # in venv_cache; hidden: not one of launch.pyenv's content-hash venvs
STALE_BUILD = 60.0  # seconds: a spare still under construction after this lost its launcher
# Runs as pip's own console script does, from wherever the overlay is: the first two lines are sh
# (which runs the file again with the python beside it) and a string to Python (distlib's trick for
# long shebangs). "#!/path/to/venv/bin/python" would tie the overlay to the folder it was built in.
_PIP_SHIM = ("#!/bin/sh\n"
             "'''exec' \"${0%/*}/python\" \"$0\" \"$@\"\n"
             "' '''\n"
             "import sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n")


def make(kind: str, venv: Path, work: Path, log: Path, cancelled, spares: Path | None = None) -> Path:  # noqa: ANN001
    """``spares``: a pool of ready overlays (:func:`spare_pool`) to take one from, when it has one."""
    if kind == "overlay":
        return overlay(venv, spares)
    if kind == "fresh":
        return fresh(venv, work, log, cancelled)
    raise ValueError(f"venv kind {kind!r}: expected one of {KINDS}")


def _base_python() -> str:
    return getattr(sys, "_base_executable", None) or sys.executable


def overlay(venv: Path, spares: Path | None = None) -> Path:
    """A virtualenv over the launcher's interpreter that sees its packages but installs into its own."""
    if (venv / "pyvenv.cfg").exists():
        return venv  # a relaunch of the same replica
    if spares is not None and take_spare(spares, venv):
        return venv
    _build_overlay(venv)
    return venv


def _build_overlay(venv: Path) -> None:
    base = _base_python()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    bindir = venv / "bin"
    own_site = venv / "lib" / f"python{version}" / "site-packages"
    own_site.mkdir(parents=True, exist_ok=True)
    bindir.mkdir(exist_ok=True)
    for name in ("python", "python3", f"python{version}"):
        (bindir / name).symlink_to(base)
    for name in ("pip", "pip3", f"pip{version}"):
        shim = bindir / name
        shim.write_text(_PIP_SHIM)
        shim.chmod(0o755)
    # addsitedir, not plain lines: the server's own .pth files (editable installs) are read too
    (own_site / "_trainyard_server_packages.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in _host_sites()))
    # written last: its presence is what says the overlay is complete
    (venv / "pyvenv.cfg").write_text(
        f"home = {Path(base).parent}\ninclude-system-site-packages = false\nversion = {sys.version.split()[0]}\n")


def _host_sites() -> list[str]:
    return [p for p in site.getsitepackages() if os.path.isdir(p)]


_pool_key: str | None = None


def spare_pool(venv_cache: Path) -> Path:
    """Where this interpreter's ready overlays wait: one folder per interpreter, version and
    site-packages, so that a spare built by another server's Python is never taken."""
    global _pool_key
    if _pool_key is None:
        what = "\0".join([_base_python(), sys.version, *_host_sites(), _PIP_SHIM])
        _pool_key = f"py{sys.version_info.major}.{sys.version_info.minor}-{binascii.crc32(what.encode()):08x}"
    return venv_cache / SPARES_DIR / _pool_key


def spares(config) -> Path | None:  # noqa: ANN001
    """The pool an attempt's overlay is taken from (a launch.config.LaunchConfig's ``venv_cache``)."""
    return spare_pool(Path(config.venv_cache)) if config.venv == "overlay" and config.venv_cache else None


def refill(config, before_build: Callable[[], object] | None = None) -> None:  # noqa: ANN001
    """The next attempt's overlay, for a launcher to build once its own attempt is reported
    (``before_build`` called first when there is one to build)."""
    if (pool := spares(config)) is None:
        return
    try:
        replenish(pool, before_build=before_build)
    except OSError as e:  # the next attempt builds its own; the launcher's log says why
        print(f"spare overlays in {pool}: {e}", flush=True)


def seen(venv: Path) -> dict[str, tuple[int, int, int, int]]:
    """Each entry under ``venv`` (not ``venv`` itself, which the take renames): inode, ctime, mode, size.

    A job that installs, removes or rewrites anything in its overlay changes an entry's ctime (which,
    unlike mtime, no one can set back), a folder's (its listing changed), or the set of entries.
    """
    out, top = {}, str(venv)
    folders = [top]
    while folders:  # scandir's entries, each lstat'ed once: ~30 % less than os.walk and an lstat per name
        try:
            entries = os.scandir(folders.pop())
        except OSError:  # as os.walk: a folder it cannot list adds nothing
            continue
        with entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                out[entry.path[len(top):]] = (st.st_ino, st.st_ctime_ns, st.st_mode, st.st_size)
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
    return out


def recycle(config, venv: Path, before: dict | None) -> bool:  # noqa: ANN001
    """Put the attempt's overlay back in its pool if the job left it as :func:`seen` saw it at the start.

    Called once the command's whole process tree is gone (the launcher is its subreaper and
    kills what is left), so nothing of the job can write to it after the check. A second
    build per job (about fifteen file creations, 7–9 ms of CPU measured) is what this saves.
    """
    if before is None or (pool := spares(config)) is None:
        return False
    try:
        if seen(venv) != before:
            return False
        pool.mkdir(parents=True, exist_ok=True)
        if len(_ready(pool)) >= RECYCLED:
            return False
        os.rename(venv, pool / _name())
        return True
    except OSError:  # no pool yet, another filesystem, an entry gone: the attempt folder keeps it
        return False


def _ready(pool: Path) -> list[str]:
    """The pool's whole overlays: a dot name is one still being built (:func:`replenish`)."""
    return [n for n in os.listdir(pool) if not n.startswith(".")]


def take_spare(pool: Path, venv: Path) -> bool:
    try:
        names = _ready(pool)
    except OSError:
        return False
    for name in names:
        try:
            os.rename(pool / name, venv)
            return True
        except FileNotFoundError:
            continue  # another launcher took that one first
        except OSError:
            return False  # another filesystem (EXDEV), or a cut-short overlay in the way: build in place
    return False


def replenish(pool: Path, keep: int = SPARES, before_build: Callable[[], object] | None = None) -> bool:
    """Build one spare if ``pool`` holds fewer than ``keep``; whether it did.

    One per call, whatever is missing: the launchers of a burst finish together and
    each sees the pool short; building the whole shortfall each would be several
    overlays per job where the jobs took one (a spare built in excess is not lost,
    the next attempt takes it). It is built under a dot name and renamed into the
    pool once whole, so a spare in the pool is always complete; a dot folder older
    than :data:`STALE_BUILD` is a crashed builder's and is removed.
    """
    import shutil

    pool.mkdir(parents=True, exist_ok=True)
    ready, now = 0, time.time()
    for name in os.listdir(pool):
        if not name.startswith("."):
            ready += 1
        elif now - _mtime(pool / name) > STALE_BUILD:
            shutil.rmtree(pool / name, ignore_errors=True)
    if ready >= keep:
        return False
    if before_build is not None:
        before_build()
    tmp = pool / f".{os.getpid()}-{_name()[:8]}"
    try:
        _build_overlay(tmp)
        os.rename(tmp, pool / _name())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return True


def _name() -> str:
    return os.urandom(16).hex()  # not uuid4: importing uuid costs a launcher ~2.4 ms of CPU


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return time.time()


def fresh(venv: Path, work: Path, log: Path, cancelled) -> Path:  # noqa: ANN001
    """An empty virtualenv with pip, for this attempt only."""
    import shutil

    from trainyard.launch.pyenv import READY, find_uv, link_trainyard, run_logged

    if (venv / READY).exists():
        return venv  # a relaunch of the same replica
    shutil.rmtree(venv, ignore_errors=True)  # a build that was cut short
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    uv = find_uv()
    create = ([uv, "venv", "--seed", "--quiet", "--python", _base_python(), str(venv)] if uv else
              [_base_python(), "-m", "venv", str(venv)])
    run_logged(create, work, env, log, cancelled)
    link_trainyard(venv)
    (venv / READY).write_text("fresh\n")
    return venv
