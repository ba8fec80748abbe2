"""Queue rules shared by the API and the scheduler: define, list with usage, check a job's queue.

The planner reads :meth:`QueueService.models` every cycle, so the queues are
kept in memory and re-read only when this process changes them.
"""

from __future__ import annotations

from pathlib import Path

from trainyard.errors import InvalidSpec
from trainyard.scheduler.model import Queue
from trainyard.services.cluster import Cluster
from trainyard.services.scheduling import Scheduler
from trainyard.spec.lines import suggestion
from trainyard.spec.queue import QueueSpec, load_queues
from trainyard.spec.records import QueueInfo, QueueUsage
from trainyard.store import Store

DEFAULT = "default"  # always accepted: jobs that name no queue land here, unlimited unless defined


def planner_queue(spec: QueueSpec) -> Queue:
    """The planner's view of a queue (spec sits below the scheduler, so the conversion lives here)."""
    q = spec.quota
    return Queue(name=spec.name, team=spec.team, priority=spec.priority, cpu=q.cpu,
                 memory=q.memory, gpus=dict(q.gpu) if q.gpu is not None else None, max_running=q.jobs,
                 borrowing=spec.borrowing)


class QueueService:
    def __init__(self, store: Store, cluster: Cluster, scheduler: Scheduler) -> None:
        self.store = store
        self.cluster = cluster
        self.scheduler = scheduler
        self._models: list[Queue] | None = None

    def models(self) -> list[Queue]:
        if self._models is None:
            self._models = [planner_queue(q) for q in self.store.queues()]
        return self._models

    def load_file(self, path: Path) -> list[QueueSpec]:
        specs = load_queues(path)
        self.store.load_file_queues(specs)
        self._models = None
        return specs

    def create(self, spec: QueueSpec, *, replace: bool = False) -> QueueInfo:
        self.store.create_queue(spec, replace=replace)
        self._models = None
        self.scheduler.wake()  # a new quota may let jobs start, or hold them back
        return self.get(spec.name)

    def delete(self, name: str) -> None:
        self.store.delete_queue(name)
        self._models = None
        self.scheduler.wake()

    def check(self, name: str) -> None:
        """Refuse a job for a queue nobody defined, once any queue is defined."""
        names = {q.name for q in self.models()}
        if names and name != DEFAULT and name not in names:
            raise InvalidSpec(errors=[{"field": "queue", "line": None, "where": "queue",
                                       "message": f"unknown queue {name!r}{suggestion(name, names | {DEFAULT})} "
                                                  f"(defined: {', '.join(sorted(names | {DEFAULT}))})"}])

    def list(self) -> list[QueueInfo]:
        specs = {q.name: q for q in self.store.queues()}
        counts = self.store.queue_counts()
        for name in counts:
            specs.setdefault(name, QueueSpec(name=name))  # jobs in the implicit default queue
        usage = self._usage()
        return [QueueInfo(queue=q, usage=usage.get(n, QueueUsage()), pending=counts.get(n, {}).get("pending", 0))
                for n, q in sorted(specs.items())]

    def get(self, name: str) -> QueueInfo:
        found = next((q for q in self.list() if q.queue.name == name), None)
        if found is None:
            self.store.get_queue(name)  # raises QueueNotFound
        return found

    def _usage(self) -> dict[str, QueueUsage]:
        live = self.cluster.live()
        gpu_type = {n.name: n.gpu_type or "gpu" for n in self.cluster.nodes(live)}
        out: dict[str, QueueUsage] = {}
        for job, a in live:
            u = out.setdefault(job.queue, QueueUsage())
            u.running += 1
            u.borrowed += bool(a.borrowed)
            r = job.spec.resources
            for rep in a.replicas:
                u.cpu += r.cpu
                u.memory += r.memory or 0
                if rep.gpus:
                    kind = gpu_type.get(rep.node, "gpu")
                    u.gpu[kind] = u.gpu.get(kind, 0) + len(rep.gpus)
        return out
