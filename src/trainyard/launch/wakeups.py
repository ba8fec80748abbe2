"""What wakes the launcher's main thread, and how it sleeps between: SIGTERM, the server's cancel, the
command's exit, and threads whose start is due.

The main thread sleeps in ``select`` on the command's pidfd (readable once it exits; where the kernel has
none, a waiter thread pokes instead) and on a self-pipe that the signal machinery pokes on SIGTERM
(``signal.set_wakeup_fd``) and the reporter when the server asks to cancel. So every event is handled at
once, and no tick is on the fast path. Threads that have nothing to do yet (the sampler's, the reporter's)
are started from those waits once due, not at the spawn.

A part of :class:`trainyard.launch.launcher.Launcher` (its base), kept apart so that the launcher's own
file is about running and watching the command.
"""

from __future__ import annotations

import os
import select
import signal
import time
from typing import Callable

from trainyard.launch import reasons

TERM = "the launcher got SIGTERM"  # why it stopped, when the signal was all it was told


class Wakeups:
    def __init__(self) -> None:
        self.cancelled: str | None = None  # why, once a cancel was asked
        self.orphaned = False  # the SIGTERM came from its starter's death (PR_SET_PDEATHSIG), not a cancel
        self._starter: int | None = None  # the pid whose death that SIGTERM means, when the engine named one
        self._starter_thread: int | None = None  # ... and its thread that started this launcher, where named
        self._due: list[tuple[float, Callable[[], object]]] = []  # (monotonic time, what to start); _when_due
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def _install_signals(self) -> None:
        def on_term(signum, frame):
            self.cancelled = self.cancelled or TERM

        signal.signal(signal.SIGTERM, on_term)
        # SIGINT/SIGHUP meant for the engine's process group must not kill us.
        # A no-op handler, not SIG_IGN: ignored signals would be inherited by the command.
        for sig in (signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda signum, frame: None)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        # engines start launchers with SIGTERM blocked: a cancel sent before this point waited
        # for the handler instead of killing the launcher before it could write a result
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})

    def _stop_reason(self) -> str:
        """Cancelled, unless the SIGTERM was its starter's death: then it was lost.

        Decided once the command is stopped, not in the signal handler: the death signal
        comes when the starter's *thread* exits, which may be before its process is gone
        (and the launcher reparented) when a whole process is killed. That thread's end is
        the surer sign: a Ray worker that ends takes its time, and a command that stops at
        once was seen stopped while the worker was still there (a Ray node's raylet killed).
        """
        if self.cancelled == TERM and self._starter is not None and (
                os.getppid() != self._starter or (self._starter_thread is not None and not os.path.exists(
                    f"/proc/{self._starter}/task/{self._starter_thread}"))):
            self.orphaned = True
            self.cancelled = "the process that started the launcher died"
        return reasons.LOST if self.orphaned else reasons.CANCELLED

    def _when_due(self, delay: float, start: Callable[[], object]) -> None:
        """Call ``start`` in ``delay`` seconds, from the main loop's waits: a thread that has nothing
        to do before then is not started for a command that is over by then."""
        self._due.append((time.monotonic() + delay, start))

    def _cancel_from_server(self, why: str = "the server asked to cancel") -> None:
        if self.cancelled is None:
            self.cancelled = why
        try:
            os.write(self._wake_w, b"c")
        except OSError:
            pass

    def _sleep(self, seconds: float, fds: list[int] | tuple = ()) -> None:
        """Wait up to ``seconds``, returning early on any event (or one of ``fds`` readable);
        first start what is due (:meth:`_when_due`), and wake for the next one."""
        now = time.monotonic()
        for item in [d for d in self._due if d[0] <= now]:
            self._due.remove(item)
            item[1]()
        if self._due:
            seconds = min(seconds, min(when for when, _ in self._due) - now)
        ready, _, _ = select.select([self._wake_r, *fds], [], [], max(0.0, seconds))
        if self._wake_r in ready:
            try:
                while os.read(self._wake_r, 512):
                    pass
            except BlockingIOError:
                pass
