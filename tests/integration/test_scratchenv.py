"""A job's own virtualenv: the overlay sees the server's packages but installs into itself; fresh is empty."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.support.wheels import make_wheel
from trainyard.launch.scratchenv import RECYCLED, SPARES, STALE_BUILD, make, recycle, replenish, seen, spare_pool


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


def test_a_spare_overlay_moved_into_an_attempt_installs_there(tmp_path):
    pool = spare_pool(tmp_path / "venvs")
    assert [replenish(pool) for _ in range(SPARES + 1)] == [True] * SPARES + [False]  # one a call, up to SPARES
    (tmp_path / "attempt").mkdir()
    venv = make("overlay", tmp_path / "attempt" / "venv", tmp_path, tmp_path / "log", lambda: False, spares=pool)
    assert len([n for n in os.listdir(pool) if not n.startswith(".")]) == SPARES - 1  # taken, not built
    python = venv / "bin" / "python"
    assert run(python, "-c", "import sys, pydantic; print(sys.prefix)") == str(venv)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", "-q", "--disable-pip-version-check",
                    str(make_wheel(tmp_path))], check=True, capture_output=True)
    assert run(python, "-c", "import tinypkg; print(tinypkg.__file__)").startswith(str(venv))


def test_a_spare_cut_short_is_never_taken_and_goes_once_stale(tmp_path):
    pool = spare_pool(tmp_path / "venvs")
    half = pool / ".4242-deadbeef"
    (half / "bin").mkdir(parents=True)
    (tmp_path / "attempt").mkdir()
    venv = make("overlay", tmp_path / "attempt" / "venv", tmp_path, tmp_path / "log", lambda: False, spares=pool)
    assert (venv / "pyvenv.cfg").exists() and half.exists()  # built in place; the half one left alone
    old = time.time() - 2 * STALE_BUILD
    os.utime(half, (old, old))
    replenish(pool)
    assert not half.exists()


class Config:  # the two fields of a LaunchConfig that recycle reads
    venv = "overlay"

    def __init__(self, cache) -> None:
        self.venv_cache = str(cache)


def test_only_an_overlay_left_exactly_as_seen_goes_back_and_the_pool_stays_bounded(tmp_path):
    cache = tmp_path / "venvs"
    pool = spare_pool(cache)
    pool.mkdir(parents=True)
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    changes = {
        "a file added": lambda v: (v / site / "evil.pth").write_text("import os\n"),
        "a file rewritten, same size": lambda v: (v / "bin" / "pip").write_text((v / "bin" / "pip").read_text()),
        "a mode changed": lambda v: (v / "bin" / "pip3").chmod(0o777),
        "a link replaced": lambda v: ((v / "bin" / "python3").unlink(), (v / "bin" / "python3").symlink_to("/bin/sh")),
        "a file removed": lambda v: (v / "pyvenv.cfg").unlink(),
    }
    for what, change in changes.items():
        venv = make("overlay", tmp_path / what / "venv", tmp_path, tmp_path / "log", lambda: False)
        before = seen(venv)
        time.sleep(0.01)  # past the filesystem's timestamp granularity
        change(venv)
        assert not recycle(Config(cache), venv, before), what
        assert venv.exists(), what
    assert os.listdir(pool) == []
    for i in range(RECYCLED + 1):
        venv = make("overlay", tmp_path / f"u{i}" / "venv", tmp_path, tmp_path / "log", lambda: False)
        assert recycle(Config(cache), venv, seen(venv)) == (i < RECYCLED)
    assert len(os.listdir(pool)) == RECYCLED
