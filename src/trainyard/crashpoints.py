"""Crash points: the places where a test kills the server mid-work, to prove that a restart converges.

With ``TRAINYARD_TEST_CRASH_AT=NAME`` in its environment, the server sends itself SIGKILL when it reaches
the point ``NAME``: no clean-up, no flush, no lease given back, as a crash or the OOM killer would. The
points sit between two writes that a crash could once part (``tests/e2e/test_crash_windows.py``); a
test restarts the server without the variable and checks that nothing ran twice or was left untracked.
Unset (always, outside tests) a point costs one lookup in the environment.
"""

from __future__ import annotations

import os
import signal

from trainyard.envvars import TEST_CRASH_AT


def crash_point(name: str) -> None:
    """Die here, at once, if the environment names this point."""
    if os.environ.get(TEST_CRASH_AT) == name:
        os.kill(os.getpid(), signal.SIGKILL)
