"""Who may use a code snapshot: its uploaders (``snapshot_owners``, migration 0025) and who sees a job that ran it."""

from __future__ import annotations

import time

from sqlalchemy import String, cast, delete, exists, func, or_, select
from sqlalchemy.exc import IntegrityError

from trainyard.store import tables as t
from trainyard.store.schedule_tables import Schedule
from trainyard.store.store import Store

_O = t.SnapshotOwner.__table__
_J = t.Job.__table__
# what names a snapshot by its digest column (a job, a sweep's trials, a service's replicas, a schedule's job)
_NAMED_BY = (_J.c.snapshot, t.Sweep.__table__.c.snapshot, t.Service.__table__.c.snapshot,
             Schedule.__table__.c.snapshot)
# and in a JSON map of workdirs (a pipeline run's steps, a scheduled pipeline's), read whole
_WORKDIRS = (t.PipelineRun.__table__.c.workdirs, Schedule.__table__.c.workdirs)


class SnapshotOwners:
    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, digest: str, user: str) -> None:
        """``user`` uploaded ``digest`` (again: nothing changes)."""
        if self.owns(digest, user):
            return
        try:
            with self.store.write() as s:
                s.connection().execute(_O.insert().values(digest=digest, user=user, created_at=time.time()))
        except IntegrityError:  # another request of the same user's, at the same moment
            pass

    def owns(self, digest: str, user: str) -> bool:
        with self.store.read() as s:
            return bool(s.scalar(select(exists().where(_O.c.digest == digest, _O.c.user == user))))

    def ran_for(self, digest: str, user: str, teams: list[str]) -> bool:
        """Whether a job that ran ``digest`` is ``user``'s or of one of ``teams`` (one the user sees)."""
        sees = or_(_J.c.owner == user, _J.c.team.in_(teams)) if teams else _J.c.owner == user
        with self.store.read() as s:
            return bool(s.scalar(select(exists().where(_J.c.snapshot == digest, sees))))

    def unused(self, before: float, limit: int, after: str = "") -> tuple[list[str], str | None]:
        """Snapshots uploaded (by each of their uploaders) before ``before`` that no job, sweep, service or schedule
        names, among the next ``limit`` by digest after ``after``; and the digest to go on after (None: there are no
        more). Those a map of workdirs names (:meth:`in_workdirs`) are still among them. Retention removes them."""
        named = [~exists().where(col == _O.c.digest) for col in _NAMED_BY]
        q = (select(_O.c.digest).where(_O.c.digest > after, *named).group_by(_O.c.digest)
             .having(func.max(_O.c.created_at) < before).order_by(_O.c.digest).limit(limit))
        with self.store.read() as s:
            found = list(s.scalars(q))
        return found, (found[-1] if len(found) == limit else None)

    def in_workdirs(self) -> set[str]:
        """Every snapshot a pipeline run's or a scheduled pipeline's workdirs name: JSON maps, read whole, once."""
        with self.store.read() as s:
            return {d for col in _WORKDIRS for m in s.scalars(select(col).where(col.is_not(None)))
                    for d in (m or {}).values()}

    def forget(self, digest: str) -> bool:
        """Drop who uploaded ``digest``, unless something named it meanwhile; whether it is gone (its file may
        go: a use from now on is refused, as of a snapshot never uploaded)."""
        with self.store.write() as s:
            if any(s.scalar(select(exists().where(col == digest))) for col in _NAMED_BY) or any(
                    s.scalar(select(exists().where(cast(col, String).contains(digest)))) for col in _WORKDIRS):
                return False
            s.connection().execute(delete(_O).where(_O.c.digest == digest))
            return True
