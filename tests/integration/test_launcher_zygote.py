"""Launchers forked by ``python -m trainyard.launch.zygote``: what each leaves in its attempt dir."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import psutil

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    PYTHON, make_config, read_result, report_server,
)
from tests.support.waiting import until
from trainyard.launch.handle import HANDLE_NAME
from trainyard.launch.handoff import LEFT_NAME


class Zygote:
    def __init__(self, stderr: object = subprocess.DEVNULL) -> None:
        self.proc = subprocess.Popen([PYTHON, "-m", "trainyard.launch.zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=stderr)

    def fork(self, attempt_dir: Path) -> int:
        """The launcher's pid; its handle, written by the zygote, names it and its start time as psutil reads it."""
        self.proc.stdin.write(f"{attempt_dir}\n".encode())
        self.proc.stdin.flush()
        pid, started = self.proc.stdout.readline().split()
        handle = json.loads((attempt_dir / HANDLE_NAME).read_text())
        assert handle == {"pid": int(pid), "create_time": float(started), "dir": str(attempt_dir)}
        try:
            assert psutil.Process(int(pid)).create_time() == float(started)
        except psutil.NoSuchProcess:  # a launcher whose attempt broke at once
            pass
        return int(pid)

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


def test_until_its_first_line_a_launchers_stderr_is_the_zygotes_not_lost(tmp_path, report_server):
    import os

    # given a zygote whose stderr is a file, as the local engine's is (zygote.log in the home)
    with open(tmp_path / "zygote.log", "ab") as log:
        zygote = Zygote(stderr=log)
    try:
        attempt = tmp_path / "attempt"
        marker = tmp_path / "started"
        make_config(attempt, report_server.url, [PYTHON, "-c", f"open({str(marker)!r}, 'w'); import time; time.sleep(30)"])
        pid = zygote.fork(attempt)
        until(marker.exists, timeout=30)
        # then a launcher that wrote no line yet writes what the interpreter says there (a fatal error),
        # and its stdout and stdin are not the zygote's pipes
        assert os.readlink(f"/proc/{pid}/fd/2") == str(tmp_path / "zygote.log")
        assert os.readlink(f"/proc/{pid}/fd/1") == os.devnull and os.readlink(f"/proc/{pid}/fd/0") == os.devnull
        assert not (attempt / "launcher.log").exists()
        os.kill(pid, 15)
        until(lambda: (attempt / "result.json").exists(), timeout=30)
    finally:
        zygote.close()


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def test_a_launcher_forked_ahead_takes_the_next_attempt_and_goes_when_the_zygote_does(tmp_path, report_server):
    import psutil

    zygote = Zygote()
    try:
        # given a launcher that could not be kept for another attempt (its attempt set an object
        # store's options in its process)
        first = tmp_path / "first"
        make_config(first, report_server.url, ["true"], storage={"s3": {"endpoint_url": "http://127.0.0.1:9"}})
        done = zygote.fork(first)
        until(lambda: (first / "result.json").exists() and done not in _waiting(zygote), timeout=30)
        assert not (first / LEFT_NAME).exists()
        # given a quiet moment: a launcher waits, forked ahead for the next attempt
        [ahead] = _one_waiting(zygote)
        # when the next attempt comes, it is that launcher that runs it
        second = tmp_path / "second"
        make_config(second, report_server.url, [PYTHON, "-c", "print('second')"])
        assert zygote.fork(second) == ahead
        until(lambda: (second / LEFT_NAME).exists(), timeout=30)
        assert read_result(second)["reason"] == "Succeeded" and b"second\n" in (second / "output.log").read_bytes()
        # and, kept for the next, it ends with the zygote (EOF on its pipe), not running a thing
        assert _one_waiting(zygote) == [ahead]
        zygote.close()
        until(lambda: not psutil.pid_exists(ahead) or psutil.Process(ahead).status() == psutil.STATUS_ZOMBIE,
              timeout=30)
    finally:
        if zygote.proc.poll() is None:
            zygote.close()


