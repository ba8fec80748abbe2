"""What this server's ``/serve/`` proxy saw, per service: requests, errors, latency, in flight.

Kept in memory (each server counts what it proxied; a restart starts again from
zero, as a Prometheus counter may). The autoscaler reads ``in_flight`` and
``last_request_at``; ``GET /api/v1/services/NAME`` shows p50/p95 of the last
requests; ``/metrics`` gets a counter and a histogram per service.
"""

from __future__ import annotations

import bisect
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


@dataclass
class _Stats:
    requests: int = 0
    errors: int = 0
    in_flight: int = 0
    last_request_at: float | None = None
    seconds_sum: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    recent: deque = field(default_factory=lambda: deque(maxlen=RECENT))


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
            s.requests += 1
            s.errors += status >= 500
            s.last_request_at = time.time()
            if seconds is None:
                return
            s.seconds_sum += seconds
            s.buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
            s.recent.append(seconds)

    def in_flight(self, name: str) -> int:
        s = self._by_name.get(name)
        return s.in_flight if s else 0

    def last_request_at(self, name: str) -> float | None:
        s = self._by_name.get(name)
        return s.last_request_at if s else None

    def snapshot(self, name: str) -> ServiceTraffic:
        with self._lock:
            s = self._by_name.get(name)
            if s is None:
                return ServiceTraffic()
            recent = sorted(s.recent)
            requests, errors, in_flight, last = s.requests, s.errors, s.in_flight, s.last_request_at
        p50 = p95 = None
        if len(recent) >= 2:
            q = statistics.quantiles(recent, n=100, method="inclusive")
            p50, p95 = q[49] * 1000, q[94] * 1000
        elif recent:
            p50 = p95 = recent[0] * 1000
        return ServiceTraffic(requests=requests, errors=errors, in_flight=in_flight, p50_ms=p50, p95_ms=p95,
                              last_request_at=last)


class TrafficCollector(Collector):
    """``trainyard_service_requests_total``, ``…_errors_total``, ``…_in_flight`` and
    ``…_request_duration_seconds`` per service, as this server's proxy saw them."""

    def __init__(self, traffic: Traffic) -> None:
        self.traffic = traffic

    def collect(self) -> Iterable[Metric]:
        requests = CounterMetricFamily("trainyard_service_requests", "requests proxied to a service", labels=["service"])
        errors = CounterMetricFamily("trainyard_service_errors", "5xx answers of a service, its own or the proxy's",
                                     labels=["service"])
        in_flight = GaugeMetricFamily("trainyard_service_in_flight", "requests being proxied now", labels=["service"])
        latency = HistogramMetricFamily("trainyard_service_request_duration_seconds",
                                        "time to the response's end through the proxy", labels=["service"])
        with self.traffic._lock:
            items = [(n, s.requests, s.errors, s.in_flight, list(s.buckets), s.seconds_sum)
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
