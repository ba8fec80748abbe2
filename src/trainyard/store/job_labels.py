"""Changing a job's labels after submit (``trainyard label``), as part of :class:`~trainyard.store.store.Store`.

A job's spec is otherwise final, and servers keep specs in memory on that understanding; each change counts
up ``jobs.labels_rev``, which every read of a job row carries, so a server holding an older copy reads the
spec again (``rows.remembered``). The spec's ``labels`` and the ``job_labels`` rows change in one transaction,
with the job's row locked first (PostgreSQL; SQLite has one writer): two changes at once are made one after the
other, each on what the other left, and a deletion (which locks the row first too) waits or makes it not found.
"""

from __future__ import annotations

from sqlalchemy import delete, select, update

from trainyard.errors import Conflict, InvalidSpec, JobNotFound
from trainyard.spec.job import JobSpec
from trainyard.spec.labels import MAX_LABELS
from trainyard.spec.submitted import STORED
from trainyard.store import tables as t
from trainyard.store.statements import INSERT_LABELS

_J, _L = t.Job.__table__, t.JobLabel.__table__


class JobLabels:
    """Mixed into the Store, whose ``write()``, ``_specs`` and ``_ended`` memories and ``_relabels`` count it
    uses."""

    def relabel(self, job_id: str, changes: dict[str, str | None], overwrite: bool = False
                ) -> tuple[dict[str, str], dict[str, str]]:
        """Set each label of ``changes`` to its value, or remove it where the value is None; the labels before
        and after. Without ``overwrite`` a label already set to another value is a Conflict naming it."""
        with self.write() as s:
            conn = s.connection()
            # locked: a change made at once to other keys waits for this one instead of being refused
            row = conn.execute(select(_J.c.spec, _J.c.labels_rev).where(_J.c.id == job_id).with_for_update()).first()
            if row is None:
                raise JobNotFound(f"no such job: {job_id}", job_id=job_id)
            raw, rev = dict(row[0]), row[1]
            before = dict(raw.get("labels") or {})
            if not overwrite and (clash := [k for k, v in changes.items()
                                            if v is not None and before.get(k, v) != v]):
                k = clash[0]
                raise Conflict(f"job {job_id} already has label {k}={before[k]}: ask to overwrite it to change it",
                               job_id=job_id, label=k)
            after = {k: v for k, v in {**before, **changes}.items() if v is not None}
            if after == before:
                return before, after
            if len(after) > MAX_LABELS:
                raise InvalidSpec(errors=[{"field": "labels", "line": None, "where": "labels", "message":
                                           f"a job has at most {MAX_LABELS} labels; this would leave {len(after)}"}])
            raw["labels"] = after
            spec = JobSpec.model_validate(raw, context=STORED)
            conn.execute(update(_J).where(_J.c.id == job_id).values(spec=spec.model_dump(mode="json"),
                                                                    labels_rev=rev + 1))
            conn.execute(delete(_L).where(_L.c.job_id == job_id))
            if after:
                conn.execute(INSERT_LABELS, [{"job_id": job_id, "key": k, "value": v} for k, v in after.items()])
        self._relabels += 1  # before the forget: a read that began before the change keeps nothing after it
        self._specs.put(job_id, (rev + 1, spec))
        self._ended.forget(job_id)
        return before, after