def test_a_launcher_done_with_its_attempt_runs_the_next_one_as_a_fresh_launcher_would(tmp_path, report_server):
    zygote = Zygote()
    try:
        # given a launcher whose attempt (which printed a line of its own to launcher.log) is over
        first = tmp_path / "first"
        make_config(first, report_server.url, [PYTHON, "-c", "import os; print(os.getpid())"])
        pid = zygote.fork(first)
        until(lambda: (first / LEFT_NAME).exists(), timeout=30)
        assert _one_waiting(zygote) == [pid]  # kept: nothing was forked ahead
        # when the next attempt comes, with an environment and a timeout of its own
        second = tmp_path / "second"
        make_config(second, report_server.url, [PYTHON, "-c", "import os, time; print(os.environ['ONLY_HERE']); "
                                                "time.sleep(30)"], env={"ONLY_HERE": "second"}, timeout=1.0)
        assert zygote.fork(second) == pid
        until(lambda: (second / LEFT_NAME).exists(), timeout=30)
        # then it is run by the same process, with its own settings and nothing of the first
        result = read_result(second)
        assert result["reason"] == "Timeout", result
        assert (second / "output.log").read_text().startswith("second\n")
        assert read_result(first)["reason"] == "Succeeded"
        # and its SIGTERM handling is back: a third attempt can be cancelled
        third = tmp_path / "third"
        make_config(third, report_server.url, [PYTHON, "-c", "import time; time.sleep(30)"])
        assert zygote.fork(third) == pid
        until(lambda: (third / "output.log").exists(), timeout=30)
        import os
        import signal

        time.sleep(0.3)
        os.kill(pid, signal.SIGTERM)
        until(lambda: (third / "result.json").exists(), timeout=30)
        assert read_result(third)["reason"] == "Cancelled"
    finally:
        zygote.close()


def _free_after_one(zygote: Zygote, attempt: Path, url: str) -> int:
    """The pid of a launcher that ran one attempt (``true``) and waits, kept, for the next."""
    make_config(attempt, url, ["true"])
    pid = zygote.fork(attempt)
    until(lambda: (attempt / LEFT_NAME).exists(), timeout=30)
    assert _one_waiting(zygote) == [pid]
    return pid


def _one_waiting(zygote: Zygote) -> list[int]:
    """The one launcher waiting, once the same one is seen twice a moment apart: the zygote's warm-up
    spawns commands, each of which has its command line for the moment before its exec."""
    seen: list[list[int]] = []

    def steady() -> bool:
        seen.append(_waiting(zygote))
        if len(seen[-1]) != 1:
            return False
        time.sleep(0.2)
        return _waiting(zygote) == seen[-1]

    until(steady, timeout=30)
    return seen[-1]


def _waiting(zygote: Zygote) -> list[int]:
    """The zygote's launchers still alive (those done are reaped at once): forked, they keep its command
    line (its warm-up's own ``true`` commands do not)."""
    import psutil

    out = []
    for child in psutil.Process(zygote.proc.pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "trainyard.launch.zygote" in child.cmdline():
                out.append(child.pid)
        except psutil.Error:
            pass
    return out


def test_a_sigterm_to_a_free_launcher_is_not_taken_as_a_cancel_of_its_next_attempt(tmp_path, report_server):
    import os
    import signal

    zygote = Zygote()
    try:
        pid = _free_after_one(zygote, tmp_path / "first", report_server.url)
        # given a SIGTERM to the launcher while it is free (a cancel that came too late, a stray kill)
        os.kill(pid, signal.SIGTERM)
        time.sleep(0.3)
        # then it is still there, and its next attempt runs to its own end
        second = tmp_path / "second"
        make_config(second, report_server.url, [PYTHON, "-c", "import time; time.sleep(0.5)"])
        assert zygote.fork(second) == pid
        until(lambda: (second / LEFT_NAME).exists(), timeout=30)
        assert read_result(second)["reason"] == "Succeeded"
    finally:
        zygote.close()


def test_when_the_free_launcher_is_gone_the_next_attempt_gets_a_new_one(tmp_path, report_server):
    import os
    import signal

    import psutil

    zygote = Zygote()
    try:
        pid = _free_after_one(zygote, tmp_path / "first", report_server.url)
        os.kill(pid, signal.SIGKILL)
        def gone() -> bool:  # reaped (the zygote's SIGCHLD handler may do it between two looks) or a zombie
            try:
                return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                return True

        until(gone, timeout=30)
        second = tmp_path / "second"
        make_config(second, report_server.url, [PYTHON, "-c", "print('second')"])
        other = zygote.fork(second)
        assert other != pid
        until(lambda: (second / "result.json").exists(), timeout=30)
        assert read_result(second)["reason"] == "Succeeded"
    finally:
        zygote.close()
