"""Queues: created through the API (``source="api"``) or loaded from the server's
queue file (``source="file"``, replaced as a whole each time the file is loaded)."""

from __future__ import annotations

import time

from sqlalchemy import delete, func, select

from trainyard.errors import AlreadyExists, QueueNotFound
from trainyard.spec.queue import Quota, QueueSpec
from trainyard.store import tables as t


class QueuesMixin:
    def queues(self) -> list[QueueSpec]:
        with self.read() as s:
            return [_spec(r) for r in s.scalars(select(t.Queue).order_by(t.Queue.name))]

    def queue_counts(self) -> dict[str, dict[str, int]]:
        """Jobs per queue and status."""
        with self.read() as s:
            rows = s.execute(select(t.Job.queue, t.Job.status, func.count()).group_by(t.Job.queue, t.Job.status))
            out: dict[str, dict[str, int]] = {}
            for queue, status, n in rows:
                out.setdefault(queue, {})[status] = n
            return out

    def get_queue(self, name: str) -> QueueSpec:
        with self.read() as s:
            row = s.get(t.Queue, name, populate_existing=True)
            if row is None:
                raise QueueNotFound(f"no such queue: {name}", queue=name)
            return _spec(row)

    def create_queue(self, spec: QueueSpec, *, replace: bool = False) -> QueueSpec:
        """Add a queue; an existing one is an error unless ``replace``."""
        with self.write() as s:
            row = s.get(t.Queue, spec.name)
            if row is not None and not replace:
                raise AlreadyExists(f"queue {spec.name} exists already; use --replace to change it", queue=spec.name)
            if row is not None:
                s.delete(row)
                s.flush()
            s.add(_row(spec, "api"))
        return spec

    def delete_queue(self, name: str) -> None:
        with self.write() as s:
            if s.execute(delete(t.Queue).where(t.Queue.name == name)).rowcount != 1:
                raise QueueNotFound(f"no such queue: {name}", queue=name)

    def load_file_queues(self, specs: list[QueueSpec]) -> None:
        """Make the file's queues exactly ``specs``; queues created through the API with other names stay."""
        with self.write() as s:
            names = [q.name for q in specs]
            s.execute(delete(t.Queue).where((t.Queue.source == "file") | t.Queue.name.in_(names)))
            s.add_all([_row(q, "file") for q in specs])


def _row(q: QueueSpec, source: str) -> t.Queue:
    return t.Queue(name=q.name, team=q.team, priority=q.priority, cpu=q.quota.cpu, memory=q.quota.memory,
                   gpus=q.quota.gpu, max_running=q.quota.jobs, borrowing=q.borrowing, source=source,
                   created_at=time.time(), idle_gpu_action=None if q.idle_gpus == "flag" else q.idle_gpus,
                   max_priority=q.max_priority)


def _spec(r: t.Queue) -> QueueSpec:
    return QueueSpec(name=r.name, team=r.team, priority=r.priority, max_priority=r.max_priority, borrowing=r.borrowing,
                     idle_gpus=r.idle_gpu_action or "flag",
                     quota=Quota(cpu=r.cpu, memory=r.memory, gpu=r.gpus, jobs=r.max_running))
