"""python_env: a cached virtualenv per content, with a local package built into it.

The tiny package builds with an in-tree PEP 517 backend, so no index is
needed: the test runs offline.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.support.accounts import nobody_python
from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    PYTHON, make_config, pid_alive, read_result, report_server, run_launcher, start_launcher,
)
from tests.support.waiting import until
from trainyard.launch.prepare import SetupError
from trainyard.launch.pyenv import READY
from trainyard.launch.pyenv_account import own_cache
from trainyard.launch.runas import RunAs

BACKEND = '''
import base64, hashlib, os, time, zipfile

NAME, VERSION = "tinypkg", "0.1.0"
DELAY = 0  # seconds the build takes: a test that cancels mid-build raises it
DIST = f"{NAME}-{VERSION}.dist-info"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    time.sleep(DELAY)
    files = {
        f"{NAME}/__init__.py": open(os.path.join(NAME, "__init__.py"), "rb").read(),
        f"{DIST}/METADATA": f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n".encode(),
        f"{DIST}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: tiny\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    def line(path, data):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"{path},sha256={digest},{len(data)}"
    record = "\\n".join(line(p, d) for p, d in files.items()) + f"\\n{DIST}/RECORD,,\\n"
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as whl:
        for path, data in files.items():
            whl.writestr(path, data)
        whl.writestr(f"{DIST}/RECORD", record)
    return name
'''

PYPROJECT = """
[build-system]
requires = []
build-backend = "tinybackend"
backend-path = ["."]

