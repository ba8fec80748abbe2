"""A job's Python environment: one virtualenv per content hash, built once, shared.

``python_env`` is ``{"pip": [...], "requirements": "text"}``. Its normalized
content (plus this Python's version, plus the files of any local package it
names) is hashed into a key; the venv lives at ``venv_cache/<key>``.

Built under an fcntl lock, so two attempts never build one venv twice. The
venv is built in place and marked ready last (``.trainyard-ready``), rather
than built elsewhere and renamed: a virtualenv is not relocatable (pip writes
absolute shebangs into its scripts), so the rename would break it. A venv
without the marker is a leftover of a crashed build and is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from trainyard.launch.files import append_log, file_lock
from trainyard.launch.prepare import SetupError
from trainyard.launch.runas import RunAs

READY = ".trainyard-ready"
_SKIP_DIRS = {"__pycache__", ".git", "build", "dist", ".venv", ".tox"}


def _normalized(python_env: dict) -> tuple[list[str], list[str]]:
    pip = sorted(str(p).strip() for p in python_env.get("pip") or [] if str(p).strip())
    lines = (python_env.get("requirements") or "").splitlines()
    reqs = sorted(ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#"))
    return pip, reqs


def _is_local(req: str) -> bool:
    return req.startswith((".", "/", "~", "file:"))


def _tree_digest(path: Path) -> str:
    """Hash of a local package's files, so an edited package gets a fresh venv."""
    h = hashlib.sha256()
    if path.is_file():
        h.update(path.read_bytes())
        return h.hexdigest()
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            p = Path(root) / name
            h.update(str(p.relative_to(path)).encode() + b"\0")
            try:
                h.update(p.read_bytes())
            except OSError:
                pass
    return h.hexdigest()


def venv_key(python_env: dict, work: Path) -> str:
    """The cache key: same packages on the same Python, same venv."""
    pip, reqs = _normalized(python_env)
    local = {}
    for req in pip + reqs:
        if _is_local(req):
            target = Path(req.removeprefix("file://")).expanduser()
            target = target if target.is_absolute() else work / target
            local[req] = _tree_digest(target) if target.exists() else "missing"
    content = {
        "pip": pip, "requirements": reqs, "local": local,
        "python": [sys.implementation.name, *map(str, sys.version_info[:3])],
        "trainyard": str(_trainyard_dir()),  # the venv links to it: a moved trainyard needs a new venv
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:32]


def find_uv() -> str | None:
    uv = shutil.which("uv")
    if uv:
        return uv
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except Exception:
        return None


def ensure_venv(python_env: dict, cache: Path, work: Path, log: Path, cancelled: Callable[[], bool],
                run_as: dict | None = None) -> Path:
    """The ready venv for ``python_env``, building it first if needed.

    With ``run_as`` (the job's OS account) pip runs as that account, in a cache of the account's own: building a
    package runs its code (``setup.py``), which must not run as this launcher's root, and one account's venvs,
    which it may change, are never another's."""
    key = venv_key(python_env, work)
    account, locks = None, cache
    if run_as:
        from trainyard.launch.pyenv_account import own_cache

        account = RunAs(run_as)
        locks, cache = own_cache(account, cache)
    venv = cache / key
    if (venv / READY).exists():
        return venv
    with file_lock(locks / f"{cache.name}-{key}.lock" if account else locks / f"{key}.lock"):
        if (venv / READY).exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)  # fd by fd, no link followed (shutil.rmtree.avoids_symlink_attacks)
        append_log(log, f"building python environment {key[:12]} ...")
        try:
            _build(python_env, venv, cache, work, log, cancelled, account)
        except BaseException:
            shutil.rmtree(venv, ignore_errors=True)
            raise
        append_log(log, "python environment ready")
    return venv


