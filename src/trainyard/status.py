"""Job and attempt statuses, and the one table of allowed transitions.

The store applies every change as one compare-and-set guarded by the statuses
these tables allow to move to the new one (``UPDATE … WHERE id=? AND status IN
(:func:`sources`)``), so a transition missing from them can never happen, whoever asks.
"""

from __future__ import annotations

import enum
import re
from typing import NamedTuple


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


class Reason(str, enum.Enum):
    """Why an attempt (or one replica of it) ended; what that leads to is in ``CONSEQUENCES``.

    The values are the strings stored and reported, shown to people as they
    are. ``ERROR`` is the one written with a parameter, ``Error(exit N)``
    (:meth:`error`); :meth:`of` reads any stored or reported text back. The
    launcher writes the same strings from :mod:`trainyard.launch.reasons`.
    """

    SUCCEEDED = "Succeeded"
    ERROR = "Error"                   # the command exited non-zero on its own; written "Error(exit N)"
    OOM = "OOMKilled"                 # it passed its memory limit
    TIMEOUT = "Timeout"               # it ran past the spec's timeout
    LOST = "LostContact"              # its launcher vanished without a result
    NODE_LOST = "NodeLost"            # the engine saw the replica's node leave the cluster
    SETUP = "SetupFailed"             # its environment, code or inputs could not be prepared
    IMAGE_PULL = "ImagePullFailed"    # its image was not here and could not be pulled
    MISSING_OUTPUT = "MissingOutput"  # a pipeline step exited 0 without writing a declared output
    OUTPUTS_TOO_LARGE = "OutputsTooLarge"  # its outputs passed the server's outputs_max: none were uploaded
    CANCELLED = "Cancelled"           # a user cancelled it
    PREEMPTED = "Preempted"           # the scheduler stopped it to make room for higher-priority work
    DRAINED = "NodeDrained"           # an admin drained its node (maintenance): stopped and requeued

    def __str__(self) -> str:  # the value in f-strings too (Python 3.11 formats a mixed-in Enum as "Reason.X")
        return self.value

    def to_status(self) -> AttemptStatus:
        """The status a replica or attempt that ended for this reason gets."""
        return CONSEQUENCES[self].status

    @property
    def retry_on(self) -> str:
        """How a retry policy treats it: the ``retry.on`` category that must be named for
        it to be retried, or ``NEVER`` / ``ALWAYS``."""
        return CONSEQUENCES[self].retry_on

    @staticmethod
    def error(exit_code: int) -> str:
        return f"Error(exit {exit_code})"

    @classmethod
    def of(cls, text: str | None) -> Reason | None:
        """The reason a stored or reported text stands for; None for one no part of trainyard writes."""
        if not isinstance(text, str):
            return None
        try:
            return cls(text)
        except ValueError:
            return None

    @classmethod
    def _missing_(cls, value: object) -> Reason | None:
        if isinstance(value, str) and _ERROR_TEXT.fullmatch(value):
            return cls.ERROR
        return None


_ERROR_TEXT = re.compile(r"Error\(exit -?[0-9]+\)")

NEVER = "never"    # ends the job whatever its retry policy says
ALWAYS = "always"  # the job goes back to pending, and it does not count as a retry


class Consequence(NamedTuple):
    status: AttemptStatus  # of the replica, and of an attempt that ended for this reason
    retry_on: str          # a ``retry.on`` category (``RetryOn`` in the spec), NEVER or ALWAYS


# Every reason's consequences, in one table (checked complete by tests/unit/test_reasons.py).
# Besides this: a cancel asked for ends the job cancelled whatever the reason but success,
# and an exit code the policy lists as permanent is never retried (see services/retry.py).
R = Reason
CONSEQUENCES: dict[Reason, Consequence] = {
    R.SUCCEEDED: Consequence(A.SUCCEEDED, NEVER),
    R.ERROR: Consequence(A.FAILED, "error"),
    R.OOM: Consequence(A.FAILED, "oom"),
    R.TIMEOUT: Consequence(A.FAILED, "timeout"),
    R.LOST: Consequence(A.FAILED, "lost_contact"),
    R.NODE_LOST: Consequence(A.FAILED, "lost_contact"),  # as lost contact: the launcher went with its node
    R.SETUP: Consequence(A.FAILED, NEVER),  # the same setup would fail again
    R.IMAGE_PULL: Consequence(A.FAILED, NEVER),  # a missing image or a refused pull stays so: no retry loop
    R.MISSING_OUTPUT: Consequence(A.FAILED, NEVER),  # the same command would write the same outputs
    R.OUTPUTS_TOO_LARGE: Consequence(A.FAILED, NEVER),  # and as much of them
    R.CANCELLED: Consequence(A.CANCELLED, NEVER),
    R.PREEMPTED: Consequence(A.CANCELLED, ALWAYS),  # its job did nothing wrong
    R.DRAINED: Consequence(A.CANCELLED, ALWAYS),  # nor here: its node is going down for maintenance
}