[project]
name = "tinypkg"
version = "0.1.0"
"""

# the package, the venv, the in-job helpers, and none of the launcher's own packages (fastapi)
CHECK = ("import importlib.util, sys, tinypkg, trainyard; "
         "print(tinypkg.ANSWER, sys.prefix, trainyard.log_metrics.__name__, importlib.util.find_spec('fastapi'))")


def snapshot_with_tinypkg(tmp_path, build_delay: float = 0, building_mark=None):
    """The tiny package as a code snapshot; its build takes ``build_delay`` s, and first touches
    ``building_mark`` when given (so a test knows the build is under way)."""
    pkg = tmp_path / "code" / "tinypkg"
    (pkg / "tinypkg").mkdir(parents=True)
    (pkg / "pyproject.toml").write_text(PYPROJECT)
    backend = BACKEND.replace("DELAY = 0", f"DELAY = {build_delay}")
    if building_mark is not None:
        backend = backend.replace("    time.sleep(DELAY)\n", f"    open({str(building_mark)!r}, 'w').close()\n    time.sleep(DELAY)\n")
    (pkg / "tinybackend.py").write_text(backend)
    (pkg / "tinypkg" / "__init__.py").write_text("ANSWER = 42\n")
    snap = tmp_path / "code.tar.gz"
    with tarfile.open(snap, "w:gz") as tar:
        tar.add(pkg, arcname="tinypkg")
    return snap


def test_local_package_built_into_cached_venv_and_reused(tmp_path, report_server):
    snap = snapshot_with_tinypkg(tmp_path)
    cache = tmp_path / "venvs"
    env = {"pip": ["./tinypkg"]}
    first, second = tmp_path / "a1", tmp_path / "a2"
    for attempt in (first, second):
        make_config(attempt, report_server.url, ["python", "-c", CHECK], snapshot=str(snap),
                    python_env=env, venv_cache=str(cache))

    result = run_launcher(first)
    log = (first / "output.log").read_text()
    assert result["reason"] == "Succeeded", log
    [venv] = [p for p in cache.iterdir() if (p / READY).exists()]
    assert f"42 {venv} log_metrics None\n" in log
    assert "building python environment" in log
    built_at = (venv / READY).stat().st_mtime_ns

    result = run_launcher(second)
    log = (second / "output.log").read_text()
    assert result["reason"] == "Succeeded", log
    assert log == f"42 {venv} log_metrics None\n"  # no build this time
    assert (venv / READY).stat().st_mtime_ns == built_at


def test_failed_build_is_setup_failed(tmp_path, report_server):
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, ["python", "-c", "pass"],
                python_env={"pip": ["./no-such-package"]}, venv_cache=str(tmp_path / "venvs"))
    result = run_launcher(attempt)
    assert result["reason"] == "SetupFailed" and result["exit_code"] is None
    assert "python_env" in result["message"]
    assert not [p for p in (tmp_path / "venvs").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert report_server.log_bytes() == (attempt / "output.log").read_bytes()


def test_concurrent_attempts_build_the_venv_once(tmp_path, report_server):
    snap = snapshot_with_tinypkg(tmp_path)
    attempts = [tmp_path / f"a{i}" for i in range(2)]
    for attempt in attempts:
        make_config(attempt, report_server.url, ["python", "-c", CHECK], snapshot=str(snap),
                    python_env={"pip": ["./tinypkg"]}, venv_cache=str(tmp_path / "venvs"))
    procs = [start_launcher(a) for a in attempts]
    for proc in procs:
        proc.communicate(timeout=60)
    logs = [(a / "output.log").read_text() for a in attempts]
    assert all(read_result(a)["reason"] == "Succeeded" for a in attempts), logs
    assert sum("building python environment" in log for log in logs) == 1


def test_sigterm_during_the_build_cancels(tmp_path, report_server):
    building = tmp_path / "building"
    snap = snapshot_with_tinypkg(tmp_path, build_delay=30, building_mark=building)
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, ["python", "-c", "pass"], snapshot=str(snap),
                python_env={"pip": ["./tinypkg"]}, venv_cache=str(tmp_path / "venvs"))
    proc = start_launcher(attempt)
    until(lambda: building.exists(), timeout=60)  # the backend is in its 30 s build
    builders = psutil.Process(proc.pid).children(recursive=True)
    assert builders

    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=20)  # well before the build would have ended

    result = read_result(attempt)
    assert result["reason"] == "Cancelled" and result["exit_code"] is None
    assert not [p for p in builders if pid_alive(p.pid)]
    assert not [p for p in (tmp_path / "venvs").iterdir() if p.is_dir() and not p.name.startswith(".")]


@pytest.mark.slow
def test_without_uv_falls_back_to_venv_and_pip(tmp_path, monkeypatch):
    import subprocess

    from trainyard.launch import pyenv

    monkeypatch.setattr(pyenv, "find_uv", lambda: None)
    work = tmp_path / "work"
    with tarfile.open(snapshot_with_tinypkg(tmp_path)) as tar:
        tar.extractall(work, filter="data")
    log = tmp_path / "output.log"
    venv = pyenv.ensure_venv({"pip": ["./tinypkg"]}, tmp_path / "venvs", work, log, lambda: False)
    out = subprocess.run([str(venv / "bin" / "python"), "-c", CHECK], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.startswith(f"42 {venv} "), out.stderr
    assert (venv / "bin" / "pip").exists()  # built by venv + pip, not uv


def test_a_job_run_as_an_account_has_its_venv_built_as_that_account_in_a_cache_of_its_own(report_server):
    """A package's build runs its own code: as the job's account, never as the launcher's root, and without the
    server's token; and the venv that account may change is not another account's. A launcher whose Python the
    account cannot run refuses the build rather than run it as root."""
    runnable = nobody_python(PYTHON)
    root = Path(tempfile.mkdtemp(prefix="trainyard-pyenv-"))
    os.chmod(root, 0o711)  # the account passes through to its folders, as under a server's home
    try:
        snap = snapshot_with_tinypkg(root)
        tell = ('    open(os.path.join(NAME, "__init__.py"), "a").write(\n'
                '        f"BUILT_BY = {os.getuid()}\\nTOKEN = {os.environ.get(\'TRAINYARD_SERVER_TOKEN\')!r}\\n")\n')
        backend = root / "code" / "tinypkg" / "tinybackend.py"
        backend.write_text(backend.read_text().replace("    time.sleep(DELAY)\n", "    time.sleep(DELAY)\n" + tell))
        with tarfile.open(snap, "w:gz") as tar:  # the same package, its build telling who ran it
            tar.add(root / "code" / "tinypkg", arcname="tinypkg")
        # this venv's packages and trainyard's source, for a launcher started by another interpreter
        path = os.pathsep.join([str(Path(__file__).parents[2] / "src"), *[p for p in sys.path if "site-packages" in p]])
        env = {**os.environ, "TRAINYARD_SERVER_TOKEN": "the-servers-own", "PYTHONPATH": path}

        def launch(python: str, name: str) -> tuple[dict, str, Path]:
            attempt, cache = root / name, root / f"venvs-{name}"
            make_config(attempt, report_server.url,
                        ["python", "-c", "import tinypkg, sys; print(tinypkg.BUILT_BY, tinypkg.TOKEN, sys.prefix)"],
                        snapshot=str(snap), python_env={"pip": ["./tinypkg"]}, venv_cache=str(cache),
                        run_as={"uid": 65534, "gid": 65534, "name": "nobody"})
            os.chmod(attempt, 0o711)
            proc = subprocess.run([python, "-m", "trainyard.launch", str(attempt)], env=env, capture_output=True,
                                  timeout=120)
            assert proc.returncode == 0, proc.stdout
            return read_result(attempt), (attempt / "output.log").read_text(), cache

        if runnable != PYTHON:  # as here: this Python is under /root (0700), which nobody cannot pass
            result, log, cache = launch(PYTHON, "refused")
            assert result["reason"] == "SetupFailed" and "built as nobody, who cannot run this node's Python" in \
                result["message"], result
            assert not any(cache.rglob(READY)) and "BUILT_BY" not in log  # refused, not built as root

        # a folder of venvs that is not the account's own (a link it made to root's folder, or root's) is not used
        victim = root / "victim"
        victim.mkdir(mode=0o755)
        (root / "venvs-link").mkdir()
        (root / "venvs-link" / "uid-65534").symlink_to(victim, target_is_directory=True)
        (root / "venvs-roots" / "uid-65534").mkdir(parents=True)
        for top in ("venvs-link", "venvs-roots"):
            with pytest.raises(SetupError, match="is not a folder of nobody's"):
                own_cache(RunAs({"uid": 65534, "gid": 65534, "name": "nobody"}), root / top)
        assert list(victim.iterdir()) == []
        (root / "venvs-open").mkdir()
        (root / "venvs-open").chmod(0o777)  # a cache others may write in: they could plant links in it
        with pytest.raises(SetupError, match="must be a folder of root's that no one else may write in"):
            own_cache(RunAs({"uid": 65534, "gid": 65534, "name": "nobody"}), root / "venvs-open")

        result, log, cache = launch(runnable, "built")

        assert result["reason"] == "Succeeded", log
        mine = cache / "uid-65534"
        [venv] = [p for p in mine.iterdir() if (p / READY).exists()]
        assert f"65534 None {venv}\n" in log
        assert (venv.stat().st_uid, mine.stat().st_uid, oct(mine.stat().st_mode & 0o777)) == (65534, 65534, "0o700")
        # root wrote nothing in the account's folder: the marker and the helpers' .pth are the account's too
        assert {p.stat().st_uid for p in [venv / READY, *venv.glob("lib/python*/site-packages/*.pth")]} == {65534}
    finally:
        shutil.rmtree(root, ignore_errors=True)
