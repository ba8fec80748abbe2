"""Queue quotas: what each queue uses, whether one more job stays inside, and why not.

A quota bounds what a queue is entitled to. Work beyond it is *borrowed*: it
may run on room nobody else wants now, and it is the first to go when a queue
within its quota needs the room back. Once any queue has a quota, all work of
a queue without one is borrowed too (:attr:`Quotas.guarded`), and only work
inside a quota is guaranteed: priority stops it only for its own team
(:meth:`preemption.Victims.rule`). ``max_running`` is a hard cap. Inside a
queue, priority decides who holds the share: a higher-priority job may stop
lower-priority work of its own queue (:mod:`room`), and the job at the head of
the line holds its share together with its reserved nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from trainyard.scheduler.model import PendingJob, Queue, RunningJob
from trainyard.spec.units import format_memory

EPS = 1e-9
_started_at, _priority, _preemptible = attrgetter("started_at"), attrgetter("priority"), attrgetter("preemptible")
_stopping = attrgetter("stopping")


@dataclass(slots=True, frozen=True)
class Held:
    """What one running attempt holds over all its replicas (a gang runs on one GPU type)."""

    cpu: float
    memory: int
    gpu_type: str | None
    gpus: int


class Usage:
    __slots__ = ("cpu", "mem", "gpus", "running")

    def __init__(self) -> None:
        self.cpu, self.mem, self.gpus, self.running = 0.0, 0, {}, 0

    def add(self, cpu: float, mem: int, gtype: str | None, gpus: int, jobs: int = 1) -> None:
        self.cpu += cpu
        self.mem += mem
        if gpus:
            self.gpus[gtype] = self.gpus.get(gtype, 0) + gpus
        self.running += jobs


def _within(q: Queue, u: Usage, cpu: float, mem: int, gtype: str | None, gpus: int) -> bool:
    if q.cpu is not None and u.cpu + cpu > q.cpu + EPS:
        return False
    if q.memory is not None and u.mem + mem > q.memory:
        return False
    if gpus and q.gpus:
        cap = q.gpus.get(gtype)
        if cap is not None and u.gpus.get(gtype, 0) + gpus > cap:
            return False
        cap = q.gpus.get("*")
        if cap is not None and sum(u.gpus.values()) + gpus > cap:
            return False
    return True


def totals(r: RunningJob, type_of: dict) -> Held:
    """What attempt ``r`` holds; ``type_of`` maps node names to their GPU types."""
    reps = r.replicas
    if len(reps) == 1:
        p = reps[0]
        g = len(p.gpu_ids)
        return Held(p.cpu, p.memory, type_of.get(p.node) if g else None, g)
    g = sum(len(p.gpu_ids) for p in reps)
    return Held(sum(p.cpu for p in reps), sum(p.memory for p in reps),
                type_of.get(reps[0].node) if g and reps else None, g)


def has_quota(q: Queue) -> bool:
    return q.cpu is not None or q.memory is not None or bool(q.gpus)


class Quotas:
    """Per-queue usage for one cycle, from running attempts, updated as jobs are admitted."""

    def __init__(self, queues: dict[str, Queue]) -> None:
        self.queues = queues
        self.use: dict[str, Usage] = {}
        self.borrowed: set[str] = set()  # attempt ids running beyond their queue's quota
        # some queue has a quota: then a quota is a guarantee, and work of a queue without one is borrowed
        # (Kueue: only what is guaranteed is safe from other teams); with none anywhere nothing is guaranteed
        self.guarded = any(has_quota(q) for q in queues.values())
        self._allowed: dict[tuple, tuple] = {}  # (queue, shape) -> (jobs running then, answer)

    def count(self, limited: list[RunningJob], totals: dict[str, Held]) -> None:
        """Count running attempts against their queues: ``limited`` holds the live attempts of queues
        with a quota or a cap on running jobs (only those need their usage). Preempted attempts that
        are stopping hand their share back (their room is still held, and the planner waits for it, so
        the job they were stopped for is inside the quota); other stopping ones (cancelled, drained,
        timed out) count until they exit, since they still run: a cancelled job ignoring SIGTERM ran
        on for its whole grace period outside its queue's quota. The caller has put the ones marked
        borrowed in ``borrowed``."""
        # what counts inside the quota: live work that cannot be preempted, then the highest priority,
        # then the oldest, then stopping work; the rest is borrowed, so a lender reclaims the least
        # important work first (stable sorts on keys read in C, least significant first: one sort on a
        # tuple built by a Python function per attempt costs more)
        limited.sort(key=_started_at)
        limited.sort(key=_priority, reverse=True)  # reverse keeps the order of equal keys
        limited.sort(key=_preemptible)
        limited.sort(key=_stopping)
        # _within and Usage.add, written out: this runs for every attempt of a limited queue, and two
        # calls per attempt cost more than the arithmetic (same sums, in the same order)
        use, queues, borrowed = self.use, self.queues, self.borrowed
        per: dict[str, list] = {}  # queue -> [usage, queue, its GPUs of all types so far]
        for r in limited:
            x = per.get(r.queue)
            if x is None:
                u = use.get(r.queue)
                if u is None:
                    u = use[r.queue] = Usage()
                x = per[r.queue] = [u, queues[r.queue], sum(u.gpus.values())]
            u, q = x[0], x[1]
            h = totals[r.attempt_id]
            cpu, mem, gtype, gpus = h.cpu, h.memory, h.gpu_type, h.gpus
            if r.borrowed is None:
                if (q.cpu is not None and u.cpu + cpu > q.cpu + EPS) or (q.memory is not None and u.mem + mem > q.memory):
                    borrowed.add(r.attempt_id)
                elif gpus and q.gpus:
                    cap = q.gpus.get(gtype)
                    if cap is not None and u.gpus.get(gtype, 0) + gpus > cap:
                        borrowed.add(r.attempt_id)
                    else:
                        cap = q.gpus.get("*")
                        if cap is not None and x[2] + gpus > cap:
                            borrowed.add(r.attempt_id)
            u.cpu += cpu
            u.mem += mem
            if gpus:
                u.gpus[gtype] = u.gpus.get(gtype, 0) + gpus
                x[2] += gpus
            u.running += 1

    def queue(self, name: str) -> Queue:
        q = self.queues.get(name)
        if q is None:  # unknown queues are unlimited rather than stuck; the API rejects them at submit
            q = self.queues[name] = Queue(name=name, team=name)
        return q

    def usage(self, name: str) -> Usage:
        u = self.use.get(name)
        if u is None:
            u = self.use[name] = Usage()
        return u

    def guarantees(self, q: Queue) -> bool:
        """Is a job of ``q`` inside its quota entitled to what it runs on: may it reclaim borrowed work of
        other queues, or stop another queue's work for its priority? Not one of a queue without a quota
        while others have one: all it runs on is borrowed."""
        return not self.guarded or has_quota(q)

    def borrows_all(self, q: Queue, job: PendingJob) -> bool:
        """Does ``job`` borrow all it would run on: a job that may borrow, of a queue without a quota while
        others have one?"""
        return self.guarded and q.borrowing and job.preemptible and not has_quota(q)

    def running_full(self, q: Queue) -> bool:
        return q.max_running is not None and self.usage(q.name).running >= q.max_running

    def allowed_types(self, q: Queue, job: PendingJob, types: tuple, shape: tuple) -> tuple:
        """The GPU types (or (None,)) on which the whole gang stays inside the queue's quota. None for a job
        that may borrow of a queue without a quota while others have one: all it runs on is borrowed, so it
        borrows after the line, as a job beyond its quota does, and takes no room a queue inside its quota
        wants this cycle (to have it reclaimed the next)."""
        if not has_quota(q):
            return () if self.borrows_all(q, job) else types
        u = self.usage(q.name)
        hit = self._allowed.get((q.name, shape))
        if hit is not None and hit[0] == u.running:  # usage only grows with admissions; same count, same answer
            return hit[1]
        n = job.replicas
        out = tuple(t for t in types if _within(q, u, job.cpu * n, job.memory * n, t, job.gpu * n))
        self._allowed[(q.name, shape)] = (u.running, out)
        return out

    def over(self, q: Queue, job: PendingJob, t: str | None) -> dict:
        """How far past each of its queue's limits the whole gang would go on type ``t``."""
        u, n = self.usage(q.name), job.replicas
        out = {}
        if q.cpu is not None and u.cpu + job.cpu * n > q.cpu + EPS:
            out["cpu"] = u.cpu + job.cpu * n - q.cpu
        if q.memory is not None and u.mem + job.memory * n > q.memory:
            out["mem"] = u.mem + job.memory * n - q.memory
        if job.gpu and q.gpus:
            if t in q.gpus and u.gpus.get(t, 0) + job.gpu * n > q.gpus[t]:
                out[t] = u.gpus.get(t, 0) + job.gpu * n - q.gpus[t]
            if "*" in q.gpus and sum(u.gpus.values()) + job.gpu * n > q.gpus["*"]:
                out["*"] = sum(u.gpus.values()) + job.gpu * n - q.gpus["*"]
        return out

    def victims_for(self, q: Queue, job: PendingJob, t: str | None, mine, totals: dict[str, Held]):
        """The cheapest attempts of ``q`` (``mine``: eligible ones, cheapest first) whose share, once
        handed back, lets ``job`` fit the quota on type ``t``; None if even all of them would not."""
        deficit = self.over(q, job, t)
        if not deficit:
            return []
        chosen = []

        def back(r: RunningJob) -> dict:
            h = totals[r.attempt_id]
            cpu, mem, gtype, gpus = h.cpu, h.memory, h.gpu_type, h.gpus
            return {"cpu": cpu, "mem": mem, gtype: gpus, "*": gpus} if gpus else {"cpu": cpu, "mem": mem}

        for r in mine:
            got = back(r)
            if not any(got.get(k, 0) > 0 for k, v in deficit.items() if v > EPS):
                continue  # frees nothing that binds
            chosen.append(r)
            for k in deficit:
                deficit[k] -= got.get(k, 0)
            if all(v <= EPS for v in deficit.values()):
                break
        else:
            return None
        for r in list(reversed(chosen[:-1])):  # drop any that was not needed
            got = back(r)
            if all(v + got.get(k, 0) <= EPS for k, v in deficit.items()):
                chosen.remove(r)
                for k in deficit:
                    deficit[k] += got.get(k, 0)
        return chosen

    def admit(self, q: Queue, job: PendingJob, gtype: str | None) -> None:
        if q.max_running is None and not has_quota(q):
            return  # nothing reads an unlimited queue's usage
        n = job.replicas
        self.usage(q.name).add(job.cpu * n, job.memory * n, gtype, job.gpu * n)

    def describe(self, q: Queue, job: PendingJob, types: list) -> str | None:
        """``queue quota 4/4 A100 GPUs in use`` for the first limit the job would pass, or None."""
        if q.max_running is not None and self.usage(q.name).running >= q.max_running:
            return f"queue {q.name} runs {self.usage(q.name).running}/{q.max_running} jobs"
        if not has_quota(q):
            return None
        u, n = self.usage(q.name), job.replicas
        if q.cpu is not None and u.cpu + job.cpu * n > q.cpu + EPS:
            return f"queue quota {u.cpu:g}/{q.cpu:g} cores in use"
        if q.memory is not None and u.mem + job.memory * n > q.memory:
            return f"queue quota {format_memory(u.mem)}/{format_memory(q.memory)} memory in use"
        if job.gpu and q.gpus:
            total = sum(u.gpus.values())
            if "*" in q.gpus and total + job.gpu * n > q.gpus["*"]:
                return f"queue quota {total}/{q.gpus['*']} GPUs in use"
            over = [t for t in types if t in q.gpus and u.gpus.get(t, 0) + job.gpu * n > q.gpus[t]]
            if over and len(over) == len(types):
                t = over[0]
                return f"queue quota {u.gpus.get(t, 0)}/{q.gpus[t]} {t} GPUs in use"
        return None
