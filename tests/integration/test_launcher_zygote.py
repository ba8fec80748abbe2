"""Launchers forked by ``python -m trainyard.launch.zygote``: what each leaves in its attempt dir."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    PYTHON, make_config, read_result, report_server,
)
from tests.support.waiting import until


class Zygote:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([PYTHON, "-m", "trainyard.launch.zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def fork(self, attempt_dir: Path) -> int:
        self.proc.stdin.write(f"{attempt_dir}\n".encode())
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def test_a_launcher_with_nothing_to_say_makes_no_launcher_log(tmp_path, report_server):
    zygote = Zygote()
    try:
        attempt = tmp_path / "attempt"
        make_config(attempt, report_server.url, [PYTHON, "-c", "print('from the job')"])
        zygote.fork(attempt)
        until(lambda: report_server.final() is not None and (attempt / "result.json").exists(), timeout=30)
        assert read_result(attempt)["reason"] == "Succeeded"
        assert report_server.log_bytes() == b"from the job\n"
        assert not (attempt / "launcher.log").exists()
    finally:
        zygote.close()


def test_a_launcher_that_breaks_leaves_its_traceback_in_launcher_log(tmp_path, report_server):
    zygote = Zygote()
    try:
        attempt = tmp_path / "attempt"
        attempt.mkdir()
        (attempt / "launch.json").write_text(json.dumps({"job_id": "j"}))  # required fields missing
        zygote.fork(attempt)
        until(lambda: b"LaunchConfig: missing" in _read(attempt / "launcher.log"), timeout=30)
        assert b"Traceback" in _read(attempt / "launcher.log")
        # and the zygote goes on forking launchers that work
        good = tmp_path / "good"
        make_config(good, report_server.url, ["true"])
        zygote.fork(good)
        until(lambda: (good / "result.json").exists(), timeout=30)
        assert read_result(good)["reason"] == "Succeeded"
    finally:
        zygote.close()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
