"""uvicorn's per-request warnings are let through once per interval, the next saying how many were not logged
(api/bounded_http.EveryFew); any other record passes untouched."""

import logging

from trainyard.api import bounded_http
from trainyard.api.bounded_http import EveryFew


def _record(msg: str) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.error", logging.WARNING, __file__, 1, msg, (), None)


def test_a_flood_is_one_line_per_interval_and_the_next_counts_the_rest(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(bounded_http.time, "monotonic", lambda: now[0])
    limit = EveryFew(every=10.0)
    passed = [limit.filter(_record("Invalid HTTP request received.")) for _ in range(500)]
    assert passed.count(True) == 1 and passed[0]
    assert limit.filter(_record("Unsupported upgrade request."))  # counted apart
    assert limit.filter(_record("Application startup complete."))  # anything else, always
    now[0] += 10.0
    later = _record("Invalid HTTP request received.")
    assert limit.filter(later)
    assert later.getMessage() == "Invalid HTTP request received. (499 more in the 10 s before this one, not logged)"
    assert not limit.filter(_record("Invalid HTTP request received."))
