"""Jobs that wait for others to end (their spec's ``after``): out of the scheduler's line until released."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import false, func, select, true, update

from trainyard.spec.job import Dependency, JobSpec
from trainyard.spec.submitted import STORED
from trainyard.status import JobStatus
from trainyard.store import Store
from trainyard.store import tables as t

_J = t.Job.__table__
_BLOCKED = (_J.c.blocked == true()) & (_J.c.status == JobStatus.PENDING.value)


class Blocked(NamedTuple):
    id: str
    after: list[Dependency]
    reason: str | None


class DependencyStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def blocked(self) -> list[Blocked]:
        with self.store.read() as s:
            rows = s.connection().execute(select(_J.c.id, _J.c.spec, _J.c.reason).where(_BLOCKED)).all()
        return [Blocked(i, JobSpec.model_validate(spec, context=STORED).after, reason) for i, spec, reason in rows]

    def seen(self, job_ids: list[str]) -> dict[str, tuple[str, str | None, str | None]]:
        """Each job's (status, team, owner); a job that is not there is left out."""
        out: dict[str, tuple[str, str | None, str | None]] = {}
        with self.store.read() as s:
            for i in range(0, len(job_ids), 500):
                out.update((j, (status, team, owner)) for j, status, team, owner in s.connection().execute(
                    select(_J.c.id, _J.c.status, _J.c.team, _J.c.owner).where(_J.c.id.in_(job_ids[i:i + 500]))))
        return out

    def by_queue(self) -> dict[str, int]:
        """Blocked jobs per queue (for /metrics: they wait for other jobs, not for the scheduler)."""
        with self.store.read() as s:
            return dict(s.connection().execute(select(_J.c.queue, func.count()).where(_BLOCKED)
                                               .group_by(_J.c.queue)).all())

    def release(self, job_id: str) -> bool:
        """Into the scheduler's line; False if it is no longer a blocked pending job (cancelled meanwhile)."""
        with self.store.write() as s:
            return s.execute(update(_J).where(_J.c.id == job_id, _BLOCKED).values(
                blocked=false(), reason="waiting for the scheduler")).rowcount == 1

    def set_reason(self, job_id: str, reason: str) -> None:
        with self.store.write() as s:
            s.execute(update(_J).where(_J.c.id == job_id, _BLOCKED).values(reason=reason))
