"""A job's metric line, as the server reads it: numbers no float holds are skipped (the line's others kept), and a
line whose step or time is one is skipped whole, never an error that would fail every report of the job."""

from __future__ import annotations

from trainyard.store.telemetry import _points

HUGE = "9" * 400  # an integer JSON reads, past a float's range


def test_a_value_no_float_holds_is_skipped_and_the_others_kept():
    [point] = _points('{"values": {"big": %s, "loss": 0.5, "flag": true}, "step": 3}' % HUGE)
    assert (point.name, point.value, point.step) == ("loss", 0.5, 3)


def test_a_step_or_time_no_float_holds_skips_the_line():
    assert _points('{"values": {"loss": 0.5}, "step": %s}' % HUGE) == []
    assert _points('{"values": {"loss": 0.5}, "ts": %s}' % HUGE) == []
