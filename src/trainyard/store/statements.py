"""The store's statements on a job's path, built once: building one (SQLAlchemy's clause
construction and cache key) cost more CPU than running it, once per job or per cycle."""

from __future__ import annotations

from sqlalchemy import bindparam, false, func, insert, select, update

from trainyard.status import ALWAYS, AttemptStatus, JobStatus, Reason
from trainyard.store import tables as t
from trainyard.store.rows import JOB_FIELDS, attempts_query

ACTIVE_ATTEMPT = (AttemptStatus.STARTING.value, AttemptStatus.RUNNING.value)
SCHEDULER_ENDS = {Reason.LOST.value, Reason.NODE_LOST.value, Reason.PREEMPTED.value, Reason.DRAINED.value}
_ATTEMPT = t.Attempt.__table__.c
# built once: a burst of admissions sets one handle each, and building the statement cost more than running it
SET_HANDLE = update(t.Attempt.__table__).where(_ATTEMPT.id == bindparam("b_id")).values(
    handle=bindparam("b_handle", type_=_ATTEMPT.handle.type))

_JOB = t.Job.__table__.c
# the job of an attempt that ends, with its spec when that is not in memory (prebuilt, like SET_HANDLE)
ENDING_JOB = {with_spec: select(_JOB.status, *(_JOB[k] for k in JOB_FIELDS), _JOB.labels_rev,
                                *([_JOB.spec] if with_spec else [])).where(_JOB.id == bindparam("job_id"))
              for with_spec in (False, True)}
# what a long poll checks before it waits: whether the job is there, may be seen, and has ended
JOB_STATE = select(_JOB.status, _JOB.team, _JOB.owner).where(_JOB.id == bindparam("job_id"))
MAX_SEQ = select(func.max(_JOB.seq))
# a job's earlier attempts that ended through no fault of its own (preempted, drained): none counts as a try
FREE_REQUEUES = select(func.count()).where(
    _ATTEMPT.job_id == bindparam("job_id"), _ATTEMPT.number < bindparam("number"),
    _ATTEMPT.reason.in_([r.value for r in Reason if r.retry_on == ALWAYS]))
# the rows of a submit and of a cycle's admissions (an insert() built anew computed its cache key each time)
INSERT_JOB, INSERT_ATTEMPT, INSERT_REPLICA, INSERT_LABELS = (insert(m.__table__) for m in (
    t.Job, t.Attempt, t.Replica, t.JobLabel))
# what every scheduler cycle reads (prebuilt, like SET_HANDLE: building them cost more than running them,
# on the path of each submitted job from its row to its launch)
_PENDING = _JOB.status == JobStatus.PENDING.value
_IN_LINE = _PENDING & (_JOB.blocked == false())  # a job waiting for others to end is not planned
WAITING = select(_JOB.id, _JOB.queue, _JOB.priority, _JOB.created_at, _JOB.not_before, _JOB.owner, _JOB.team).where(
    _IN_LINE).order_by(_JOB.seq)
WAITING_LAST = (select(_ATTEMPT.job_id, _ATTEMPT.reason, _ATTEMPT.preempted_by)
                .join(t.Job.__table__, _ATTEMPT.job_id == _JOB.id).where(_IN_LINE).order_by(_ATTEMPT.number))
# what the last cycle wrote of each pending job, and the one UPDATE (run as an executemany) that sets it
# again: while a burst waits, every cycle moves every waiting job's position, and building one UPDATE
# per job cost ~10x what running it did
WAITING_REASONS = select(_JOB.id, _JOB.reason, _JOB.position).where(_IN_LINE)
SET_REASON = update(t.Job.__table__).where(_JOB.id == bindparam("b_id"), _IN_LINE).values(
    reason=bindparam("b_reason"), position=bindparam("b_position"))
# why a job admitted has not started yet (its engine has not placed it): only while it is starting
SET_STARTING_REASON = update(t.Job.__table__).where(_JOB.id == bindparam("b_id"), _JOB.status == "starting").values(
    reason=bindparam("b_reason"))
ACTIVE = attempts_query(_ATTEMPT.status.in_(ACTIVE_ATTEMPT), _ATTEMPT.created_at)
