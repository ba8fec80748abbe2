"""Reference policies the benchmark and tests measure :func:`plan` against. Not used by the server.

All take the planner's inputs and return a :class:`Plan`, ignore priorities,
quotas and fair share, never preempt or reserve, and place gangs whole on one
GPU type (the same rules the planner follows, so the comparison is fair).

- :func:`first_come`: submit order, first fit; a job that does not fit waits
  and later ones may pass it.
- :func:`first_fit_decreasing`: largest jobs first, first fit: the classic
  bin-packing heuristic, a strong baseline for utilisation.
- :func:`best_fit_decreasing`: largest jobs first, each replica on the node it
  leaves the least room on (GPUs, then cores, then memory): packs tighter than
  first fit in node order, so whole nodes stay free for the next large job.
"""

from __future__ import annotations

from trainyard.scheduler.model import Assignment, Node, PendingJob, Plan


def first_come(nodes: list[Node], pending: list[PendingJob], running=(), queues=(), now: float = 0.0) -> Plan:
    return _greedy(nodes, sorted(pending, key=lambda j: j.seq), now)


def first_fit_decreasing(nodes: list[Node], pending: list[PendingJob], running=(), queues=(),
                         now: float = 0.0) -> Plan:
    return _greedy(nodes, sorted(pending, key=_size), now)


def best_fit_decreasing(nodes: list[Node], pending: list[PendingJob], running=(), queues=(),
                        now: float = 0.0) -> Plan:
    return _greedy(nodes, sorted(pending, key=_size), now, best=True)


def _size(j: PendingJob) -> tuple:
    return (-j.gpu * j.replicas, -j.cpu * j.replicas, -j.memory * j.replicas, j.seq)


def _fits(f: list, job: PendingJob, t) -> bool:
    n = f[3]
    return (f[0] + 1e-9 >= job.cpu and f[1] >= job.memory and len(f[2]) >= job.gpu
            and (not job.gpu or (n.gpu_type == t if t else (not job.gpu_types or n.gpu_type in job.gpu_types)))
            and all(n.labels.get(k) == v for k, v in job.node_selector.items()))


def _greedy(nodes: list[Node], order: list[PendingJob], now: float, best: bool = False) -> Plan:
    free = [[n.cpu_free, n.memory_free, list(n.free_gpu_ids), n] for n in nodes]
    out = Plan()
    failed: set[tuple] = set()
    room = sum(f[0] for f in free)
    for job in order:
        if job.not_before is not None and job.not_before > now:
            continue
        key = (job.cpu, job.memory, job.gpu, job.gpu_types, tuple(sorted(job.node_selector.items())),
               job.replicas, job.placement)
        if key in failed or room + 1e-9 < job.cpu * job.replicas:
            out.reasons[job.id] = "does not fit"
            continue
        taken, t = [], None
        for _ in range(job.replicas):
            fits = (f for f in free if _fits(f, job, t) and not (
                job.placement == "spread" and any(f is x for x, _ in taken)))
            spot = min(fits, key=_left, default=None) if best else next(fits, None)
            if spot is None:
                break
            t = spot[3].gpu_type if job.gpu else None
            ids = spot[2][:job.gpu]
            del spot[2][:job.gpu]
            spot[0] -= job.cpu
            spot[1] -= job.memory
            taken.append((spot, ids))
        if len(taken) < job.replicas:
            for spot, ids in reversed(taken):
                spot[0] += job.cpu
                spot[1] += job.memory
                spot[2][0:0] = ids
            failed.add(key)
            out.reasons[job.id] = "does not fit"
            continue
        room -= job.cpu * job.replicas
        out.admissions[job.id] = [Assignment(spot[3].name, ids) for spot, ids in taken]
    return out


def _left(f: list) -> tuple:
    """What a node has free (GPUs, cores, memory): the best fit is the node with the least."""
    return (len(f[2]), f[0], f[1])
