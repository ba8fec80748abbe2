"""Backfill: a reservation for the job at the head of the line, and gaps for the rest.

When the first job in line cannot start, find the earliest time T at which
enough of the nodes that could hold it will be free, counting each running
attempt as ending at its timeout (stopping ones now, ones without a timeout
last of all), and hold those nodes for it. Until T, other work may start on a
held node only if its own timeout proves it ends by T, or if it fits in what
the node has left over beyond the head job's share at T.

So held nodes only drain: next cycle T is no later, and the head's wait is
bounded by the timeouts of the work already on its nodes. When that work has
no timeout, T is unknown and no one can prove to end before it, so only the
left-over room is usable: the nodes drain as their work finishes.

A job keeps the nodes of its last reservation (``PendingJob.held``) while every
one of them can still take it and its start on them is known: a node that frees
elsewhere goes to the line, not to the hold. Chosen afresh each cycle, a hold
took every whole node the moment it freed, since a free node is the soonest
start there is. Those are exactly the nodes an 8-GPU job needs: on the busy
simulated day (``bench/scheduler.py``) the 8-GPU class waited 7× as long as
under first-come, while the gangs holding the nodes started no sooner. It keeps
them after a spell without a hold too (another job was first in line), though
longer work may have started on them meanwhile: looking afresh then, or whenever
the kept start is over two hours later than the soonest, lost most of the gain
(bench/RESULTS.md, session 15).
"""

from __future__ import annotations

from operator import attrgetter
from typing import NamedTuple

from trainyard.scheduler.cluster import EPS, Cluster, Slot
from trainyard.scheduler.model import INF, PendingJob, Reservation, RunningJob


class Release(NamedTuple):
    """Room that comes back on one node when one replica ends."""

    end: float  # when (INF: no timeout says)
    started: float  # ties on ``end``: the oldest first
    slot: Slot
    cpu: float
    memory: int
    gpus: int


_new = tuple.__new__  # builds a NamedTuple without the Python-level call its constructor costs
_end_then_start = attrgetter("end", "started")


class Releases:
    """When room comes back, from running and just-admitted work."""

    def __init__(self, cl: Cluster, running: list[RunningJob], now: float) -> None:
        self.cl, self.running, self.now = cl, running, now
        self.added: list[Release] = []  # work admitted this cycle, in order

    def add(self, end: float, s: Slot, c: float, m: int, g: int, now: float) -> None:
        self.added.append(Release(end, now, s, c, m, g))

    def ordered(self, nodes: dict) -> list[Release]:
        """What comes back on ``nodes``, soonest first; the same end: the oldest first, then in input
        order. Only the nodes a reservation could use: the head of the line is usually a gang of one
        GPU type, and every replica of every attempt costs a tuple and a place in the sort."""
        out, slot, now = [], self.cl.by_name.get, self.now
        names = {s.name for s in nodes}
        for r in self.running:
            if r.stopping:
                continue  # already counted as room coming back now (Slot.soon)
            end = None
            for p in r.replicas:
                if p.node in names:
                    if end is None:  # past its timeout but not gone yet (a grace period): it ends any moment
                        end = max(r.expected_end, now) if r.expected_end is not None else INF
                    out.append(_new(Release, (end, r.started_at, slot(p.node), p.cpu, p.memory, len(p.gpu_ids))))
        out.extend(x for x in self.added if x.slot in nodes)
        out.sort(key=_end_then_start)
        return out


def _count(v: list, c: float, m: int, g: int, spread: bool) -> int:
    k = min(int((v[0] + EPS) / c) if c > 0 else 1 << 30, v[1] // m if m > 0 else 1 << 30,
            v[2] // g if g > 0 else 1 << 30)
    return min(k, 1) if spread else max(k, 0)


def _soonest(job: PendingJob, match: list[Slot], releases: Releases, now: float) -> tuple[float, dict] | None:
    """When the whole of ``job`` could start on ``match`` at the soonest, and the room each node would
    have then; None if it would not fit even once all their work has ended."""
    c, m, g, n = job.cpu, job.memory, job.gpu, job.replicas
    spread = n > 1 and job.placement == "spread"
    free, total = {}, 0
    for s in match:
        sn = s.soon or (0.0, 0, 0)
        v = free[s] = [s.cpu + sn[0], s.mem + sn[1], s.g + sn[2]]
        total += _count(v, c, m, g, spread)
    if total >= n:
        return now, free
    for rel in releases.ordered(free):
        v = free.get(rel.slot)
        if v is None:
            continue
        before = _count(v, c, m, g, spread)
        v[0] += rel.cpu
        v[1] += rel.memory
        v[2] += rel.gpus
        total += _count(v, c, m, g, spread) - before
        if total >= n:
            return rel.end, free
    return None


def _kept(cl: Cluster, job: PendingJob, types: list, sel: tuple, releases: Releases,
          now: float) -> tuple[str | None, float, dict] | None:
    """The nodes of ``job``'s last reservation, if each may still hold it (its type, labels, no other
    hold this cycle) and its start there is known; else None, and it looks afresh."""
    names = set(job.held.nodes)
    for t in types:
        match = [s for s in cl.holders(job, t, sel) if s.name in names and s.resv is None]
        if len(match) == len(names):
            found = _soonest(job, match, releases, now)
            return (t, *found) if found is not None and found[0] < INF else None
    return None


def reserve(cl: Cluster, job: PendingJob, types: list, sel: tuple, releases: Releases,
            now: float) -> tuple[Reservation, str | None] | None:
    """Hold the nodes where ``job`` can start soonest, and say on which GPU type; None if it
    could never fit them."""
    c, m, g, n = job.cpu, job.memory, job.gpu, job.replicas
    spread = n > 1 and job.placement == "spread"
    best = _kept(cl, job, types, sel, releases, now) if job.held else None
    if best is None:
        for t in types:
            match = [s for s in cl.holders(job, t, sel) if s.resv is None]
            found = _soonest(job, match, releases, now) if match else None
            if found is not None and (best is None or found[0] < best[1]):
                best = (t, *found)
    if best is None:
        return None
    t, start, free = best
    rows = sorted(((_count(v, c, m, g, spread), s.name, s) for s, v in free.items()), key=lambda x: (-x[0], x[1]))
    inner = start if start < INF else -INF  # unknown start: nobody can prove they end before it
    left, held = n, []
    for k, _, s in rows:
        if left <= 0 or k <= 0:
            break
        use = min(k, left)
        left -= use
        v = free[s]
        s.resv = [inner, v[0] - use * c, v[1] - use * m, v[2] - use * g]
        held.append(s.name)
    return Reservation(job.id, held, start), t