def _build(python_env: dict, venv: Path, cache: Path, work: Path, log: Path, cancelled,  # noqa: ANN001
           account: RunAs | None = None) -> None:
    pip, reqs = _normalized(python_env)
    env = _build_env(account)
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONHOME", None)
    # Caches stay inside venv_cache: the launcher writes nowhere else.
    env.setdefault("UV_CACHE_DIR", str(cache / ".cache" / "uv"))
    env.setdefault("PIP_CACHE_DIR", str(cache / ".cache" / "pip"))
    python = venv / "bin" / "python"
    uv, drop = find_uv(), []
    if account is not None:
        from trainyard.launch.pyenv_account import can_build

        uv, drop = can_build(account, sys.executable, uv), account.prefix()
    if uv:
        create = [uv, "venv", "--python", sys.executable, str(venv)]
        install = [uv, "pip", "install", "--python", str(python)]
    else:
        create = [sys.executable, "-m", "venv", str(venv)]
        install = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    run_logged(drop + create, work, env, log, cancelled)
    args = list(pip)
    if reqs:
        if account is None:
            req_file = venv / "requirements.txt"
            req_file.write_text("\n".join(reqs) + "\n")
        else:
            from trainyard.launch.pyenv_account import requirements_file

            req_file = requirements_file(log.parent, reqs)
        args += ["-r", str(req_file)]
    if args:  # relative paths ("./tinypkg") are relative to the work dir, the cwd here
        run_logged(drop + install + args, work, env, log, cancelled)
    if account is None:
        finish(venv, json.dumps(python_env))
    else:  # the account's own venv: root writes nothing in it (pyenv_account), so the account finishes it
        run_logged(drop + [sys.executable, "-m", "trainyard.launch.pyenv", str(venv), json.dumps(python_env)],
                   work, env, log, cancelled)


def _build_env(account) -> dict[str, str]:  # noqa: ANN001
    """The build's environment: a package's build runs its own code, so it gets what the job's command gets of this
    launcher's (no server token; with an account of its own, no store keys either)."""
    from trainyard.launch.prepare import INHERITED_SECRETS, store_secret

    env = {k: v for k, v in os.environ.items()
           if k not in INHERITED_SECRETS and not (account is not None and store_secret(k))}
    return env if account is None else account.env(env)


def _trainyard_dir() -> Path:
    import trainyard

    return Path(trainyard.__file__).resolve().parent


def link_trainyard(venv: Path) -> None:
    """Make ``import trainyard`` (the in-job helpers) work in the job.

    A .pth file names a folder holding only a link to the trainyard package:
    pointing it at the folder that contains trainyard would, for an installed
    trainyard, put the launcher's whole site-packages on the job's path.
    .pth entries go after site-packages, so the venv's own packages still win.
    """
    holder = venv / "trainyard-link"
    holder.mkdir(exist_ok=True)
    (holder / "trainyard").symlink_to(_trainyard_dir(), target_is_directory=True)
    for site in venv.glob("lib/python*/site-packages"):
        (site / "_trainyard_launcher.pth").write_text(f"{holder}\n")


def finish(venv: Path, python_env_json: str) -> None:
    """The venv's last touches: the in-job helpers linked in, then the ready marker."""
    link_trainyard(venv)
    (venv / READY).write_text(python_env_json)


def run_logged(argv: list[str], cwd: Path, env: dict, log: Path, cancelled) -> None:
    with open(log, "ab") as out:
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as e:
            raise SetupError(f"python_env: cannot run {argv[0]}: {e}") from e
    try:
        _wait(proc, cancelled)
    finally:  # what the build left running (a daemon a setup.py started) goes with it
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if proc.returncode != 0:
        raise SetupError(f"python_env: `{' '.join(argv[:4])} ...` failed with exit code {proc.returncode} (see the log)")


def _wait(proc: subprocess.Popen, cancelled) -> None:  # noqa: ANN001
    while proc.poll() is None:
        if cancelled():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise SetupError("python_env: build interrupted")
        time.sleep(0.05)


if __name__ == "__main__":  # run as a job's account: finish() of its own venv (pyenv_account)
    finish(Path(sys.argv[1]), sys.argv[2])
