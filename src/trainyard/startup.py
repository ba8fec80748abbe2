"""SIGTERM and SIGINT while `trainyard server` starts, before uvicorn answers them itself.

Python's defaults would end a start-up without a word: SIGTERM kills the process outright (a service manager
sees 143 and an empty log), SIGINT raises KeyboardInterrupt wherever start-up is. From :func:`guard` on, the
first of them raises :class:`StoppedStarting` in the main thread instead, so that what start-up began is undone
on the way out (nginx stopped, the home let go) and :func:`stopped` says so in one line. uvicorn then takes both
signals over (:func:`handed_over`), and once it has shut down raises the one it stopped on again, into
:func:`_handler`: a SIGTERM exits 0 there, a clean stop that a service manager or `trainyard server stop` asked
for, rather than a death by the signal.

Stdlib only: the CLI installs the guard before it has imported anything of its own.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import NoReturn

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
SIGNALS = (signal.SIGTERM, signal.SIGINT)

# "off": not guarded; "starting": a signal stops the start-up; "stopping": it is being stopped (a second signal
# waits for that); "serving": uvicorn answered the signal and has shut down (it raises it here again)
_phase = "off"


class StoppedStarting(BaseException):
    """A SIGTERM or SIGINT arrived while the server was starting. A BaseException, as KeyboardInterrupt is: no
    ``except Exception`` on the way out may take it for a failure of what it interrupted."""

    def __init__(self, sig: int) -> None:
        super().__init__(signal.Signals(sig).name)
        self.sig = sig


def log_to_stderr() -> None:
    """The server's log: INFO and up on stderr (a service manager's journal), as the server writes it."""
    import logging  # here: every CLI command imports this module, and most never log

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)


def guard() -> None:
    """From now on, until uvicorn takes the signals over, SIGTERM and SIGINT stop the start-up (a no-op once
    guarded: the CLI guards first, :func:`trainyard.server.serve` again for callers that are not the CLI)."""
    global _phase
    if _phase == "off":
        _phase = "starting"
        for sig in SIGNALS:
            signal.signal(sig, _handler)


def unguard() -> None:
    """Python's own handling again: for `trainyard server stop` and `status`, which start no server."""
    global _phase
    if _phase != "off":  # only what guard() changed: a test's CliRunner runs `server stop` in pytest's own process
        _phase = "off"
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)


def handed_over() -> None:
    """uvicorn's handlers are installed: it stops the server itself, then raises the signal here again."""
    global _phase
    _phase = "serving"


def stopped(e: StoppedStarting) -> NoReturn:
    """Say that start-up was stopped, and exit as a running server would have: 0 on SIGTERM, 130 on SIGINT."""
    import logging

    log_to_stderr()
    logging.getLogger("trainyard.server").info("got %s during start-up: stopped before serving; nothing was "
                                               "scheduled", signal.Signals(e.sig).name)
    sys.exit(0 if e.sig == signal.SIGTERM else 130)


def _handler(sig: int, frame: FrameType | None) -> None:
    global _phase
    if _phase == "serving":
        if sig == signal.SIGTERM:
            sys.exit(0)
        raise KeyboardInterrupt
    if _phase == "starting":
        _phase = "stopping"
        raise StoppedStarting(sig)
    # "stopping": the first signal's undoing is under way; breaking into it would leave nginx running
