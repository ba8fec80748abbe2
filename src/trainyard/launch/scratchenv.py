"""A virtualenv of the attempt's own, so that ``pip install`` in a job never lands in the server's.

A job with no ``env`` used to run with the server's interpreter on its PATH; a
``pip install`` in its command (Kubeflow components commonly start with
``python3 -m pip install …``) then changed the environment trainyard itself
runs from. Two kinds, made in the attempt's folder and gone with it:

- ``overlay`` (plain and notebook jobs with no ``env``): the server's interpreter and,
  read-only, its packages (a ``.pth`` adds the server's site-packages after
  the venv's own). Made by hand, a few files and links (milliseconds), no pip run. ``pip`` and
  ``python -m pip`` install into the overlay; pip leaves packages outside the
  environment alone (it says "Not uninstalling … outside environment").
- ``fresh`` (a Kubeflow component or an ``image`` job run on the host because no container
  runtime is here): an empty virtualenv with pip in it, as a fresh
  ``python:3`` image would be, plus ``import trainyard`` for the in-job helpers.
"""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

KINDS = ("overlay", "fresh")
_PIP_SHIM = "#!{python}\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n"


def make(kind: str, venv: Path, work: Path, log: Path, cancelled) -> Path:  # noqa: ANN001
    if kind == "overlay":
        return overlay(venv)
    if kind == "fresh":
        return fresh(venv, work, log, cancelled)
    raise ValueError(f"venv kind {kind!r}: expected one of {KINDS}")


def _base_python() -> str:
    return getattr(sys, "_base_executable", None) or sys.executable


def overlay(venv: Path) -> Path:
    """A virtualenv over the launcher's interpreter that sees its packages but installs into its own."""
    if (venv / "pyvenv.cfg").exists():
        return venv  # a relaunch of the same replica
    base = _base_python()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    bindir = venv / "bin"
    own_site = venv / "lib" / f"python{version}" / "site-packages"
    own_site.mkdir(parents=True, exist_ok=True)
    bindir.mkdir(exist_ok=True)
    for name in ("python", "python3", f"python{version}"):
        (bindir / name).symlink_to(base)
    python = bindir / "python"
    for name in ("pip", "pip3", f"pip{version}"):
        shim = bindir / name
        shim.write_text(_PIP_SHIM.format(python=python))
        shim.chmod(0o755)
    host_sites = [p for p in site.getsitepackages() if os.path.isdir(p)]
    # addsitedir, not plain lines: the server's own .pth files (editable installs) are read too
    (own_site / "_trainyard_server_packages.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in host_sites))
    # written last: its presence is what says the overlay is complete
    (venv / "pyvenv.cfg").write_text(
        f"home = {Path(base).parent}\ninclude-system-site-packages = false\nversion = {sys.version.split()[0]}\n")
    return venv


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
