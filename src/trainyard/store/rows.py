"""Rows to records: jobs, attempts and replicas read with Core, built without validation (they come from us)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select

from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, JobInfo, ReplicaInfo
from trainyard.spec.submitted import STORED
from trainyard.status import AttemptStatus, JobStatus
from trainyard.store import tables as t
from trainyard.store.cache import Recent

JOB_FIELDS = ("id", "name", "queue", "priority", "snapshot", "created_at", "updated_at", "not_before", "reason",
               "position", "owner", "team")
_REPLICA = "replica_"  # the label prefix of replica columns joined to their attempt's


# a job's spec as last read, with the count of its labels' changes then: only its labels may change
Specs = Recent[tuple[int, JobSpec]]


def remembered(specs: Specs, job_id: str, rev: int) -> JobSpec | None:
    """The job's spec from memory if it is the one of labels revision ``rev`` (its row's now)."""
    got = specs.get(job_id)
    return got[1] if got is not None and got[0] == rev else None


def job_records(conn: Any, where: Any, specs: Specs, attempts: bool = True) -> list[tuple[JobInfo, int]]:
    """Jobs matching ``where``, in submit order, each with its attempts unless ``attempts`` is False, and the
    labels revision of its spec; specs from ``specs`` where it has them, else read and validated once."""
    j, a = t.Job.__table__, t.Attempt.__table__
    rows = conn.execute(select(*(j.c[k] for k in (*JOB_FIELDS, "status", "labels_rev"))).where(where)
                        .order_by(j.c.seq)).mappings().all()
    found = {r["id"]: (spec, r["labels_rev"]) for r in rows
             if (spec := remembered(specs, r["id"], r["labels_rev"])) is not None}
    if missing := [r["id"] for r in rows if r["id"] not in found]:
        for job_id, rev, raw in conn.execute(select(j.c.id, j.c.labels_rev, j.c.spec).where(j.c.id.in_(missing))):
            found[job_id] = (JobSpec.model_validate(raw, context=STORED), rev)
            specs.put(job_id, (rev, found[job_id][0]))
    of: dict[str, list[AttemptInfo]] = {}
    if attempts and rows:
        for att in attempt_records(conn, a.c.job_id.in_([r["id"] for r in rows]), a.c.number):
            of.setdefault(att.job_id, []).append(att)
    return [(_job(r, found[r["id"]][0], of.get(r["id"], [])), found[r["id"]][1]) for r in rows]


def job_by_id(conn: Any, job_id: str, specs: Specs) -> tuple[JobInfo, int] | None:
    """:func:`job_records` of one job, with its attempts, in prebuilt queries (see _JOB_BY_ID)."""
    row = conn.execute(_JOB_BY_ID, {"job_id": job_id}).mappings().first()
    if row is None:
        return None
    rev = row["labels_rev"]
    if (spec := remembered(specs, job_id, rev)) is None:
        spec, rev = spec_now(conn, job_id)
        specs.put(job_id, (rev, spec))
    return _job(row, spec, attempts_from(conn.execute(_ATTEMPTS_OF_JOB, {"job_id": job_id}).mappings())), rev


def _job(row: Any, spec: JobSpec, attempts: list[AttemptInfo]) -> JobInfo:
    return JobInfo.model_construct(**{k: row[k] for k in JOB_FIELDS}, status=JobStatus(row["status"]), spec=spec,
                                   attempts=attempts)


def attempts_query(where: Any, order: Any) -> Any:
    a, r = t.Attempt.__table__, t.Replica.__table__
    replica_cols = [c.label(_REPLICA + c.name) for c in r.c]
    return select(a, *replica_cols).outerjoin(r, r.c.attempt_id == a.c.id).where(where).order_by(order, a.c.id, r.c.index)


# built once: every replica's end reads its attempt back, and building this join of some thirty
# labelled columns cost more CPU than running it
_ATTEMPT_BY_ID = attempts_query(t.Attempt.__table__.c.id == bindparam("attempt_id"), t.Attempt.__table__.c.number)


_JOB = t.Job.__table__.c
# a job by id (each long poll's first look, each cancel, each job the API reads): built once, like _ATTEMPT_BY_ID
_JOB_BY_ID = select(*(_JOB[k] for k in (*JOB_FIELDS, "status", "labels_rev"))).where(
    _JOB.id == bindparam("job_id"))
_SPEC_BY_ID = select(_JOB.spec, _JOB.labels_rev).where(_JOB.id == bindparam("job_id"))
_ATTEMPTS_OF_JOB = attempts_query(t.Attempt.__table__.c.job_id == bindparam("job_id"), t.Attempt.__table__.c.number)


def spec_now(conn: Any, job_id: str) -> tuple[JobSpec, int]:
    """The job's spec as stored now, validated, with its labels revision."""
    raw, rev = conn.execute(_SPEC_BY_ID, {"job_id": job_id}).one()
    return JobSpec.model_validate(raw, context=STORED), rev


def attempt_by_id(conn: Any, attempt_id: str) -> AttemptInfo | None:
    """One attempt with its replicas, or None."""
    found = attempts_from(conn.execute(_ATTEMPT_BY_ID, {"attempt_id": attempt_id}).mappings())
    return found[0] if found else None


def attempt_records(conn: Any, where: Any, order: Any) -> list[AttemptInfo]:
    """Attempts matching ``where`` with their replicas, in ``order``: one query (attempts outer-joined
    to replicas, so a page of jobs costs the same whatever its size), rows built without the ORM
    (identity map, per-row events) and records without validation (they come from us)."""
    return attempts_from(conn.execute(attempts_query(where, order)).mappings())


def attempts_from(rows: Any) -> list[AttemptInfo]:
    found: list[AttemptInfo] = []
    for row in rows:  # one attempt's rows are adjacent: the order ends with its id
        if not found or found[-1].id != row["id"]:
            found.append(attempt_record(row, []))
        if row[_REPLICA + "index"] is not None:
            found[-1].replicas.append(replica_record(row, _REPLICA))
    return found


def replica_record(m: Any, prefix: str = "") -> ReplicaInfo:
    """A replica from row ``m``, whose columns are named ``prefix`` + the table's."""
    return ReplicaInfo.model_construct(
        index=m[prefix + "index"], node=m[prefix + "node"], gpus=list(m[prefix + "gpus"] or []),
        status=AttemptStatus(m[prefix + "status"]), exit_code=m[prefix + "exit_code"], reason=m[prefix + "reason"],
        message=m[prefix + "message"], started_at=m[prefix + "started_at"], ended_at=m[prefix + "ended_at"],
        last_contact_at=m[prefix + "last_contact_at"])


def attempt_record(m: Any, replicas: list[ReplicaInfo]) -> AttemptInfo:
    return AttemptInfo.model_construct(
        id=m["id"], job_id=m["job_id"], number=m["number"], status=AttemptStatus(m["status"]), node=m["node"],
        gpus=list(m["gpus"] or []), exit_code=m["exit_code"], reason=m["reason"], message=m["message"],
        created_at=m["created_at"], started_at=m["started_at"], ended_at=m["ended_at"],
        last_contact_at=m["last_contact_at"], stop_reason=m["stop_reason"], handle=dict(m["handle"] or {}),
        preempted_by=m["preempted_by"], borrowed=m["borrowed"], replicas=replicas)


