"""The loop base shared by the leader's service, cluster and pipeline loops."""

import threading
import time

from trainyard.services.notify import Notifier
from trainyard.services.ticker import Ticker


class Counting(Ticker):
    name = "test-ticker"

    def __init__(self, notifier=None, fail_first=False):
        super().__init__(notifier)
        self.cycles = 0
        self.heard = 0
        self.fail_first = fail_first
        self.ran = threading.Event()

    def cycle(self):
        self.cycles += 1
        self.ran.set()
        if self.fail_first and self.cycles == 1:
            raise RuntimeError("one bad cycle")

    def pause(self):
        return 60.0  # only a wake moves it on within a test

    def on_notify(self, key):
        self.heard += 1
        return key == "mine"


def _wait_for(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_a_wake_runs_a_cycle_at_once_and_a_bad_cycle_does_not_end_the_loop():
    t = Counting(fail_first=True)
    t.start()
    try:
        _wait_for(lambda: t.cycles == 1)  # the first cycle runs on start, and raises
        t.wake()
        _wait_for(lambda: t.cycles == 2)
        time.sleep(0.05)
        assert t.cycles == 2  # no wake, no cycle: the pause is a minute
    finally:
        t.stop()
    assert not t._thread.is_alive()


def test_only_news_the_loop_cares_about_wakes_it():
    n = Notifier()
    t = Counting(n)
    t.start()
    try:
        _wait_for(lambda: t.cycles == 1)
        n.notify("other")
        time.sleep(0.05)
        assert t.cycles == 1
        n.notify("mine")
        _wait_for(lambda: t.cycles == 2)
    finally:
        t.stop()


def test_a_stopped_loop_starts_again_and_listens_once():
    n = Notifier()
    t = Counting(n)
    t.start()
    _wait_for(lambda: t.cycles == 1)
    t.stop()
    t.start()  # the lease came back
    try:
        _wait_for(lambda: t.cycles == 2)
        n.notify("mine")
        _wait_for(lambda: t.cycles == 3)
        assert t.heard == 1  # one listener, not one per start
    finally:
        t.stop()
