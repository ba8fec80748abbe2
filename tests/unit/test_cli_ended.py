"""The line `run --wait` (both ways) and `wait` print when a job ends, and `show`'s head: each thing said once."""

from __future__ import annotations

from trainyard.cli.ended import ending


def line(job: dict) -> str:
    return "".join(ending(job))


def test_a_success_is_not_said_three_times():
    job = {"id": "j-1", "status": "succeeded", "reason": "succeeded",
           "attempts": [{"number": 1, "reason": "Succeeded"}]}
    assert line(job) == "j-1 succeeded (attempt 1)"


def test_a_failure_gives_the_jobs_reason_and_the_attempts_only_when_it_adds_to_it():
    job = {"id": "j-2", "status": "failed", "reason": "Error(exit 1) after 2 attempts",
           "attempts": [{"number": 1, "reason": "Error(exit 1)"}, {"number": 2, "reason": "Error(exit 1)"}]}
    assert line(job) == "j-2 failed: Error(exit 1) after 2 attempts (attempt 2)"
    job["attempts"][-1]["reason"] = "OOMKilled"
    assert line(job) == "j-2 failed: Error(exit 1) after 2 attempts (attempt 2: OOMKilled)"


def test_a_job_that_never_ran_says_why():
    assert line({"id": "j-3", "status": "cancelled", "reason": "cancelled by alice", "attempts": []}) == \
        "j-3 cancelled: cancelled by alice"


def test_a_job_with_no_reason_is_its_status():
    assert line({"id": "j-4", "status": "cancelled", "reason": None, "attempts": []}) == "j-4 cancelled"


def test_show_gives_a_reason_line_only_where_it_says_more_than_the_status():
    import io

    from rich.console import Console

    from trainyard.cli.render import job_detail

    def shown(status: str, reason: str | None) -> list[str]:
        job = {"id": "j-5", "name": "train", "status": status, "reason": reason, "queue": "default", "priority": 0,
               "created_at": 0.0, "attempts": [], "spec": {"command": "true", "resources": {"cpu": 1}}}
        out = io.StringIO()
        Console(file=out, width=120).print(job_detail(job))
        return [row.split(None, 1)[0] for row in out.getvalue().splitlines()]

    assert "reason" not in shown("succeeded", "succeeded") and "reason" not in shown("cancelled", "Cancelled")
    assert "reason" in shown("cancelled", "cancelled by alice") and "reason" in shown("failed", "Error(exit 1)")
    assert "pending" in shown("pending", "waiting for 1 × A100: 0 free")
