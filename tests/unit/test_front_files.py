"""What the front needs on this machine, as `trainyard doctor` says it, and where its sockets go when a home's path
is too long for them (front/nginx.py ``run_folder``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.unit.test_front_nginx_conf import nginx
from trainyard.cli.doctor import _front
from trainyard.front.nginx import run_folder


def test_doctor_finds_nginx_and_its_lua_module():
    binary, modules = nginx()
    found = _front()
    assert found.level == "ok" and binary in found.found and modules in found.found


def test_doctor_warns_of_an_nginx_without_its_lua_module_and_says_how_to_get_it(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    fake = tmp_path / "bin" / "nginx"  # an nginx built without the module (what `nginx -V` prints, to stderr)
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho 'configure arguments: --modules-path={tmp_path / 'empty'}' >&2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    found = _front()
    assert found.level == "warning" and f"{fake} has no Lua module in {tmp_path / 'empty'}" in found.found
    assert "apt-get install nginx-light libnginx-mod-http-lua" in found.found


def test_a_short_home_keeps_the_sockets_in_its_own_folder(tmp_path):
    assert run_folder(tmp_path / "front" / "8080") == tmp_path / "front" / "8080"


def test_a_long_home_gets_a_folder_of_this_process_and_those_of_servers_gone_are_removed(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    tmp = Path(tempfile.gettempdir())
    stale = Path(tempfile.mkdtemp(prefix=f"ty-front-{gone.pid}-"))
    (stale / "api.sock").write_text("")
    alive = Path(tempfile.mkdtemp(prefix=f"ty-front-{os.getppid()}-"))  # a server still running keeps its own
    try:
        folder = run_folder(tmp_path / ("x" * 120) / "front" / "8080")
        assert folder.parent == tmp and folder.name.startswith(f"ty-front-{os.getpid()}-")
        assert oct(folder.stat().st_mode & 0o777) == oct(0o700)
        assert not stale.exists() and alive.exists()
        folder.rmdir()
    finally:
        for made in (stale, alive):
            subprocess.run(["rm", "-rf", str(made)], check=True)
