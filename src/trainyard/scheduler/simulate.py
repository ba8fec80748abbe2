"""A discrete-event simulation of a cluster under a planning policy.

For tests (starvation, fair share, preemption loops) and ``bench/scheduler.py``.
Jobs arrive at their submit time and run for their duration; the policy runs
at every event (arrivals and ends at one instant are one event), its
admissions start at once and its preemptions stop at once (the victim goes
back in line with its work lost). The simulator keeps each node's free room,
so it also checks that no policy ever over-commits a node.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable

from trainyard.scheduler.model import Node, PendingJob, Plan, Queue, ReplicaUse, RunningJob

Policy = Callable[..., Plan]  # (nodes, pending, running, queues, now) -> Plan


@dataclass(slots=True)
class SimJob:
    job: PendingJob
    submit: float
    duration: float


@dataclass
class Outcome:
    started: dict[str, float] = field(default_factory=dict)  # job id -> first start
    finished: dict[str, float] = field(default_factory=dict)
    preempted: int = 0
    cycles: int = 0
    busy: dict[str, float] = field(default_factory=dict)  # "cpu", "gpu" -> resource-seconds allocated
    lost: dict[str, float] = field(default_factory=dict)  # of which thrown away by preemption
    horizon: float = 0.0


class Simulator:
    def __init__(self, nodes: list[Node], queues: list[Queue] = (), policy: Policy | None = None) -> None:
        from trainyard.scheduler.plan import plan
        self.nodes = {n.name: n for n in nodes}
        self.queues = list(queues)
        self.policy = policy or plan
        self.pending: dict[str, PendingJob] = {}
        self.running: dict[str, RunningJob] = {}
        self.jobs: dict[str, SimJob] = {}
        self.ends: list[tuple[float, str]] = []
        self.out = Outcome(busy={"cpu": 0.0, "gpu": 0.0}, lost={"cpu": 0.0, "gpu": 0.0})
        self.now = 0.0
        self._attempts = 0
        self._alloc = [0.0, 0.0]  # cpu, gpus held right now
        self.on_cycle: Callable[["Simulator", Plan], None] | None = None

    def run(self, jobs: list[SimJob], until: float, max_cycles: int = 10**9, tick: float = 0.0) -> Outcome:
        """Run to ``until``. With ``tick``, events closer than that to the last cycle wait for the next
        (a loop whose cycle takes time batches what happened meanwhile)."""
        arrivals = sorted(jobs, key=lambda j: (j.submit, j.job.seq))
        for sj in arrivals:
            self.jobs[sj.job.id] = sj
            if sj.job.submitted_at is None:
                sj.job.submitted_at = sj.submit
        i, last = 0, -float("inf")
        while self.out.cycles < max_cycles:
            t = min(arrivals[i].submit if i < len(arrivals) else float("inf"),
                    self.ends[0][0] if self.ends else float("inf"))
            t = max(t, last + tick)
            if t > until:
                break
            last = t
            self._advance(t)
            while self.ends and self.ends[0][0] <= t:
                _, aid = heapq.heappop(self.ends)
                if aid in self.running:
                    self.out.finished[self.running[aid].job_id] = t
                    self._release(aid)
            while i < len(arrivals) and arrivals[i].submit <= t:
                self.pending[arrivals[i].job.id] = arrivals[i].job
                i += 1
            self.cycle()
        self._advance(until)
        self.out.horizon = until
        return self.out

    def cycle(self) -> Plan:
        p = self.policy(list(self.nodes.values()), list(self.pending.values()), list(self.running.values()),
                        self.queues, self.now)
        self.out.cycles += 1
        for pre in p.preemptions:
            r = self.running.get(pre.attempt_id)
            if r is None:
                continue
            self.out.preempted += 1
            ran = self.now - r.started_at
            self.out.lost["cpu"] += ran * sum(u.cpu for u in r.replicas)
            self.out.lost["gpu"] += ran * sum(len(u.gpu_ids) for u in r.replicas)
            self._release(pre.attempt_id)
            job = self.jobs[r.job_id].job
            job.last_preempted_by = pre.by
            self.pending[job.id] = job
        for job_id, places in p.admissions.items():
            job = self.pending.pop(job_id)
            job.held = None  # the loop forgets a job's hold when it leaves the line, preempted ones come back without
            self._start(job, places)
        for r in p.reservations:  # as the scheduler loop hands them on
            self.pending[r.job_id].held = r
        if self.on_cycle:
            self.on_cycle(self, p)
        return p

    def _start(self, job: PendingJob, places) -> None:
        assert len(places) == job.replicas, f"{job.id}: {len(places)} of {job.replicas} replicas placed"
        uses = []
        for a in places:
            n = self.nodes[a.node]
            assert job.gpu == len(a.gpu_ids) and set(a.gpu_ids) <= set(n.free_gpu_ids), f"{job.id}: bad GPUs"
            if job.gpu:
                assert n.gpu_type in (job.gpu_types or (n.gpu_type,)), f"{job.id}: wrong GPU type"
            assert all(n.labels.get(k) == v for k, v in job.node_selector.items()), f"{job.id}: selector"
            n.cpu_free -= job.cpu
            n.memory_free -= job.memory
            n.free_gpu_ids = [g for g in n.free_gpu_ids if g not in a.gpu_ids]
            assert n.cpu_free >= -1e-6 and n.memory_free >= 0, f"node {n.name} over-committed"
            uses.append(ReplicaUse(a.node, job.cpu, job.memory, list(a.gpu_ids)))
            self._alloc[0] += job.cpu
            self._alloc[1] += job.gpu
        if job.placement == "spread" and job.replicas > 1:
            assert len({a.node for a in places}) == job.replicas, f"{job.id}: spread replicas share a node"
        self._attempts += 1
        aid = f"{job.id}#{self._attempts}"
        sj = self.jobs[job.id]
        self.running[aid] = RunningJob(
            aid, job.id, job.queue, job.team, job.priority, uses, self.now,
            self.now + job.timeout if job.timeout is not None else None, job.preemptible,
            submitted_at=job.submitted_at)
        self.out.started.setdefault(job.id, self.now)
        heapq.heappush(self.ends, (self.now + sj.duration, aid))

    def _release(self, aid: str) -> None:
        r = self.running.pop(aid)
        for u in r.replicas:
            n = self.nodes[u.node]
            n.cpu_free += u.cpu
            n.memory_free += u.memory
            n.free_gpu_ids = sorted(n.free_gpu_ids + u.gpu_ids, key=_gpu_order)
            self._alloc[0] -= u.cpu
            self._alloc[1] -= len(u.gpu_ids)

    def _advance(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            self.out.busy["cpu"] += dt * self._alloc[0]
            self.out.busy["gpu"] += dt * self._alloc[1]
            self.now = t


def _gpu_order(g: str):
    return (0, int(g)) if g.isdigit() else (1, g)
