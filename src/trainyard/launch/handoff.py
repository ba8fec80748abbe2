"""A launcher that runs attempt after attempt: how it leaves one, and how the engine tells.

Forking a launcher from the zygote and letting it exit cost each small job ~3–6 ms of CPU on
the 2-core bench machine (the zygote's pages copied on write as the launcher first touches
them, the process made and torn down): more than the launcher's own work. So a launcher whose
attempt changed nothing about the process itself (no image, no other account, no object
store, no thread or child left) goes back to the zygote and takes the next attempt
(:mod:`trainyard.launch.zygote`).

The engine knows a launcher by its pid and start time, which stay the same from one attempt
to the next; so a launcher leaving an attempt marks its dir (:data:`LEFT_NAME`) while it holds
an exclusive ``flock`` on the dir, and the engine holds the same lock from its check of that
mark to its SIGTERM (:func:`held`): a cancel of the attempt it left can never reach the next.
"""

from __future__ import annotations

import fcntl
import os
import signal
import threading
from contextlib import contextmanager
from typing import Iterator

LEFT_NAME = "launcher.left"  # in the attempt dir: its launcher has gone on to another attempt (or none)
USES = 200  # attempts one launcher runs before it exits: whatever memory it gathered goes with it


@contextmanager
def held(attempt_dir: str | os.PathLike) -> Iterator[bool]:
    """The attempt dir's lock, exclusive, for as long as the block runs: yields whether its
    launcher is still on it (False also when the dir is gone)."""
    try:
        fd = os.open(attempt_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a filesystem without locks: the look alone, as before launchers were kept
            pass
        yield not os.path.exists(os.path.join(attempt_dir, LEFT_NAME))
    finally:
        os.close(fd)  # and with it the lock


def leave(attempt_dir: str | os.PathLike, wake: tuple[int, int]) -> None:
    """Mark the attempt dir as left, under its lock: a SIGTERM the engine sent for it has
    been handled once this returns (a signal that arrives while ``flock`` waits is handled
    before it returns, as Python retries the call after running the handler). Then undo the
    attempt's signal handling: SIGTERM blocked until the next attempt's handler is in place,
    as at the fork (:func:`take_over`), and its self-pipe (``wake``) closed."""
    with held(attempt_dir):
        os.close(os.open(os.path.join(attempt_dir, LEFT_NAME), os.O_WRONLY | os.O_CREAT, 0o644))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    signal.set_wakeup_fd(-1)
    for fd in wake:
        os.close(fd)


def alone() -> bool:
    """Whether the process is back to what the zygote forked: one thread and no child."""
    if threading.active_count() != 1:
        return False
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # no child at all, living or dead
        return True
    return False


def take_over() -> None:
    """Before a kept launcher's next attempt: a SIGTERM that came while it was idle was meant for
    no attempt of it (the engine signals only the launcher of an attempt not left), so it is
    dropped rather than taken as a cancel of this one."""
    if signal.SIGTERM in signal.sigpending():
        signal.sigwait({signal.SIGTERM})
