"""Traffic.observed: requests the nginx front served, counted like the proxy's own, and their in-flight estimate."""

import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from trainyard.services.service_traffic import SLOT, WINDOW, Traffic, TrafficCollector


def test_a_fast_path_request_is_counted_as_a_proxied_one_is():
    # given traffic with one request through this server's proxy and two through the front, one of them a 503
    traffic, now = Traffic(), time.time()
    traffic.started("web")
    traffic.ended("web", 200, 0.02)
    traffic.observed("web", 503, 0.004, now - 5)
    traffic.observed("web", 200, 0.3, now - 4)

    # then all three count, with the front's error and latencies, and the front's latest end as the latest request
    snap = traffic.snapshot("web")
    assert (snap.requests, snap.errors) == (3, 1)
    assert snap.p50_ms == pytest.approx(20) and snap.p95_ms > 250
    assert traffic.last_request_at("web") >= now - 1  # the proxy's own request ended later than the front's
    traffic.observed("other", 200, 0.1, now - 4)
    assert traffic.last_request_at("other") == pytest.approx(now - 4)
    metrics = _metrics(traffic)
    assert 'trainyard_service_requests_total{service="web"} 3.0' in metrics
    assert 'trainyard_service_errors_total{service="web"} 1.0' in metrics
    assert 'trainyard_service_request_duration_seconds_bucket{le="0.005",service="web"} 1.0' in metrics
    assert 'trainyard_service_request_duration_seconds_bucket{le="0.5",service="web"} 3.0' in metrics


def test_in_flight_is_the_average_concurrency_of_the_window_and_decays_to_zero():
    # given two 1 s requests the front just finished, and a third that ended long before the window
    traffic, now = Traffic(), time.time()
    traffic.observed("web", 200, 1.0, now)
    traffic.observed("web", 200, 1.0, now)
    traffic.observed("web", 200, 30.0, now - WINDOW - 1)

    # then, over the window (~2 s), one request was in flight on average: the old one adds nothing
    assert traffic.in_flight("web") == pytest.approx(1.0, abs=0.06)
    assert traffic.snapshot("web").in_flight == 1

    # when two more requests come through this server's proxy, they add whole
    traffic.started("web")
    traffic.started("web")
    assert traffic.in_flight("web") == pytest.approx(3.0, abs=0.06)
    assert 'trainyard_service_in_flight{service="web"} 3.0' in _metrics(traffic, rounded=True)

    # then once the proxy's end and the window passed with nothing new from the front, none is in flight
    traffic.ended("web", 200, 0.1)
    traffic.ended("web", 200, 0.1)
    time.sleep(WINDOW + SLOT)
    assert traffic.in_flight("web") == 0
    assert traffic.snapshot("web").in_flight == 0


def test_a_request_longer_than_the_window_counts_as_one_in_flight_and_a_future_end_as_now():
    # given one request that ran for an hour and ended now, and a line claiming an end an hour from now
    traffic, now = Traffic(), time.time()
    traffic.observed("web", 200, 3600.0, now)
    traffic.observed("web", 200, 3600.0, now + 3600)

    # then each was in flight the whole window: 2, not more; and the latest request is no later than now
    assert traffic.in_flight("web") == pytest.approx(2.0, abs=0.01)
    assert traffic.last_request_at("web") <= time.time()


def test_many_short_requests_read_as_their_concurrency_whatever_their_number():
    # given 20,000 requests of 0.1 s that ended over the last second: 2,000 s of work within the window
    traffic, now = Traffic(), time.time()
    n = 20_000
    for k in range(n):
        traffic.observed("web", 200, 0.1, now - k / n)

    # then the window's average is 2,000 s over its ~2 s: ~1,000 in flight, none of the requests lost
    assert traffic.in_flight("web") == pytest.approx(2000 / WINDOW, rel=0.06)


def _metrics(traffic: Traffic, rounded: bool = False) -> str:
    registry = CollectorRegistry()
    registry.register(TrafficCollector(traffic))
    text = generate_latest(registry).decode()
    if rounded:  # the gauge is the unrounded estimate: its digits depend on the instant
        lines = [line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("trainyard_service_in_flight{")]
        text = "\n".join(f"{k} {round(float(v)):.1f}" for k, v in lines)
    return text
