"""The reporting thread: tells the API what is new, and hears back about cancel.

Each request is ``POST {server}/internal/attempts/{attempt_id}/replicas/{replica}/report`` with
JSON ``{"phase", "pid", "log"?, "metrics"?, "result"?}``; the answer is
``{"cancel": bool}``.

- A report carries the bytes of output.log and the complete lines of
  metrics.jsonl from the last *acknowledged* offsets. Offsets advance only on
  a 2xx, so a failed request is simply sent again (the server dedups by
  offset) and a restart of the control plane loses nothing.
- ``phase`` is "running" while the command runs and "exited" after; the
  report with ``result`` goes last, once every log byte and metric line has
  been acknowledged.
- 404/410: the server forgot this attempt; stop reporting (the launcher still finishes and
  writes result.json). One the server says it *ended* (``attempt_ended``: lost, its node
  seemed gone) while the command runs, ``on_gone`` stops too: its work counts no more, and
  a retry may run elsewhere on the same checkpoints.
- Each report carries ``Authorization: Bearer <token>``, the attempt's own
  credential from launch.json. On 401/403 the token is read again from
  launch.json: an attempt launched again after a server restart gets a new
  one, and the engine rewrites launch.json for replicas already running.
- Connection errors and any other answer (5xx, but also 401/422: a server
  being redeployed may say those for a moment): re-read ``address_file`` (the
  server may be back on another port) and retry with backoff (0.1 s doubling
  to 2 s), forever while the command runs, for ``exit_report_deadline`` seconds after.
- Nothing is sent from here before the command starts: a setup that takes long (an env build, an image
  pull) says it is alive through :mod:`trainyard.launch.setup_beat`; a failed setup still sends its log
  and result from here.
- The thread is started only when its first report is due (:meth:`Reporter.start`
  from the launcher's waits): a command over before then has its one report, the
  result, sent by :meth:`Reporter.final_inline` from the launcher's main thread, and
  the launcher never starts a thread (whose start, stack and GIL hand-offs cost
  more than the report itself).
- What an answer asks of the replica (``trainyard stack``, ``trainyard exec``) is done by
  :mod:`trainyard.launch.asks` on a thread of its own; its answers ride the next reports.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Callable

from trainyard.launch import tail
from trainyard.launch.asks import Asks
from trainyard.launch.config import read_token
from trainyard.launch.marks import mark
from trainyard.launch.transport import connect, post_json

TICK = 0.15        # how often new log bytes and metric lines are looked for
HEARTBEAT = 3.0    # a report at least this often, even with nothing new
FIRST_DELAY = 0.1  # the first report waits this long for a short command to end (logs still arrive in < 0.5 s)
REQUEST_TIMEOUT = 30.0
BACKOFF_MIN, BACKOFF_MAX = 0.1, 2.0


class Gone(Exception):
    """The server answered 404/410: it no longer knows this attempt (``ended``: it ended it)."""

    def __init__(self, ended: bool = False) -> None:
        super().__init__()
        self.ended = ended


class Reporter:
    def __init__(self, config, log_path: str, metrics_path: str, on_cancel: Callable[[], None],
                 on_gone: Callable[[], None] | None = None):
        self.config = config
        self.server = config.server.rstrip("/")
        self.ca_file, self.ca_pem = config.server_ca, config.server_ca_pem
        self.log_path, self.metrics_path = log_path, metrics_path
        self.on_cancel, self.on_gone = on_cancel, on_gone
        self.token = config.token
        self.masks = config.masks  # the job's secret values (launch.secrets), if it has any
        self.log_offset = 0      # bytes of output.log the server has acknowledged
        self.metrics_offset = 0  # bytes of metrics.jsonl the server has acknowledged
        self.gone = False
        self._pid: int | None = None
        self._exited = False
        self._result: dict | None = None
        self._deadline = float("inf")
        # made by start(): a short job's launcher never starts the thread, and a Thread and its
        # Events cost it ~35 copy-on-write faults of the zygote's pages (~0.1 ms of CPU)
        self._wake: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._delivered = False
        self._last_sent: float | None = None
        self._first_at = 0.0
        self._started = False
        self._kept = None  # a connection opened ahead for the next report (transport.connect)
        # what the server asks of this replica (trainyard stack, trainyard exec), done by a thread of its own
        self.asks = Asks(self.masks, self._poke)

    @property
    def running(self) -> bool:
        """Whether its thread was started (then it alone sends reports)."""
        return self._started

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._wake = threading.Event()
            self._wake.set()  # whatever was said before: its loop looks at the state first
            self._thread = threading.Thread(target=self._run, name="trainyard-reporter", daemon=True)
            self._thread.start()

    def _poke(self) -> None:
        """Wake the thread, if there is one (before it starts, its loop reads the state first)."""
        if self._wake is not None:
            self._wake.set()

    def started(self, pid: int) -> float:
        """The command runs: the first report goes out after ``FIRST_DELAY``, or with the result
        if the command is over by then (a short job then costs the server one report, not two).
        Returns that delay: when to :meth:`start` the thread."""
        self._first_at = time.monotonic() + FIRST_DELAY
        self._pid = pid
        self._poke()
        return FIRST_DELAY

    def connect(self) -> None:
        """Open the next report's connection now, while the command runs: its connect and the
        server's accept are then not between the command's exit and its report."""
        if self._kept is None:
            self._kept = connect(self.server, REQUEST_TIMEOUT)

    def exited(self) -> None:
        self._exited = True
        self._poke()

    def finish(self, result: dict) -> bool:
        """Deliver the rest of the files, then ``result``; wait until done or given up.

        Returns whether the final report was acknowledged.
        """
        self.deliver(result)
        return self.wait()

    def deliver(self, result: dict) -> None:
        """Start delivering the rest of the files, then ``result``; :meth:`wait` for the end."""
        self._final(result)
        self.start()

    def _final(self, result: dict) -> None:
        self._exited = True
        self._deadline = time.monotonic() + self.config.exit_report_deadline
        self._result = result
        if self._pid is None:
            self._pid = os.getpid()  # the command never started: the launcher stands in
        self._poke()

    def final_inline(self, result: dict, meanwhile: Callable[[], None]) -> bool:
        """Send the rest of the files and ``result`` in one report from the calling thread, the
        thread never started (a command over before its first report was due).

        ``meanwhile`` runs once whatever happens: while the server works on the request once
        it is out, else before returning (its exceptions propagate). True once the report
        was acknowledged (or the server forgot the attempt); False when it was not (failed,
        refused, or more than one report's worth): :meth:`deliver` then goes on with the
        thread, which sends again from the acknowledged offsets.
        """
        if self._started:
            raise RuntimeError("final_inline: the reporter's thread is running")
        self._final(result)
        ran, errors = False, []

        def sent() -> None:
            nonlocal ran
            ran = True
            try:
                meanwhile()
            except BaseException as e:  # noqa: BLE001  (raised below, not taken for the network's)
                errors.append(e)

        try:
            body, log_n, metrics_n = self._build(True)
            if not self._last_chunk(log_n, metrics_n):
                return False
            body["result"] = result
            mark("reporter: posting the result")
            self._post(body, sent)
            mark("reporter: answered")
            self._last_sent = time.monotonic()
            self.log_offset += log_n
            self.metrics_offset += metrics_n
            self._delivered = True
            return True
        except Gone:
            self.gone = True
            return True
        except Exception:  # noqa: BLE001  (the thread tries again, and says so if it was a bug)
            return False
        finally:
            if not ran:
                meanwhile()
            elif errors:
                raise errors[0]

    def _last_chunk(self, log_n: int, metrics_n: int) -> bool:
        """What was just read is all there is: the log to its end, every complete metric line."""
        return (tail.file_size(self.log_path) <= self.log_offset + log_n
                and tail.file_size(self.metrics_path) - self.metrics_offset < tail.CHUNK)

    def wait(self) -> bool:
        """Whether the final report was acknowledged, once it was or the deadline passed."""
        if self._started:
            self._thread.join(self.config.exit_report_deadline + REQUEST_TIMEOUT + 5)
        if self._kept is not None:  # never used (the report went before it was opened, or not at all)
            self._kept.close()
            self._kept = None
        return self._delivered

    # -- the thread ------------------------------------------------------------

    def _run(self) -> None:
        backoff = BACKOFF_MIN
        while True:
            if self._pid is None:  # still setting up: nothing to say yet
                self._wake.wait()
                continue
            final = self._result is not None
            if not final and self._last_sent is None and time.monotonic() < self._first_at:
                self._wake.wait(self._first_at - time.monotonic())
                self._wake.clear()
                continue
            if final and time.monotonic() > self._deadline:
                return
            try:
                outcome = self._step(final)
            except Gone as e:
                self.gone = True
                if e.ended and not final and self.on_gone is not None:
                    self.on_gone()
                return
            except Exception as e:  # refused, timed out, 5xx, a file unreadable for a moment
                if not isinstance(e, OSError):  # a bug, not the network: say so, but keep trying
                    import traceback

                    traceback.print_exc()
                self._on_failure(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            backoff = BACKOFF_MIN
            if outcome == "done":
                self._delivered = True
                return
            if outcome == "idle":
                self._wake.wait(TICK)
                self._wake.clear()

    def _step(self, final: bool) -> str:
        """Send one report if there is reason to: "done", "more" (go on at once) or "idle"."""
        body, log_n, metrics_n = self._build(final)
        if final and not log_n and not metrics_n and self._drained():
            body["result"] = self._result
        answers = {kind: got[:8] for kind, got in self.asks.answers.items() if got}  # 8 of each at most (spec.reports)
        body.update(answers)
        news = "log" in body or "metrics" in body or "result" in body or answers
        if not news and self._last_sent is not None and time.monotonic() - self._last_sent < HEARTBEAT:
            return "idle"
        mark("reporter: posting" + (" the result" if "result" in body else ""))
        cancel, asked = self._post(body)
        mark("reporter: answered")
        self._last_sent = time.monotonic()
        self.log_offset += log_n
        self.metrics_offset += metrics_n
        for kind, sent in answers.items():
            del self.asks.answers[kind][:len(sent)]
        if "result" in body:
            return "done"
        if cancel:
            self.on_cancel()
        if asked and not self._exited:
            self.asks.take(asked)
        return "more" if final or self._behind() or any(self.asks.answers.values()) else "idle"

    def _build(self, final: bool) -> tuple[dict, int, int]:
        body: dict = {"phase": "exited" if self._exited else "running", "pid": self._pid}
        text, log_n = tail.log_chunk(self.log_path, self.log_offset, final=final, masks=self.masks)
        if log_n:
            body["log"] = {"offset": self.log_offset, "data": text}
        lines, metrics_n = tail.metric_lines(self.metrics_path, self.metrics_offset)
        if metrics_n:
            body["metrics"] = {"offset": self.metrics_offset, "lines": lines}
        return body, log_n, metrics_n

    def _drained(self) -> bool:
        """Nothing left in the log (a trailing partial metric line never completes)."""
        return tail.file_size(self.log_path) <= self.log_offset

    def _behind(self) -> bool:
        """More than a chunk was waiting: send the next one without a tick's delay."""
        return (tail.file_size(self.log_path) - self.log_offset >= tail.CHUNK
                or tail.file_size(self.metrics_path) - self.metrics_offset >= tail.CHUNK)

    def _post(self, body: dict, sent: Callable[[], None] | None = None) -> tuple[bool, dict | None]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        path = f"/internal/attempts/{self.config.attempt_id}/replicas/{self.config.replica}/report"
        payload = json.dumps(body).encode()
        timeout = REQUEST_TIMEOUT
        if self._result is not None:  # do not hang past the deadline on a stuck server
            timeout = max(0.5, min(timeout, self._deadline - time.monotonic()))
        kept, self._kept = self._kept, None
        status, data = post_json(self.server, path, payload, headers, timeout, self.ca_file, self.ca_pem, sent, kept)
        if status in (404, 410):
            raise Gone(ended=error_code(data) == "attempt_ended")
        if status in (401, 403):
            self._reread_token()
        if not 200 <= status < 300:
            raise ConnectionError(f"HTTP {status}")
        try:
            answer = json.loads(data or b"{}")
            return bool(answer.get("cancel")), answer if answer.get("stacks") or answer.get("execs") else None
        except (ValueError, AttributeError):
            return False, None

    def _on_failure(self, backoff: float) -> None:
        self._reread_address()
        end = time.monotonic() + backoff
        if self._result is not None:
            end = min(end, self._deadline)
        time.sleep(max(0.0, end - time.monotonic()))

    def _reread_token(self) -> None:
        """The token in launch.json (next to the log), which the engine may have renewed."""
        self.token = read_token(os.path.dirname(self.log_path)) or self.token

    def _reread_address(self) -> None:
        self.server = announced(self.config.address_file) or self.server


def announced(address_file: str | None) -> str | None:
    """The server's URL as ``address_file`` announces it now (the server may be back on another port)."""
    if not address_file:
        return None
    try:
        with open(address_file, encoding="utf-8") as f:
            url = json.load(f).get("url")
    except (OSError, ValueError, AttributeError):
        return None
    return url.rstrip("/") if isinstance(url, str) and url else None


def error_code(data: bytes | None) -> str | None:
    """The ``code`` of an error answer's JSON body (trainyard.errors), if it has one."""
    try:
        return json.loads(data or b"{}").get("code")
    except (ValueError, AttributeError):
        return None
