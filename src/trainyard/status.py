"""Job and attempt statuses, and the one table of allowed transitions.

The store applies every change as one compare-and-set guarded by the statuses
these tables allow to move to the new one (``UPDATE … WHERE id=? AND status IN
(:func:`sources`)``), so a transition missing from them can never happen, whoever asks.
"""

from __future__ import annotations

import enum


class JobStatus(str, enum.Enum):
    PENDING = "pending"        # waiting for room (or for a retry's backoff to pass)
    STARTING = "starting"      # admitted; an attempt is being launched
    RUNNING = "running"        # the attempt's command is running
    CANCELLING = "cancelling"  # cancel asked; waiting for the attempt to stop
    SUCCEEDED = "succeeded"    # final: the last attempt exited 0
    FAILED = "failed"          # final: no retries left, or a permanent failure
    CANCELLED = "cancelled"    # final: a user cancelled it

    def is_terminal(self) -> bool:
        return self in _TERMINAL_JOB


class AttemptStatus(str, enum.Enum):
    STARTING = "starting"    # handed to the engine; the launcher has not reported yet
    RUNNING = "running"      # the launcher reported the command started
    SUCCEEDED = "succeeded"  # final: exit 0
    FAILED = "failed"        # final: see the attempt's reason
    CANCELLED = "cancelled"  # final: stopped on request (cancel or preemption)

    def is_terminal(self) -> bool:
        return self in _TERMINAL_ATTEMPT


_TERMINAL_JOB = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED}
_TERMINAL_ATTEMPT = {AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.CANCELLED}

J, A = JobStatus, AttemptStatus

JOB_TRANSITIONS: dict[JobStatus, set[JobStatus]] = {
    J.PENDING: {J.STARTING, J.CANCELLED, J.FAILED},
    J.STARTING: {J.RUNNING, J.PENDING, J.SUCCEEDED, J.FAILED, J.CANCELLING},
    J.RUNNING: {J.PENDING, J.SUCCEEDED, J.FAILED, J.CANCELLING},
    J.CANCELLING: {J.CANCELLED, J.SUCCEEDED},  # an attempt that finished before the signal keeps its result
    J.SUCCEEDED: set(),
    J.FAILED: set(),
    J.CANCELLED: set(),
}

ATTEMPT_TRANSITIONS: dict[AttemptStatus, set[AttemptStatus]] = {
    A.STARTING: {A.RUNNING, A.SUCCEEDED, A.FAILED, A.CANCELLED},
    A.RUNNING: {A.SUCCEEDED, A.FAILED, A.CANCELLED},
    A.SUCCEEDED: set(),
    A.FAILED: set(),
    A.CANCELLED: set(),
}


def allowed(old: enum.Enum, new: enum.Enum) -> bool:
    table = JOB_TRANSITIONS if isinstance(old, JobStatus) else ATTEMPT_TRANSITIONS
    return new in table[old]  # type: ignore[index]


def sources(new: JobStatus | AttemptStatus) -> list[str]:
    """Every status the table allows to move to ``new`` (what a compare-and-set may find)."""
    return _SOURCES[(type(new), new.value)]


# keyed by (enum, value): the two enums are str enums, so JobStatus.RUNNING == AttemptStatus.RUNNING
_SOURCES: dict = {
    (type(new), new.value): [old.value for old, targets in table.items() if new in targets]
    for table in (JOB_TRANSITIONS, ATTEMPT_TRANSITIONS) for new in table
}


class Reason:
    """Why an attempt ended. Strings, because they are shown to people as they are."""

    SUCCEEDED = "Succeeded"
    OOM = "OOMKilled"
    TIMEOUT = "Timeout"
    CANCELLED = "Cancelled"
    LOST = "LostContact"
    NODE_LOST = "NodeLost"  # the engine saw the replica's node leave the cluster (retried like LostContact)
    PREEMPTED = "Preempted"
    SETUP = "SetupFailed"

    @staticmethod
    def error(exit_code: int) -> str:
        return f"Error(exit {exit_code})"
