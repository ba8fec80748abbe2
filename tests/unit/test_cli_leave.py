"""`ls`, `show`, `logs`, `--help` and `--version` exit without the interpreter's teardown (trainyard.cli.entry.leave):
what the teardown does that a user sees must still happen, as it did with sys.exit."""

import subprocess
import sys

import pytest

SETUP = ("import atexit, os, sys, threading, time\nfrom trainyard.cli.entry import leave\n"
         "atexit.register(lambda: print('atexit ran', file=sys.stderr))\n")


def ended(body: str, how: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SETUP + body + how], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("body, code", [
    ("sys.stdout.write('buffered, never flushed')\n", 0),
    ("sys.stdout.write('no newline')\nsys.stderr.write('error: x')\n", 1),
    ("sys.stdout.write('usage')\n", 2),
    # a thread still running is waited for: the usual exit, which waits
    ("threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n", 0),
    # stdout gone: the flush fails, and the usual exit says so with its own status
    ("sys.stdout.write('lost')\nos.close(1)\n", 0),
])
def test_leaving_prints_runs_atexit_and_exits_as_sys_exit_does(body, code):
    fast, usual = ended(body, f"leave({code})"), ended(body, f"sys.exit({code})")
    assert (fast.returncode, fast.stdout, fast.stderr) == (usual.returncode, usual.stdout, usual.stderr)
    assert "atexit ran" in fast.stderr

