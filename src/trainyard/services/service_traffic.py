"""What this server's ``/serve/`` proxy saw, per service: requests, errors, latency, in flight.

Kept in memory (each server counts what it proxied; a restart starts again from
zero, as a Prometheus counter may). The autoscaler reads ``in_flight`` and
``last_request_at``; ``GET /api/v1/services/NAME`` shows p50/p95 of the last
requests; ``/metrics`` gets a counter and a histogram per service.

Requests an nginx front sent straight to a replica are told afterwards, one
access-log line each (:meth:`Traffic.observed`): nginx cannot say how many it
has open, so their share of ``in_flight`` is the average concurrency of the
last seconds (:class:`_Busy`).
"""

from __future__ import annotations

import bisect
import math
import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from trainyard.spec.service import ServiceTraffic

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
RECENT = 2048  # latencies kept for p50/p95
# Fast-path load is averaged over the last WINDOW seconds: long enough that a steady stream of short requests
# reads as a steady number (not 0 or 1 by luck of the tick), short enough that the autoscaler (4 ticks a second,
# scale-up at once) sees a burst within a couple of seconds and the estimate is 0 soon after traffic stops.
WINDOW = 2.0
SLOT = 0.1  # seconds per slot of busy time: the window moves in these steps (fixed memory, whatever the rate)
SLOTS = round(WINDOW / SLOT)


class _Busy:
    """Seconds of fast-path request time per SLOT over the last WINDOW: its sum over the window divided by the
    window's length is the average number in flight (Little's law), however many requests made it up."""

    __slots__ = ("ids", "busy")

    def __init__(self) -> None:
        self.ids = [-1] * SLOTS  # the slot number each place holds (slot n covers [n * SLOT, (n + 1) * SLOT))
        self.busy = [0.0] * SLOTS

    def add(self, start: float, end: float, now: float) -> None:
        """A request ran over [start, end] (end <= now): its time in each slot still in the window."""
        current = math.floor(now / SLOT)
        first = max(math.floor(start / SLOT), current - SLOTS + 1)
        for n in range(first, min(math.floor(end / SLOT), current) + 1):
            overlap = min(end, (n + 1) * SLOT) - max(start, n * SLOT)
            if overlap <= 0:
                continue
            i = n % SLOTS
            if self.ids[i] != n:
                self.ids[i], self.busy[i] = n, 0.0
            self.busy[i] += overlap

    def average(self, now: float) -> float:
        """Requests in flight on average over the window's whole slots and the current part of one."""
        current = math.floor(now / SLOT)
        total = sum(b for i, b in zip(self.ids, self.busy) if current - SLOTS < i <= current)
        span = (SLOTS - 1) * SLOT + (now - current * SLOT)
        return total / span if total > 0 else 0.0


@dataclass
class _Stats:
    requests: int = 0
    errors: int = 0
    in_flight: int = 0
    last_request_at: float | None = None
    seconds_sum: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT))
    fast: _Busy | None = None  # requests the nginx front served, once it told of one


class Traffic:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, _Stats] = {}

    def started(self, name: str) -> None:
        with self._lock:
            s = self._by_name.get(name) or self._by_name.setdefault(name, _Stats())
            s.in_flight += 1
            s.last_request_at = time.time()

    def ended(self, name: str, status: int, seconds: float | None) -> None:
        """A request ended; ``seconds`` None for a WebSocket, whose length is no latency."""
        with self._lock:
            s = self._by_name.get(name) or self._by_name.setdefault(name, _Stats())
            s.in_flight = max(0, s.in_flight - 1)
            _count(s, status, seconds, time.time())

    def observed(self, name: str, status: int, seconds: float, ended_at: float) -> None:
        """A request the nginx front sent straight to a replica ended at ``ended_at`` (epoch seconds) after
        ``seconds``: counted as :meth:`ended` counts one of ours, and its time added to the in-flight estimate."""
        now = time.time()
        end = min(ended_at, now)  # the same clock, told in ms: never count time still to come
        with self._lock:
            s = self._by_name.get(name) or self._by_name.setdefault(name, _Stats())
            _count(s, status, seconds, end)
            s.fast = s.fast or _Busy()
            s.fast.add(end - seconds, end, now)

    def in_flight(self, name: str) -> float:
        """Requests this server proxies now, plus those the nginx front had open on average lately."""
        with self._lock:
            s = self._by_name.get(name)
            return _in_flight(s, time.time()) if s else 0.0

    def last_request_at(self, name: str) -> float | None:
        s = self._by_name.get(name)
        return s.last_request_at if s else None

    def snapshot(self, name: str) -> ServiceTraffic:
        with self._lock:
            s = self._by_name.get(name)
            if s is None:
                return ServiceTraffic()
            recent = sorted(s.recent)
            requests, errors, last = s.requests, s.errors, s.last_request_at
            in_flight = round(_in_flight(s, time.time()))
        p50 = p95 = None
        if len(recent) >= 2:
            q = statistics.quantiles(recent, n=100, method="inclusive")
            p50, p95 = q[49] * 1000, q[94] * 1000
        elif recent:
            p50 = p95 = recent[0] * 1000
        return ServiceTraffic(requests=requests, errors=errors, in_flight=in_flight, p50_ms=p50, p95_ms=p95,
                              last_request_at=last)


def _count(s: _Stats, status: int, seconds: float | None, at: float) -> None:
    s.requests += 1
    s.errors += status >= 500
    s.last_request_at = at if s.last_request_at is None else max(s.last_request_at, at)
    if seconds is None:
        return
    s.seconds_sum += seconds
    s.buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
    s.recent.append(seconds)


def _in_flight(s: _Stats, now: float) -> float:
    """Live (this server's proxy) plus estimated (the nginx front's); the API shows it rounded, /metrics as is."""
    return s.in_flight + (s.fast.average(now) if s.fast is not None else 0.0)


class TrafficCollector(Collector):
    """``trainyard_service_requests_total``, ``…_errors_total``, ``…_in_flight`` and
    ``…_request_duration_seconds`` per service, as this server's proxy saw them."""

    def __init__(self, traffic: Traffic) -> None:
        self.traffic = traffic

    def collect(self) -> Iterable[Metric]:
        requests = CounterMetricFamily("trainyard_service_requests", "requests proxied to a service",
                                       labels=["service"])
        errors = CounterMetricFamily("trainyard_service_errors", "5xx answers of a service, its own or the proxy's",
                                     labels=["service"])
        in_flight = GaugeMetricFamily("trainyard_service_in_flight",
                                      "requests being proxied now (the nginx front's: on average lately)",
                                      labels=["service"])
        latency = HistogramMetricFamily("trainyard_service_request_duration_seconds",
                                        "time to the response's end through the proxy", labels=["service"])
        with self.traffic._lock:
            now = time.time()
            items = [(n, s.requests, s.errors, _in_flight(s, now), list(s.buckets), s.seconds_sum)
                     for n, s in self.traffic._by_name.items()]
        for name, n, e, f, buckets, total in items:
            requests.add_metric([name], n)
            errors.add_metric([name], e)
            in_flight.add_metric([name], f)
            cumulative, acc = [], 0
            for bound, count in zip([*map(str, BUCKETS), "+Inf"], buckets):
                acc += count
                cumulative.append((bound, acc))
            latency.add_metric([name], cumulative, total)
        yield from (requests, errors, in_flight, latency)
