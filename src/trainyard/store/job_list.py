"""The jobs listing in SQL: filters, sorts, pages and counts.

A page costs a fixed number of queries whatever its size: the page's rows (ids chosen by an inner
query over the indexes, full rows fetched by the outer one), their attempts with replicas in one
joined query, and, when asked, the number of matching jobs counted up to a cap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from sqlalchemy import Text, cast, func, literal, or_, select

from trainyard.auth.permissions import Visible
from trainyard.spec.job import JobSpec
from trainyard.spec.job_query import SORT_COLUMNS, TOTAL_CAP, JobFilter
from trainyard.spec.label_selector import Requirement
from trainyard.spec.records import AttemptInfo, JobInfo
from trainyard.spec.submitted import STORED
from trainyard.status import JobStatus
from trainyard.store import tables as t
from trainyard.store.cache import Recent
from trainyard.store.rows import JOB_FIELDS, Specs, attempt_records, remembered

_C = t.Job.__table__.c
_L = t.JobLabel.__table__.c


class Listed(NamedTuple):
    jobs: list[JobInfo]
    last_seq: int | None  # the submit order of the page's last job: the cursor of the next page
    more: bool  # a page follows this one


def visible_where(c: Any, visible: Visible) -> Any:
    """The rows of a table with ``owner`` and ``team`` columns ``c`` that ``visible`` shows."""
    return or_(c.team.in_(sorted(visible.teams or ())), c.owner == visible.user)


def job_where(f: JobFilter, visible: Visible | None) -> list:
    """The conditions of filter ``f`` and of what the caller may see."""
    where = [visible_where(_C, visible)] if visible is not None and visible.teams is not None else []
    where += [_C.status.in_(f.status)] if f.status else []
    where += [_C.queue == f.queue] if f.queue else []
    where += [_C.team == f.team] if f.team else []
    where += [_C.owner == f.owner] if f.owner else []
    where += [_C.name == f.name] if f.name else []
    # LIKE's own wildcards in the search are taken literally (autoescape)
    where += [or_(_C.name.contains(f.q, autoescape=True), _C.id.startswith(f.q, autoescape=True))] if f.q else []
    where += [_C.created_at >= f.since] if f.since is not None else []
    where += [_C.created_at < f.until] if f.until is not None else []
    where += [label_where(r) for r in f.labels]
    return where


def label_where(r: Requirement) -> Any:
    """One requirement of a label selector as SQL, over the labels' own table: the jobs with (or without) the
    key and one of the values, found by its index, however few of them there are among how many jobs."""
    having = select(_L.job_id).where(_L.key == r.key)
    if r.op in ("=", "in", "!=", "notin"):
        having = having.where(_L.value.in_(r.values) if len(r.values) > 1 else _L.value == r.values[0])
    return _C.id.in_(having) if r.op in ("=", "in", "exists") else _C.id.not_in(having)


def job_order(sort: str) -> list:
    column = _C[SORT_COLUMNS[sort.lstrip("-")]]
    keys = [column] if column is _C.seq else [column, _C.seq]
    return [k.desc() for k in keys] if sort.startswith("-") else [k.asc() for k in keys]


def page(conn: Any, where: list, sort: str, limit: int, offset: int, specs: Specs,
         ended: Recent[tuple[int, JobInfo]], keep: Callable[[JobInfo, int], None]) -> Listed:
    """One page of jobs in ``sort`` order: two queries at most (jobs, then the attempts of those not in
    ``ended``, the store's memory of jobs that can no longer change but for their labels); ``keep`` puts an
    ended job read here into that memory, with its labels revision."""
    order = job_order(sort)
    ids = select(_C.id).where(*where).order_by(*order).limit(limit + 1).offset(offset)
    # the spec as text: decoded only for jobs whose spec is not in memory (most are)
    rows = conn.execute(select(*(_C[k] for k in JOB_FIELDS), _C.status, _C.seq, _C.labels_rev,
                               cast(_C.spec, Text).label("spec")).where(_C.id.in_(ids)).order_by(*order)
                        ).mappings().all()
    more = len(rows) > limit
    rows = rows[:limit]
    found = {r["id"]: kept[1] for r in rows
             if (kept := ended.get(r["id"])) is not None and kept[0] == r["labels_rev"]}
    fresh = [r for r in rows if r["id"] not in found]
    of: dict[str, list[AttemptInfo]] = {}
    if fresh:
        a = t.Attempt.__table__.c
        for att in attempt_records(conn, a.job_id.in_([r["id"] for r in fresh]), a.number):
            of.setdefault(att.job_id, []).append(att)
    for r in fresh:
        if (spec := remembered(specs, r["id"], r["labels_rev"])) is None:
            spec = JobSpec.model_validate_json(r["spec"], context=STORED)
            specs.put(r["id"], (r["labels_rev"], spec))
        job = JobInfo.model_construct(**{k: r[k] for k in JOB_FIELDS}, status=JobStatus(r["status"]), spec=spec,
                                      attempts=of.get(r["id"], []))
        found[r["id"]] = job
        if job.status.is_terminal():
            keep(job, r["labels_rev"])
    return Listed([found[r["id"]] for r in rows], rows[-1]["seq"] if rows else None, more)


def count_capped(conn: Any, where: list) -> tuple[int, bool]:
    """How many jobs match, counted up to TOTAL_CAP, and whether there are more than that."""
    # a constant, not a column: an index that holds the filter's columns answers alone, no table reads
    capped = select(literal(1)).select_from(t.Job.__table__).where(*where).limit(TOTAL_CAP + 1).subquery()
    n = conn.execute(select(func.count()).select_from(capped)).scalar_one()
    return min(n, TOTAL_CAP), n > TOTAL_CAP


def counts(conn: Any, where: list) -> dict[str, int]:
    """Matching jobs per status (statuses with none left out): one GROUP BY over the status index."""
    return dict(conn.execute(select(_C.status, func.count()).where(*where).group_by(_C.status)).all())
