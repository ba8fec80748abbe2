"""The next attempt's folders, made ahead by the local engine, off the path from an attempt's row to its launcher.

Making ``attempts/<id>/r0`` and its files cost ~0.2-0.4 ms of CPU at each launch; renaming a folder made
after the last launch costs ~20 µs. The folders wait under :data:`AHEAD` in the home, so that ``attempts/``
holds attempts only, each with the files the engine and the launcher would make, empty and with the mode
they would be made with: ``launch.json`` (0600, it holds the attempt's credential), which
:meth:`trainyard.launch.config.LaunchConfig.write` fills in place, and ``launcher.json.tmp``, which the
handle's writer truncates: no new inode on the path either.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from trainyard.launch.config import CONFIG_NAME
from trainyard.launch.handle import HANDLE_NAME

AHEAD = ".attempts-ahead"  # in the home: an attempt's folders made ahead (attempts/ holds attempts only)
# empty, in its r0, each with the mode it would be made with (launch.json holds the attempt's credential)
AHEAD_FILES = {CONFIG_NAME: 0o600, HANDLE_NAME + ".tmp": 0o666}


class AheadFolders:
    """At most one attempt's folders made ahead in ``home``: :meth:`make` after a launch, :meth:`take`
    at the next. Thread-safe: launches may come from other threads than the scheduler's."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self._ready: Path | None = None  # <AHEAD>/…/r0 made after the last launch
        self._lock = threading.Lock()
        self._closed = False

    def take(self, workdir: Path) -> bool:
        """``workdir`` (``attempts/<id>/r0``) as the folders made ahead, renamed into place; False when the
        caller makes them the slow way."""
        with self._lock:
            ready, self._ready = self._ready, None
        if ready is None:
            return False
        try:
            os.rename(ready, workdir.parent)  # refused if the attempt's folder is there and holds anything
        except FileNotFoundError:  # gone: the next launch makes another
            return False
        except OSError:  # in the way of this attempt only: kept for the next
            self._keep(ready)
            return False
        return workdir.is_dir()  # else made the slow way (a hand outside this engine emptied it)

    def make(self) -> None:
        """The next attempt's ``attempts/<id>/r0``, under a name of its own, as the engine makes them."""
        if self._ready is not None or self._closed:
            return
        ready = self.home / AHEAD / os.urandom(8).hex()
        try:
            (self.home / "attempts").mkdir(exist_ok=True)  # where it goes: on this filesystem
            ready.mkdir(parents=True)
            (ready / "r0").mkdir(mode=0o700)
            (ready / "r0").chmod(0o700)
            for name, mode in AHEAD_FILES.items():
                os.close(os.open(ready / "r0" / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
        except OSError:  # the next attempt makes its own
            return
        self._keep(ready)

    def close(self) -> None:
        """Remove what was made ahead, and make no more."""
        self._closed = True
        with self._lock:
            ready, self._ready = self._ready, None
        if ready is not None:
            self._drop(ready)

    def _keep(self, ready: Path) -> None:
        with self._lock:
            if self._ready is None:
                self._ready = ready
                return
        self._drop(ready)  # another thread's came first

    @staticmethod
    def _drop(ready: Path) -> None:
        try:
            for name in AHEAD_FILES:
                (ready / "r0" / name).unlink(missing_ok=True)
            (ready / "r0").rmdir()
            ready.rmdir()
        except OSError:
            pass
