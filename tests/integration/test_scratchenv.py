"""A job's own virtualenv: the overlay sees the server's packages but installs into itself; fresh is empty."""

from __future__ import annotations

import subprocess
import sys

from tests.support.wheels import make_wheel
from trainyard.launch.scratchenv import make


def run(python, *args: str) -> str:
    return subprocess.run([str(python), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_overlay_installs_into_itself_and_still_imports_the_servers_packages(tmp_path):
    venv = make("overlay", tmp_path / "venv", tmp_path, tmp_path / "log", lambda: False)
    python = venv / "bin" / "python"
    assert run(python, "-c", "import sys, pydantic, trainyard; print(sys.prefix)") == str(venv)
    wheel = make_wheel(tmp_path)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", "-q", "--disable-pip-version-check",
                    str(wheel)], check=True, capture_output=True)
    assert run(python, "-c", "import tinypkg; print(tinypkg.__file__)").startswith(str(venv))
    server = subprocess.run([sys.executable, "-c", "import tinypkg"], capture_output=True)
    assert server.returncode != 0  # not in the server's environment


def test_a_fresh_venv_has_pip_and_trainyard_but_not_the_servers_packages(tmp_path):
    venv = make("fresh", tmp_path / "venv", tmp_path, tmp_path / "log", lambda: False)
    python = venv / "bin" / "python3"
    assert run(python, "-c", "import sys, trainyard; print(sys.prefix)") == str(venv)
    assert "pip" in run(python, "-m", "pip", "--version")
    assert subprocess.run([str(python), "-c", "import pydantic"], capture_output=True).returncode != 0
