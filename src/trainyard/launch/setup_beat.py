"""Reports while the launcher sets up: it is alive, and it reaches the server.

The server ends a replica whose launcher has said nothing for ``ServerSettings.start_deadline``
seconds since its launch (:meth:`trainyard.scheduler.loop.SchedulerLoop._silenced`): one that cannot
reach the server would otherwise stay starting until it gave up. A setup may rightly take longer
than that (an image pull, a pip env build, a large snapshot unpacked, an input fetched), so while it
lasts a thread sends a report with no ``phase`` every :data:`SETUP_BEAT` seconds, which the server
takes as contact only (the replica stays starting). Its answer is heard as the reporter's is: a
cancel stops the setup, and an attempt the server has ended (``attempt_ended``) stops it too.

Only a setup that may take long starts the thread (:func:`may_take_long`): a plain command in a
fresh folder is ready in milliseconds, and a thread would cost its launcher more than the setup.
The reporter takes over once the command runs; a beat still in flight then is harmless (a report
with no phase changes nothing but the time of the last contact).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Callable

from trainyard.launch.config import read_token

SETUP_BEAT = 10.0  # seconds between reports while setting up; none before the first of them has passed


def may_take_long(config) -> bool:  # noqa: ANN001
    """Whether the setup does anything that may take long: all but a plain command in a fresh folder."""
    return bool(config.snapshot or config.python_env or config.container or config.inputs or config.secrets
                or config.checkpoint_url or config.venv == "fresh" or config.run_as)


class SetupBeat:
    def __init__(self, config, attempt_dir: str, on_cancel: Callable[[], None],  # noqa: ANN001
                 on_gone: Callable[[], None], every: float | None = None) -> None:
        """``attempt_dir``: where launch.json is (its token is read again when refused); ``on_cancel``: the
        server asked to cancel; ``on_gone``: the server has ended the attempt. Both are called from the
        beat's thread, never once :meth:`stop` was called."""
        self.config = config
        self.dir = attempt_dir
        self.server = config.server.rstrip("/")
        self.token = config.token
        self.on_cancel, self.on_gone = on_cancel, on_gone
        self.every = every or SETUP_BEAT  # read now: a test's launcher sets the module's value before it starts
        self.sent = 0  # reports the server acknowledged
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainyard-setup-beat", daemon=True)

    def start(self) -> SetupBeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        """The command runs (or the setup ended): no report from here any more. Not waited for: a report in
        flight to a server that does not answer could hold the command's start for a whole timeout."""
        self._stopped.set()

    def _run(self) -> None:
        # here, on this thread: the launcher's path to the command imports neither
        from trainyard.launch.reporter import BACKOFF_MAX, REQUEST_TIMEOUT, announced, error_code
        from trainyard.launch.transport import post_json

        path = f"/internal/attempts/{self.config.attempt_id}/replicas/{self.config.replica}/report"
        payload = json.dumps({"pid": os.getpid()}).encode()
        wait = self.every
        while not self._stopped.wait(wait):
            wait = self.every
            headers = {"Content-Type": "application/json"}
            if self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            try:
                status, data = post_json(self.server, path, payload, headers, REQUEST_TIMEOUT,
                                         self.config.server_ca, self.config.server_ca_pem)
            except OSError:  # unreachable: the server may be back elsewhere; tried again sooner than a beat
                self.server = announced(self.config.address_file) or self.server
                wait = min(self.every, BACKOFF_MAX)
                continue
            if self._stopped.is_set():
                return
            if status in (404, 410):
                if error_code(data) == "attempt_ended":
                    self.on_gone()
                return
            if status in (401, 403):  # the engine may have renewed the token in launch.json
                self.token = read_token(self.dir) or self.token
            elif 200 <= status < 300:
                self.sent += 1
                if _cancel(data):
                    self.on_cancel()


def _cancel(data: bytes | None) -> bool:
    try:
        return bool(json.loads(data or b"{}").get("cancel"))
    except (ValueError, AttributeError):
        return False
