"""What happens to a job when an attempt ends: retry, or a final status."""

from __future__ import annotations

from dataclasses import dataclass

from trainyard.spec.job import Retry
from trainyard.status import AttemptStatus, JobStatus, Reason


@dataclass
class Outcome:
    attempt_status: AttemptStatus
    job_status: JobStatus
    job_reason: str
    not_before: float | None = None


def _kind(reason: str) -> str | None:
    if reason.startswith("Error("):
        return "error"
    return {Reason.OOM: "oom", Reason.LOST: "lost_contact", Reason.NODE_LOST: "lost_contact",
            Reason.TIMEOUT: "timeout"}.get(reason)


def decide(
    policy: Retry, *, attempt_number: int, exit_code: int | None, reason: str, cancel_requested: bool, now: float,
) -> Outcome:
    """The attempt's final status and the job's next status for an attempt that ended."""
    if reason == Reason.SUCCEEDED:
        return Outcome(AttemptStatus.SUCCEEDED, JobStatus.SUCCEEDED, "succeeded")
    if cancel_requested or reason == Reason.CANCELLED:  # after success: a job that finished first keeps it
        return Outcome(AttemptStatus.CANCELLED, JobStatus.CANCELLED, "cancelled")
    if reason == Reason.PREEMPTED:
        return Outcome(AttemptStatus.CANCELLED, JobStatus.PENDING, "requeued after preemption")
    kind = _kind(reason)
    if exit_code is not None and exit_code in policy.permanent_exit_codes:
        return Outcome(AttemptStatus.FAILED, JobStatus.FAILED, f"{reason}: exit code {exit_code} is permanent")
    if kind is None or kind not in policy.on:
        return Outcome(AttemptStatus.FAILED, JobStatus.FAILED, f"{reason} (not retried)")
    if attempt_number > policy.max:
        tries = f"{attempt_number} attempt{'s' if attempt_number > 1 else ''}"
        return Outcome(AttemptStatus.FAILED, JobStatus.FAILED, f"{reason} after {tries}")
    delay = policy.backoff * (2 ** (attempt_number - 1))
    return Outcome(AttemptStatus.FAILED, JobStatus.PENDING,
                   f"retrying after {reason} (attempt {attempt_number} of {policy.max + 1})", now + delay)
