"""What the server asks of a running replica (``trainyard stack``, ``trainyard exec``), done off the reporter's thread.

The requests come in the answers to the replica's reports (:mod:`trainyard.launch.reporter`); each is taken once,
by its ``(kind, id)``, however many answers repeat it. One thread does them one at a time, so that no stack dump
reads another's py-spy, and is started only when one comes; the answers go back with the next reports, which
the thread is woken to send.
"""

from __future__ import annotations

import threading
from typing import Callable


class Asks:
    """The requests of one replica not yet answered, and their answers until a report carries them. ``masks``:
    the job's secret values (launch.secrets), masked in what goes back; ``poke``: wakes the reporter's thread."""

    def __init__(self, masks, poke: Callable[[], None]) -> None:  # noqa: ANN001
        self.masks = masks
        self.poke = poke
        self.exec_in = None  # a launch.execs.Where once the command runs: how `trainyard exec` runs beside it
        self._seen: set[tuple[str, int]] = set()  # (kind, id) of requests already taken
        self.answers: dict[str, list[dict]] = {"stacks": [], "execs": []}  # for the next reports
        self._queued: list[tuple[str, dict]] = []  # (kind, request)
        self._busy = False
        self._lock = threading.Lock()

    def take(self, asked: dict) -> None:
        """Queue the requests (``{"stacks": [...], "execs": [...]}`` of a report's answer) not taken before, for
        the thread that does them one at a time (so no dump reads another's py-spy); answers go with the next
        reports."""
        new = [(kind, a) for kind in ("stacks", "execs") for a in asked.get(kind) or ()
               if isinstance(a, dict) and isinstance(a.get("id"), int) and (kind, a["id"]) not in self._seen]
        if not new:
            return
        self._seen.update((kind, a["id"]) for kind, a in new)
        with self._lock:
            self._queued.extend(new)
            if self._busy:
                return  # the running thread takes these next
            self._busy = True
        threading.Thread(target=self._thread, name="trainyard-asks", daemon=True).start()

    def _thread(self) -> None:
        from trainyard.launch import execs, stacks

        while True:
            with self._lock:
                queued, self._queued = self._queued, []
                if not queued:
                    self._busy = False
                    return
            dumps = [a for kind, a in queued if kind == "stacks"]
            for flags in dict.fromkeys((bool(a.get("locals")), bool(a.get("native"))) for a in dumps):
                result = _guarded(lambda: stacks.dump(self.masks, *flags))
                self.answers["stacks"].extend({"id": a["id"], "text": "", **result} for a in dumps
                                              if (bool(a.get("locals")), bool(a.get("native"))) == flags)
                self.poke()
            for a in (a for kind, a in queued if kind == "execs"):
                argv, timeout = [str(x) for x in a.get("argv") or ()], float(a.get("timeout") or 30.0)
                result = _guarded(lambda: execs.run(argv, timeout, self.exec_in, self.masks)) if argv else \
                    {"error": "no command"}
                self.answers["execs"].append({"id": a["id"], "exit_code": None, "output": "", **result})
                self.poke()


def _guarded(do) -> dict:  # noqa: ANN001
    try:
        return do()
    except Exception as e:  # a bug here must not leave the request unanswered
        return {"error": f"the launcher could not: {type(e).__name__}: {e}"[:1900]}
