"""The lane's quickest case: a small request sent on a kept-alive connection the moment it is whole, and the
replica's small answer written back from that connection's own callback, with no task, future or await.

A byte relay (bench/serve_relay.py) does nothing more per request than two callbacks; the relay in a task
(``serve_proxy.relay``) goes through a task, the pool's future and timer, an async generator and the Sink's
coroutines around the same two writes. Without them the hop cost this server about a third less CPU per
request (bench/RESULTS.md, session 17). A request goes this way only while nothing unusual happens: a ready
replica with a connection waiting in the pool, and an answer framed by a content-length of at most
:data:`~trainyard.api.serve_proxy.BUFFER`. Anything else hands over to the task, with what was done so far:

- no connection waits for the chosen replica (or the route has none ready): the whole request goes the task's
  way before anything is sent;
- the reused connection turns out closed before any byte of the answer: an idempotent request goes the task's
  way from the start (on another connection), as the pool's own retry does; any other answers 502;
- a streamed answer (chunked, larger, or until the connection closes): once its head has arrived, the task
  passes it on (``serve_proxy.deliver``).

A replica silent for :data:`~trainyard.api.upstream.READ_TIMEOUT` gets its request answered 502, as the task's
way does; one watchdog timer looks for those while any request waits here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from trainyard.api.serve_hop import HOP, error_answer, release
from trainyard.api.serve_origin import returned
from trainyard.api.serve_proxy import BUFFER, deliver, relay
from trainyard.api.upstream import IDEMPOTENT, READ_TIMEOUT, Connection, Headers, Response, UpstreamBroken
from trainyard.errors import ReplicaUnreachable
from trainyard.services.notify import off_loop
from trainyard.services.serving import Route, ServingService

if TYPE_CHECKING:
    from trainyard.api.serve_lane import ServeLane, _Exchange

log = logging.getLogger(__name__)
WATCH_EVERY = 5.0  # seconds between looks for replicas silent past READ_TIMEOUT


def express(lane: "ServeLane", ex: "_Exchange", job_id: str, base: str) -> bool:
    """Send ``ex``'s request now on a connection waiting for the replica ``job_id`` at ``base`` (picked and counted
    for this request); False, with nothing sent, when none waits: the task's way then opens one to that replica
    (picking again would skew the spread: with two replicas, one without a waiting connection got none)."""
    serving, pool, route = lane.proxy.serving, lane.proxy.pool, ex.route
    body = b"".join(ex.body) if ex.body is not None else None
    conn = pool.send_now(base, ex.method, ex.target, route.signed(job_id, ex.headers), body)
    if conn is None:
        return False
    if serving.touch_due(route):  # the autoscaler hears of it, off the loop and without holding the request
        task = asyncio.ensure_future(_touch(serving, route))
        lane.background.add(task)
        task.add_done_callback(lane.background.discard)
    serving.traffic.started(route.name)
    conn.listener = _Express(lane, ex, conn, job_id, body)
    return True


async def _touch(serving: ServingService, route: Route) -> None:
    try:
        await off_loop(serving.touch, route)
    except Exception:  # the request goes on; the next one due writes it down again
        log.exception("service %s: noting a request for the autoscaler failed", route.name)


class _Express:
    """Listens on the replica's connection for one answer (see the module's docstring)."""

    __slots__ = ("lane", "ex", "conn", "job_id", "parsed", "body", "began", "heard_at", "response")

    def __init__(self, lane: "ServeLane", ex: "_Exchange", conn: Connection, job_id: str, body: bytes | None) -> None:
        self.lane, self.ex, self.conn, self.job_id, self.body = lane, ex, conn, job_id, body
        self.parsed = conn.parsed
        self.began = self.heard_at = time.perf_counter()
        self.response: Response | None = None
        lane.waiting.add(self)
        if lane.watchdog is None:
            lane.watchdog = asyncio.get_running_loop().call_later(WATCH_EVERY, _watch, lane)

    def heard(self) -> None:
        conn, parsed = self.conn, self.parsed
        self.heard_at = time.perf_counter()
        if conn.error is not None or (conn.ended and not parsed.done):
            return self._broken()
        if not parsed.headers_done:
            return
        response = self.response
        if response is None:
            pool = self.lane.proxy.pool
            self.response = response = Response(pool, conn, conn.parser, parsed,  # type: ignore[arg-type]
                                                head_only=self.ex.method == b"HEAD")
            if response.length is None or response.length > BUFFER:  # streamed: the task passes it on
                self._hand_over(deliver(self.lane.proxy.serving, self.ex.route.name, self.job_id, response,
                                        self.ex, self.began))
                return
        if not parsed.done:
            return
        self._stop()
        serving = self.lane.proxy.serving
        try:
            self.ex.write_whole(response.status, returned(response.headers, HOP, serving.sandboxed),
                                b"".join(parsed.body) if not response.head_only else b"")
        finally:  # once the answer is on its way: the caller does not wait for the counting
            response.release()
            release(serving, self.job_id)
            serving.traffic.ended(self.ex.route.name, response.status, time.perf_counter() - self.began)

    def _broken(self) -> None:
        """The connection ended, broke or carried no HTTP before the answer was whole."""
        conn, ex = self.conn, self.ex
        self._stop()
        conn.close()
        serving = self.lane.proxy.serving
        if self.parsed.messages == 0 and conn.error is None and ex.method in IDEMPOTENT:
            # a kept-alive connection the replica had closed: nothing reached it, so the task sends it afresh, on a
            # new connection to the same replica (as the pool's own retry does)
            proxy = self.lane.proxy
            body = self.body

            async def request() -> tuple[bytes | None, None, Headers]:
                return body, None, ex.headers

            self._hand_over(relay(serving, proxy.pool, ex.route, ex.caller, ex.method, ex.target, request, ex,
                                  began=self.began, replica=(self.job_id, conn.address)))
            return
        release(serving, self.job_id)
        why = conn.error or ("the replica closed the connection without an answer" if self.parsed.messages == 0
                             else "the replica closed the connection in the middle of its answer")
        serving.traffic.ended(ex.route.name, 502, time.perf_counter() - self.began)
        status, headers, body = error_answer(ReplicaUnreachable(
            f"the replica of service {ex.route.name} did not answer: {why}"))
        ex.write_whole(status, headers, body)

    def _silent(self) -> None:
        self.conn.error = UpstreamBroken(f"the replica sent nothing for {READ_TIMEOUT:g}s")
        self.conn.close()  # connection_lost follows, and _broken answers 502

    def _hand_over(self, coro: Any) -> None:
        self._stop()
        self.lane.start(self.ex, coro)

    def _stop(self) -> None:
        self.conn.listener = None
        self.lane.waiting.discard(self)


def _watch(lane: "ServeLane") -> None:
    """Every WATCH_EVERY seconds while requests wait here: those whose replica stayed silent for READ_TIMEOUT
    answer 502. One timer for all of them: a timer per request cost ~3 % of the hop's CPU."""
    lane.watchdog = None
    if not lane.waiting:
        return
    late = time.perf_counter() - READ_TIMEOUT
    for waiting in [w for w in lane.waiting if w.heard_at < late]:
        waiting._silent()
    lane.watchdog = asyncio.get_running_loop().call_later(WATCH_EVERY, _watch, lane)
