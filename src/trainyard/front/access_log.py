"""What the nginx front tells of the requests it sent straight to a replica: one syslog datagram each.

nginx writes, with ``log_format trainyard_serve '$ty_name $status $request_time $msec'`` and
``access_log syslog:server=unix:PATH,nohostname,tag=trainyard trainyard_serve``, datagrams such as::

    <190>Dec  1 23:01:56 trainyard: web-1 200 0.000 1796166116.894

(service, status, seconds from its first byte read to the log line, when the line was written: epoch
seconds). :class:`AccessLog` binds PATH and hands each line to a callback from a thread of its own.
Standard library only: the rest of the front may import it without the server's dependencies.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import stat
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

MAX_DATAGRAM = 2048  # ours are under 100 bytes; a longer one is no line of ours (and is read truncated)
PAUSE = 0.02  # seconds between two reads of what came meanwhile: the kernel queues 512 lines (25,000 requests/s)
BATCH_MAX = 4096  # lines read in one go at most
LOG_EVERY = 60.0  # seconds between two warnings of dropped lines or a failing callback
# nginx's own header (its month names are English whatever the locale), then the fields of our log_format.
# Numbers are digits only (no sign, NaN or exponent) and of bounded length; names as services are named.
LINE = re.compile(rb"<\d{1,3}>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d trainyard: "
                  rb"([A-Za-z0-9][A-Za-z0-9._-]{0,62}) (\d{3}) (\d{1,9}\.\d{3,6}) (\d{1,12}\.\d{3})")

OnRequest = Callable[[str, int, float, float], None]  # (service, status, seconds, ended_at)


class AccessLog:
    """A unix datagram socket at ``path`` (mode 0600; a stale socket there is replaced) and the thread that reads
    it, calling ``on_request(name, status, seconds, ended_at)`` per well-formed line. Anything else is counted in
    :attr:`dropped`; an exception of the callback is counted in :attr:`failed`. Neither stops the thread, and
    neither is logged more than once per LOG_EVERY. nginx sends without blocking: when this thread falls behind,
    the kernel's queue (bounded) fills and nginx drops lines, never waits."""

    def __init__(self, path: str, on_request: OnRequest) -> None:
        self.path = path
        self.on_request = on_request
        self.received = self.dropped = self.failed = 0
        self._told_at = float("-inf")
        self._closing = False
        _remove_stale(path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._sock.bind(path)
            os.chmod(path, 0o600)  # in the front's private folder already: this only narrows it further
            self._inode = os.stat(path).st_ino
        except BaseException:
            self._sock.close()
            raise
        self._thread = threading.Thread(target=self._run, name="front-access-log", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread (at once: shutting the socket down wakes its read) and remove the socket file, unless
        another bound a new one there meanwhile. Closing twice does nothing more."""
        if self._closing:
            return
        self._closing = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(timeout=5)
        self._sock.close()
        try:
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        except FileNotFoundError:
            pass

    def _run(self) -> None:
        while True:
            try:
                batch = [self._sock.recv(MAX_DATAGRAM + 1)]
                # then whatever else has come, and a pause: a thread woken for every request took ~0.1 ms of
                # this server's CPU each, beside nginx and the replica on the same cores (bench/RESULTS.md)
                while len(batch) < BATCH_MAX:
                    batch.append(self._sock.recv(MAX_DATAGRAM + 1, socket.MSG_DONTWAIT))
            except BlockingIOError:
                pass
            except OSError:
                if self._closing:
                    return
                log.exception("front access log: reading %s failed; no more lines are read", self.path)
                return
            for data in batch:
                if self._closing:  # a shut-down socket reads b"" (so may an empty datagram: hence the flag)
                    return
                self.received += 1
                self._line(data)
            time.sleep(PAUSE)

    def _line(self, data: bytes) -> None:
        m = LINE.fullmatch(data) if len(data) <= MAX_DATAGRAM else None
        if m is None:
            self.dropped += 1
            self._tell("front access log: dropped %d lines not of nginx's trainyard_serve format so far, e.g. %r",
                       self.dropped, data[:120])
            return
        name, status, seconds, ended_at = m.groups()
        try:
            self.on_request(name.decode(), int(status), float(seconds), float(ended_at))
        except Exception:
            self.failed += 1
            self._tell("front access log: recording a request failed (%d so far)", self.failed, exc_info=True)

    def _tell(self, message: str, *args: object, exc_info: bool = False) -> None:
        now = time.monotonic()
        if now - self._told_at >= LOG_EVERY:
            self._told_at = now
            log.warning(message, *args, exc_info=exc_info)


def _remove_stale(path: str) -> None:
    """A socket left at ``path`` by a server gone; anything else there is not ours to remove (bind then fails)."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
