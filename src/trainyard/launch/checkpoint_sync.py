"""The launcher's side of checkpoint sync: a socket the job calls, and a thread that uploads.

``trainyard.checkpoint_saved()`` in the job connects to ``TRAINYARD_CHECKPOINT_SOCKET``
and sends one line, ``saved`` or ``wait``. The set is captured (hard links, see
:mod:`trainyard.launch.checkpoints`) before the answer, so the job may go on
writing at once; with ``wait`` the answer comes once the set's manifest has
landed. Only the newest captured set is uploaded: one captured while another is
going up replaces any that waited. The launcher syncs once more when the
command has ended (on its own, or after SIGTERM and the grace period).

The socket lives in a private folder under the system's temporary folder (a
Unix socket path must be short), handed to the job's account when it runs as one.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path

from trainyard.launch.checkpoints import CheckpointError, Store, capture, describe

SOCKET_NAME = "checkpoint.sock"


class CheckpointSync:
    def __init__(self, folder: Path, store: Store, attempt: int, stage_root: Path, restored: dict | None) -> None:
        self.folder = folder
        self.store = store
        self.attempt = attempt
        self.stage_root = stage_root
        self._last = restored           # the manifest that is in the store now (as far as this launcher knows)
        self._lock = threading.Condition()
        self._captures = 0              # sets captured so far; a set's number is its place in that count
        self._uploaded = 0              # number of the newest set whose manifest has landed (or was unchanged)
        self._pending: tuple[int, Path, list[str]] | None = None
        self._failed: tuple[int, str] | None = None  # the newest set that failed to go up, and why
        self._closed = False
        self._sockdir: Path | None = None
        self._server: socket.socket | None = None
        threading.Thread(target=self._upload_loop, name="checkpoint-upload", daemon=True).start()

    # -- the job's requests -------------------------------------------------------

    def listen(self, owner: tuple[int, int] | None = None) -> str:
        """Start serving the socket; its path, for ``TRAINYARD_CHECKPOINT_SOCKET``."""
        self._sockdir = Path(tempfile.mkdtemp(prefix="trainyard-ck-"))
        path = self._sockdir / SOCKET_NAME
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(8)
        if owner is not None:  # the job runs as another account: it must reach the socket, no one else
            os.chown(self._sockdir, *owner)
            os.chown(path, *owner)
        self._server = server
        threading.Thread(target=self._serve, name="checkpoint-socket", daemon=True).start()
        return str(path)

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                line = conn.makefile("rb").readline(64).strip()
                if line not in (b"saved", b"wait"):
                    conn.sendall(b"error: unknown request\n")
                    return
                problem = self.sync(wait=line == b"wait")
                conn.sendall(b"ok\n" if problem is None else f"error: {problem}\n".encode())
            except OSError:
                pass  # the job went away; the set still goes up

    # -- syncing ------------------------------------------------------------------

    def sync(self, wait: bool) -> str | None:
        """Capture the folder as a set and queue it; with ``wait``, the upload's problem or None once done."""
        with self._lock:
            self._captures += 1
            number = self._captures
            stage = self.stage_root / f"set-{number}"
            shutil.rmtree(stage, ignore_errors=True)
            stage.mkdir(parents=True)
            try:
                paths = capture(self.folder, stage)
            except OSError as e:
                shutil.rmtree(stage, ignore_errors=True)
                return f"cannot capture {self.folder}: {e}"
            if self._pending is not None:  # superseded before it went up: done when this one is
                shutil.rmtree(self._pending[1], ignore_errors=True)
            self._pending = (number, stage, paths)
            self._lock.notify_all()
            if not wait:
                return None
            while self._uploaded < number and (self._failed is None or self._failed[0] < number):
                self._lock.wait()
            return None if self._uploaded >= number else self._failed[1]

    def _upload_loop(self) -> None:
        while True:
            with self._lock:
                while self._pending is None and not self._closed:
                    self._lock.wait()
                if self._pending is None:
                    return
                number, stage, paths = self._pending
                self._pending = None
                previous = self._last
            problem = None
            try:
                files = describe(stage, paths)
                if previous is None and not files:
                    pass  # nothing saved yet, nothing to restore later: no empty set
                elif previous is None or previous.get("files") != files:
                    self.store.upload(stage, files, self.attempt, previous)
                    previous = {"files": files}
            except CheckpointError as e:
                problem = str(e)
            except Exception as e:  # never let the thread die: the job would wait forever
                problem = f"checkpoint upload to {self.store.url}: {e}"
            finally:
                shutil.rmtree(stage, ignore_errors=True)
            with self._lock:
                if problem is None:
                    self._last = previous
                    self._uploaded = max(self._uploaded, number)
                else:
                    self._failed = (number, problem)
                self._lock.notify_all()

    def final(self) -> str | None:
        """The last sync, when the command has ended: its problem, or None."""
        problem = self.sync(wait=True)
        self.close()
        return problem

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        if self._server is not None:
            self._server.close()
        if self._sockdir is not None:
            shutil.rmtree(self._sockdir, ignore_errors=True)
