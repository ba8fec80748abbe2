"""A launcher's handle, read from /proc as psutil reads it: the engine tells a live launcher from a gone one
(or from another process given its pid since) without psutil."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from tests.support.waiting import until
from trainyard.launch import handle

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_handle_names_the_start_time_psutil_reads_and_is_running_until_its_process_is_a_zombie(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        started = handle.start_time(proc.pid)
        assert started == psutil.Process(proc.pid).create_time()
        written = handle.write(str(tmp_path), proc.pid, started)
        assert (tmp_path / handle.HANDLE_NAME).read_text() == (
            f'{{"pid": {proc.pid}, "create_time": {started!r}, "dir": "{tmp_path}"}}')
        btime = handle.boot_time()
        assert handle.running(written, btime)
        # the same pid with another start time is another process (pids get reused)
        assert not handle.running({**written, "create_time": started - 1}, btime)
        proc.stdin.close()  # it exits; not reaped yet, it is a zombie
        until(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE, timeout=10)
        assert not handle.running(written, btime)
    finally:
        proc.wait(10)
    assert not handle.running(written, btime) and handle.start_time(proc.pid) is None  # reaped: gone
