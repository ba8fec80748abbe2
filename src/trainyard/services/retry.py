"""What happens to a job when an attempt ends: retry, or a final status.

What each reason leads to is :data:`trainyard.status.CONSEQUENCES`; this
applies it with the job's retry policy (categories, attempts, backoff,
permanent exit codes) and words the job's reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainyard.spec.job import Retry
from trainyard.status import ALWAYS, AttemptStatus, JobStatus, Reason

_JOB_STATUS = {AttemptStatus.SUCCEEDED: JobStatus.SUCCEEDED, AttemptStatus.CANCELLED: JobStatus.CANCELLED,
               AttemptStatus.FAILED: JobStatus.FAILED}  # of a job whose attempt is not retried


@dataclass
class Outcome:
    attempt_status: AttemptStatus
    job_status: JobStatus
    job_reason: str
    not_before: float | None = None


def decide(
    policy: Retry, *, tries: int, exit_code: int | None, reason: str, cancel_requested: bool, now: float,
) -> Outcome:
    """The attempt's final status and the job's next status for an attempt that ended.

    ``reason`` is the attempt's reason as stored (a :class:`Reason`, or ``Error(exit N)``).
    ``tries`` is which try of the job this attempt was: its number, less the earlier
    attempts that were requeued for free (preempted, drained), which count neither
    against ``retry.max`` nor in the backoff.
    """
    kind = Reason.of(reason)  # None only for a text no part of trainyard writes: a failure, not retried
    if kind is Reason.SUCCEEDED:
        return Outcome(AttemptStatus.SUCCEEDED, JobStatus.SUCCEEDED, "succeeded")
    if cancel_requested or kind is Reason.CANCELLED:  # after success: a job that finished first keeps it
        return Outcome(AttemptStatus.CANCELLED, JobStatus.CANCELLED, "cancelled")
    status = kind.to_status() if kind is not None else AttemptStatus.FAILED
    if kind is Reason.DRAINED:
        return Outcome(status, JobStatus.PENDING, "requeued: its node was drained")
    if kind is not None and kind.retry_on == ALWAYS:  # preemption
        return Outcome(status, JobStatus.PENDING, "requeued after preemption")
    if exit_code is not None and exit_code in policy.permanent_exit_codes:
        return Outcome(status, _JOB_STATUS[status], f"{reason}: exit code {exit_code} is permanent")
    if kind is None or kind.retry_on not in policy.on:
        return Outcome(status, _JOB_STATUS[status], f"{reason} (not retried)")
    if tries > policy.max:
        words = f"{tries} attempt{'s' if tries > 1 else ''}"
        return Outcome(status, _JOB_STATUS[status], f"{reason} after {words}")
    delay = policy.backoff * (2 ** (tries - 1))
    return Outcome(status, JobStatus.PENDING,
                   f"retrying after {reason} (attempt {tries} of {policy.max + 1})", now + delay)
