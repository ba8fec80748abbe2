"""What runs where: live attempts with their jobs, and the engine's nodes with what they hold.

Shared by the scheduler loop (every cycle), the queues (usage) and the API (nodes),
so it sits below all of them and needs none of them.
"""

from __future__ import annotations

from trainyard.engines.base import Engine
from trainyard.services.cordons import Cordons
from trainyard.spec.records import AttemptInfo, JobInfo, NodeInfo
from trainyard.store import Store

Live = list[tuple[JobInfo, AttemptInfo]]


class Cluster:
    def __init__(self, store: Store, engine: Engine, cordons: Cordons | None = None) -> None:
        self.store = store
        self.engine = engine
        self.cordons = cordons or Cordons(store)
        self._jobs: dict[str, JobInfo] = {}  # live jobs as submitted; spec, queue and priority never change

    def live(self, active: list[AttemptInfo] | None = None) -> Live:
        """Every starting or running attempt (``active``, read here if not given) with its job
        (as submitted: spec, queue, priority)."""
        active = self.store.active_attempts() if active is None else active
        missing = [a.job_id for a in active if a.job_id not in self._jobs]
        if missing:
            self._jobs.update((j.id, j) for j in self.store.get_jobs(missing))
        if len(self._jobs) > 4 * len(active) + 1000:  # forget finished jobs now and then
            keep = {a.job_id for a in active}
            self._jobs = {k: v for k, v in self._jobs.items() if k in keep}
        return [(self._jobs[a.job_id], a) for a in active]

    def nodes(self, live: Live | None = None) -> list[NodeInfo]:
        """The engine's nodes with what live attempts (default: :meth:`live`) hold on each, and their cordons."""
        cordons = self.cordons.current()
        nodes = {n.name: n.fresh(cordon=cordons.get(n.name)) for n in self.engine.nodes()}
        for job, a in self.live() if live is None else live:  # every scheduler cycle: thousands, kept lean
            r = job.spec.resources
            single = len(a.replicas) == 1
            for rep in a.replicas:
                node = nodes.get(rep.node)
                if node is None or rep.status.is_terminal():
                    continue
                node.cpu_used += r.cpu
                node.memory_used += r.memory or 0
                if rep.gpus:
                    node.gpus_used += rep.gpus
                    node.gpu_holders.update(dict.fromkeys(rep.gpus, job.id))
                if single:
                    node.attempts += 1
            if not single:  # a gang counts once on each node it has a live replica on
                for name in {rep.node for rep in a.replicas if not rep.status.is_terminal()}:
                    if (node := nodes.get(name)) is not None:
                        node.attempts += 1
        return list(nodes.values())
