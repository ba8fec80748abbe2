"""The shape shared by the leader's background loops (services, Dask clusters, pipelines).

A loop runs :meth:`Ticker.cycle` on its own thread, then sleeps until woken or
until :meth:`Ticker.pause` seconds pass. It starts when this server gains the
lease and stops when it loses it, so it can start again later; one bad cycle
is logged and never ends the loop.
"""

from __future__ import annotations

import logging
import threading

from trainyard.services.notify import Notifier


class Ticker:
    name = "trainyard-loop"
    log = logging.getLogger("trainyard")

    def __init__(self, notifier: Notifier | None = None) -> None:
        self.notifier = notifier
        self._event = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listening = False

    def cycle(self) -> None:
        raise NotImplementedError

    def pause(self) -> float:
        """Seconds to sleep after a cycle unless woken."""
        raise NotImplementedError

    def on_notify(self, key: str) -> bool:
        """Whether the news about ``key`` concerns this loop; runs in the notifier's thread, so stays cheap."""
        return False

    def wake(self) -> None:
        self._event.set()

    def start(self) -> None:
        if self.notifier is not None and not self._listening:
            self.notifier.listen(self._heard)
            self._listening = True
        self._stop.clear()  # a server that regains the lease starts its loop again
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._event.set()
        if self._thread:
            self._thread.join(timeout=10)

    def _heard(self, key: str) -> None:
        if self.on_notify(key):
            self._event.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._event.clear()  # before the cycle: a wake during it is not lost
            try:
                self.cycle()
            except Exception:  # the loop must outlive any one bad cycle
                self.log.exception("%s: cycle failed", self.name)
            self._event.wait(self.pause())
