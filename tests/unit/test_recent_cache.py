"""The store's memory of what cannot change: bounded, and with a ttl, answered only that long."""

import time

from trainyard.store.cache import Recent


def test_the_least_recently_used_goes_first_and_forget_drops_one():
    r: Recent[int] = Recent(2)
    r.put("a", 1)
    r.put("b", 2)
    assert r.get("a") == 1  # now the most recent
    r.put("c", 3)
    assert (r.get("a"), r.get("b"), r.get("c")) == (1, None, 3)
    r.forget("a")
    assert r.get("a") is None and r.get("c") == 3


def test_a_value_with_a_ttl_is_answered_until_it_runs_out_then_read_again():
    r: Recent[str] = Recent(10, ttl=0.2)
    r.put("j", "ended")
    assert r.get("j") == "ended"
    time.sleep(0.25)
    assert r.get("j") is None
    r.put("j", "again")  # put again: a full ttl from now
    assert r.get("j") == "again"
