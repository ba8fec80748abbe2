"""How long a job ran, as `trainyard ls` (TIME) and `trainyard show` (DURATION) print it."""

import time

import pytest

from trainyard.cli.render import duration, jobs_table, run_time


@pytest.mark.parametrize("seconds, shown", [
    (0, "0.0s"), (9.44, "9.4s"), (59.9, "59.9s"), (60, "1m00s"), (245.7, "4m05s"), (3599, "59m59s"),
    (3600, "1h00m"), (11220, "3h07m"), (86399, "23h59m"), (86400, "1d00h"), (187200, "2d04h"),
])
def test_a_duration_is_said_to_the_unit_that_matters(seconds, shown):
    assert duration(1000.0, 1000.0 + seconds) == shown


def test_a_run_time_is_the_last_attempts_and_a_running_one_counts_to_now():
    job = {"attempts": [{"started_at": 100.0, "ended_at": 400.0}, {"started_at": 500.0, "ended_at": 520.5}]}
    assert run_time(job) == "20.5s"
    assert run_time({"attempts": [{"started_at": time.time() - 125, "ended_at": None}]}) == "2m05s"
    assert run_time({"attempts": [{"started_at": None, "ended_at": None}]}) == "-"
    assert run_time({"attempts": []}) == "-"


def test_ls_has_a_time_column_beside_submitted():
    job = {"id": "j-1", "name": "n", "status": "succeeded", "spec": {"resources": {"cpu": 1}},
           "attempts": [{"started_at": 10.0, "ended_at": 3710.0}], "created_at": time.time(), "reason": None}
    table = jobs_table([job])
    headers = [c.header for c in table.columns]
    assert headers[headers.index("SUBMITTED") + 1] == "TIME"
    assert [str(c) for c in table.columns[headers.index("TIME")].cells] == ["1h01m"]
