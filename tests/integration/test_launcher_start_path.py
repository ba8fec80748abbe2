"""What the launcher does around a short command's start and end: its overlay venv taken from
spares, threads started only when due, the command's exit seen through a pidfd, and its marks."""

from __future__ import annotations

import json
import os
import select
import subprocess

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    PYTHON, make_config, report_server, run_launcher,
)
from trainyard.launch import procs
from trainyard.launch.scratchenv import spare_pool

PREFIX = ["python", "-c", "import sys; print('prefix', sys.prefix)"]  # `python` from the PATH: the overlay's


def spares(cache) -> set[str]:
    return {n for n in os.listdir(spare_pool(cache)) if not n.startswith(".")}


def inodes(cache) -> set[int]:
    return {os.stat(spare_pool(cache) / n).st_ino for n in spares(cache)}


def test_an_unchanged_overlay_goes_back_to_the_spares_and_a_changed_one_never_does(tmp_path, report_server):
    cache = tmp_path / "venvs"
    first = tmp_path / "a1"
    make_config(first, report_server.url, PREFIX, venv="overlay", venv_cache=str(cache))
    assert run_launcher(first)["reason"] == "Succeeded"
    assert f"prefix {first / 'venv'}" in (first / "output.log").read_text()  # no spare yet: built in place
    assert not (first / "venv").exists() and len(spares(cache)) == 1  # untouched: put back, none built
    ready = inodes(cache)

    second = tmp_path / "a2"
    make_config(second, report_server.url, PREFIX, venv="overlay", venv_cache=str(cache))
    assert run_launcher(second)["reason"] == "Succeeded"
    assert f"prefix {second / 'venv'}" in (second / "output.log").read_text()
    assert inodes(cache) == ready  # the same overlay taken and put back

    third = tmp_path / "a3"  # a job that leaves something in its overlay: the next job must not see it
    write = ["python", "-c", "import os, sys; open(os.path.join(sys.prefix, 'bin', 'left'), 'w').write('x')"]
    make_config(third, report_server.url, write, venv="overlay", venv_cache=str(cache))
    assert run_launcher(third)["reason"] == "Succeeded"
    assert (third / "venv" / "bin" / "left").exists()  # kept with its attempt
    after = inodes(cache)
    assert len(after) == 1 and not after & ready  # the changed one kept out; another built in its place
    pip = subprocess.run([str(third / "venv" / "bin" / "pip"), "--version"], capture_output=True, text=True)
    assert pip.returncode == 0 and pip.stdout.startswith("pip ")  # the shim works from where it was moved


def test_a_relaunchs_overlay_is_never_put_back(tmp_path, report_server):
    from trainyard.launch.scratchenv import make

    cache, attempt = tmp_path / "venvs", tmp_path / "a1"
    make_config(attempt, report_server.url, PREFIX, venv="overlay", venv_cache=str(cache))
    venv = make("overlay", attempt / "venv", tmp_path, tmp_path / "log", lambda: False)  # the launch before
    (venv / "bin" / "left").write_text("x")  # what that launch's job installed
    assert run_launcher(attempt)["reason"] == "Succeeded"
    assert f"prefix {venv}" in (attempt / "output.log").read_text()  # the relaunch runs in it
    assert (venv / "bin" / "left").exists()  # kept with its attempt
    assert not any((spare_pool(cache) / n / "bin" / "left").exists() for n in spares(cache))


def test_a_command_longer_than_the_first_sample_is_sampled(tmp_path, report_server):
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, [PYTHON, "-c", "import time; time.sleep(1.2)"], sample_every=0.2)
    assert run_launcher(attempt)["reason"] == "Succeeded"
    names = {name for line in report_server.metric_lines() for name in json.loads(line)["values"]}
    assert {"system/cpu_percent", "system/memory_bytes"} <= names


def test_marks_are_written_only_when_asked(tmp_path, report_server, monkeypatch):
    quiet = tmp_path / "quiet"
    make_config(quiet, report_server.url, [PYTHON, "-c", "pass"])
    run_launcher(quiet)
    assert not (quiet / "marks.json").exists()

    monkeypatch.setenv("TRAINYARD_LAUNCH_MARKS", "1")
    marked = tmp_path / "marked"
    make_config(marked, report_server.url, [PYTHON, "-c", "pass"])
    run_launcher(marked)
    rows = json.loads((marked / "marks.json").read_text())
    names = [r["name"] for r in sorted(rows, key=lambda r: r["mono_ns"])]
    assert names.index("work dir") < names.index("spawned (exec done)") < names.index("exit report acknowledged")
    assert all(r["cpu_ns"] >= 0 and r["wall_ns"] > 0 for r in rows)


def test_the_commands_exit_wakes_a_select_on_its_pidfd(tmp_path):
    proc = subprocess.Popen([PYTHON, "-c", "import time; time.sleep(0.2)"])
    wake_r, wake_w = os.pipe()
    watch = procs.watch(proc, wake_w)
    assert isinstance(watch, procs.ExitFd) and not watch.exited
    ready, _, _ = select.select([wake_r, *watch.fds()], [], [], 10)
    assert ready == watch.fds()  # the exit itself, no thread poking the pipe
    assert watch.exited and watch.fds() == []  # reaped: nothing left to select on
    watch.join()
    assert proc.returncode == 0


def test_without_pidfds_a_thread_pokes_the_wake_pipe(tmp_path, monkeypatch):
    def refused(pid, flags=0):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", refused)
    proc = subprocess.Popen([PYTHON, "-c", "pass"])
    wake_r, wake_w = os.pipe()
    watch = procs.watch(proc, wake_w)
    assert isinstance(watch, procs.Waiter) and watch.fds() == []
    ready, _, _ = select.select([wake_r], [], [], 10)
    assert ready == [wake_r]
    watch.join()
    assert watch.exited and proc.returncode == 0
