"""How long a job took, as `trainyard ls` (TIME) and `trainyard show` (time; each attempt's DURATION) print it."""

import re
import time

import pytest
from rich.console import Console

from trainyard.cli.render import duration, job_detail, job_time, jobs_table


@pytest.mark.parametrize("seconds, shown", [
    (0, "0.0s"), (9.44, "9.4s"), (59.9, "59.9s"), (60, "1m00s"), (245.7, "4m05s"), (3599, "59m59s"),
    (3600, "1h00m"), (11220, "3h07m"), (86399, "23h59m"), (86400, "1d00h"), (187200, "2d04h"),
])
def test_a_duration_is_said_to_the_unit_that_matters(seconds, shown):
    assert duration(1000.0, 1000.0 + seconds) == shown


def test_a_retried_jobs_time_runs_from_its_first_start_to_its_end_and_counts_to_now_until_it_ends():
    retried = [{"started_at": 100.0, "ended_at": 400.0}, {"started_at": 500.0, "ended_at": 520.5}]
    assert job_time({"status": "succeeded", "attempts": retried}) == "7m00s"  # not the last attempt's 20.5s
    # an attempt that never started (a launch refused) counts from the first that did
    assert job_time({"status": "failed", "attempts": [{"started_at": None, "ended_at": None}, *retried]}) == "7m00s"
    # while it waits for its retry, or runs it, its time goes on
    waiting = {"status": "pending", "attempts": [{"started_at": time.time() - 125, "ended_at": time.time() - 60}]}
    assert job_time(waiting) == "2m05s"
    running = [{"started_at": time.time() - 125, "ended_at": time.time() - 100}, {"started_at": time.time() - 5}]
    assert job_time({"status": "running", "attempts": running}) == "2m05s"
    assert job_time({"status": "pending", "attempts": [{"started_at": None, "ended_at": None}]}) == "-"
    assert job_time({"status": "pending", "attempts": []}) == "-"


def test_show_says_the_jobs_time_as_ls_does():
    job = {"id": "j-1", "name": "n", "status": "succeeded", "queue": "default", "priority": 0, "reason": None,
           "spec": {"resources": {"cpu": 1}, "command": "true"}, "created_at": time.time(),
           "attempts": [{"number": n, "status": s, "started_at": t0, "ended_at": t1} for n, s, t0, t1 in
                        ((1, "failed", 100.0, 400.0), (2, "succeeded", 500.0, 520.5))]}
    console = Console(width=200, record=True)
    console.print(job_detail(job))
    assert re.search(r"^time +7m00s *$", console.export_text(), re.M), console.export_text()


def test_ls_has_a_time_column_beside_submitted():
    job = {"id": "j-1", "name": "n", "status": "succeeded", "spec": {"resources": {"cpu": 1}},
           "attempts": [{"started_at": 10.0, "ended_at": 3710.0}], "created_at": time.time(), "reason": None}
    table = jobs_table([job])
    headers = [c.header for c in table.columns]
    assert headers[headers.index("SUBMITTED") + 1] == "TIME"
    assert [str(c) for c in table.columns[headers.index("TIME")].cells] == ["1h01m"]
