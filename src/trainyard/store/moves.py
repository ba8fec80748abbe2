"""What the store and the scheduler hand each other: admissions, waiting jobs, and endings."""

from __future__ import annotations

from dataclasses import dataclass

from trainyard.status import AttemptStatus, JobStatus


@dataclass(slots=True)
class Admission:
    """One admission of a cycle, as :meth:`Store.admit` takes it."""

    job_id: str
    placements: list[tuple[str, list[str]]]
    borrowed: bool = False
    token_hash: str | None = None
    queue: str | None = None
    submitted_at: float | None = None


@dataclass(slots=True)
class Waiting:
    """A pending job as the scheduler needs it each cycle: what may change while it waits."""

    id: str
    queue: str
    priority: int
    created_at: float
    not_before: float | None
    last_reason: str | None  # how its last attempt ended, if it had one
    last_preempted_by: str | None  # the job its last attempt made room for
    owner: str | None = None  # who submitted it: its launchers may run as that user's Unix account
    team: str | None = None  # the team it belongs to (on the default queue: its submitter's)


@dataclass
class Ending:
    """How an attempt ended, and what becomes of its job."""

    status: AttemptStatus
    exit_code: int | None
    reason: str
    message: str | None
    job_status: JobStatus
    job_reason: str | None = None
    not_before: float | None = None
