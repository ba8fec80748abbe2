"""The planner: cluster state in, decisions out. Pure: no I/O, no clock, no store.

One cycle, in admission order (:mod:`fairshare`: priority, then dominant
share per team, then submit time):

1. a job whose gang fits now, inside its queue's quota, is admitted
   (:mod:`cluster`: best-fit, whole gang or nothing);
2. a job over its quota is deferred to the end of its priority level and may
   then borrow idle room (:mod:`quota`);
3. a job that does not fit first claims room that stopping attempts will hand
   back, else preempts lower-priority or borrowed work (:mod:`preemption`);
4. the first job still blocked gets a reservation, and everyone after it only
   backfills around it (:mod:`backfill`);
5. every job left pending gets a position in its queue and a reason
   (:mod:`reasons`).

Gangs never hold half their room across cycles, so two big gangs cannot
deadlock: one gets the reservation, drains its nodes and starts whole.

Cost is O(P log P + N + R) to set up (P pending, N nodes, R running replicas)
plus, per job, a bucket lookup; a job whose shape already failed this cycle
is rejected in O(1), so a full cluster with 10,000 waiting jobs is cheap.
Preemption searches are O(N) each and capped per cycle.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

from trainyard.scheduler import reasons as say
from trainyard.scheduler.backfill import Releases, reserve
from trainyard.scheduler.cluster import Cluster, end_of
from trainyard.scheduler.fairshare import Shares, fair_order
from trainyard.scheduler.model import (INF, Assignment, Node, PendingJob, Plan, Preemption, Queue,
                                       RunningJob, default_queue)
from trainyard.scheduler.preemption import Victims, search
from trainyard.scheduler.quota import Quotas


@dataclass(slots=True)
class Options:
    max_reservations: int = 1  # jobs at the head of the line that hold nodes
    max_preemption_searches: int = 64  # per cycle; each is O(nodes)


def plan(nodes: list[Node], pending: list[PendingJob], running: list[RunningJob] = (),
         queues: list[Queue] = (), now: float = 0.0, options: Options | None = None) -> Plan:
    """Decide which pending jobs start where, what to preempt, and why the rest wait."""
    # A cycle allocates ~10 short-lived objects per job; with the collector on, each young-generation
    # pass also walks every pending job, which costs more than the planning itself.
    was = gc.isenabled()
    gc.disable()
    try:
        return _Cycle(nodes, running, queues, now, options or Options()).run(pending)
    finally:
        if was:
            gc.enable()


class _Cycle:
    def __init__(self, nodes, running, queues, now, options) -> None:
        self.now, self.opt, self.running = now, options, list(running)
        self.cl = cl = Cluster(nodes)
        for r in self.running:
            if r.stopping:
                for p in r.replicas:
                    if p.node in cl.by_name:
                        cl.add_soon(cl.by_name[p.node], p.cpu, p.memory, len(p.gpu_ids))
        qmap = {q.name: q for q in queues} or {"default": default_queue()}
        self.quotas = Quotas(qmap, self.running, lambda name: cl.by_name[name].type if name in cl.by_name else None)
        self.shares = Shares(cl.cpu_total, cl.mem_total, cl.gpu_cap)
        for r in self.running:
            cpu, mem, gtype, gpus = self.quotas.totals(r)
            self.shares.add(r.team, cpu, mem, gtype, gpus)
        live = [r for r in self.running if not r.stopping]
        self.min_victim_prio = min((r.priority for r in live if r.preemptible), default=INF)
        self.borrowing_queues = {r.queue for r in live if r.attempt_id in self.quotas.borrowed}
        self.out = Plan()
        self.left: list[tuple] = []  # (job, queue, kind, detail) for jobs left pending, in line order
        self.static: dict[tuple, list] = {}
        self.failed: dict[tuple, tuple] = {}  # (shape, types) -> reservation signature it failed under
        self.failed_claim: set[tuple] = set()
        self.failed_preempt: dict[tuple, int] = {}
        self.searches = options.max_preemption_searches
        self.starts: list[float] = []  # reservation starts as backfill compares them (-INF: unknown)
        self._victims = self._releases = None
        self.admitted: list[tuple] = []  # releases of jobs admitted this cycle

    def run(self, pending: list[PendingJob]) -> Plan:
        eligible, waiting = [], []
        for job in pending:
            q = self.quotas.queue(job.queue)
            if job.not_before is not None and job.not_before > self.now:
                waiting.append((job, q))
            else:
                eligible.append((job, q))
        deferred: list = []
        for job, q, borrowing in fair_order(eligible, self.shares, deferred):
            self._consider(job, q, borrowing, deferred)
        for job, q in waiting:
            self.left.append((job, q, "backoff", None))
        self._explain()
        return self.out

    # -- one job ---------------------------------------------------------------

    def _consider(self, job: PendingJob, q: Queue, borrowing: bool, deferred: list) -> None:
        sel = tuple(sorted(job.node_selector.items())) if job.node_selector else ()
        shape = (job.cpu, job.memory, job.gpu, job.gpu_types, sel, job.replicas, job.placement)
        types = self.static.get(shape)
        if types is None:
            types = self.static[shape] = self.cl.static_types(job, sel)
        if not types:
            return self.left.append((job, q, "impossible", (shape, sel)))
        quotas = self.quotas
        if q.max_running is not None and quotas.running_full(q):
            return self.left.append((job, q, "quota", (shape, types)))
        allowed = types
        if not borrowing:
            allowed = quotas.allowed_types(q, job, types)
            if not allowed:
                if q.borrowing and job.preemptible:  # borrowed work must be reclaimable
                    return deferred.append((job, q))
                return self.left.append((job, q, "quota", (shape, types)))
        end = self.now + job.timeout if job.timeout is not None else INF
        starts = self.starts
        sig = tuple([end > s for s in starts]) if starts else ()
        key = (shape, allowed)
        f = self.failed.get(key)
        # constraints only tighten during a cycle: a failure under fewer or looser reservations still holds
        if f is None or (f and not all(a <= b for a, b in zip(f, sig))):
            for t in allowed:
                taken = self.cl.place(job, t, sel, end)
                if taken:
                    return self._admit(job, q, t, taken, end, borrowing)
            self.failed[key] = sig
        if borrowing:
            return self.left.append((job, q, "room", (shape, types)))
        if self.cl.soon_any or job.priority > self.min_victim_prio or self.borrowing_queues:
            key = key + (sig,)
            if self._claim(job, q, allowed, sel, end, key) or self._preempt(job, q, allowed, sel, end, key):
                return None
        if len(starts) < self.opt.max_reservations:
            res = reserve(self.cl, job, allowed, sel, self._release_list(), self.now)
            if res is not None:
                self.out.reservations.append(res)
                starts.append(res.start if res.start < INF else -INF)
                return self.left.append((job, q, "head", res))
        return self.left.append((job, q, "room", (shape, types)))

    def _admit(self, job, q, t, taken, end, borrowing) -> None:
        self.out.admissions[job.id] = [Assignment(s.name, ids) for s, _, _, _, ids, _ in taken]
        if borrowing:
            self.out.borrowed.add(job.id)
        self._charge(job, q, t)
        for s, c, m, g, _, _ in taken:
            if self._releases is not None:
                self._releases.add(end, s, c, m, g, self.now)
            else:
                self.admitted.append((end, s, c, m, g))

    def _charge(self, job: PendingJob, q: Queue, t: str | None) -> None:
        n = job.replicas
        self.quotas.admit(q, job, t)
        self.shares.add(job.team, job.cpu * n, job.memory * n, t, job.gpu * n)

    def _claim(self, job, q, allowed, sel, end, key) -> bool:
        """Room that stopping attempts hand back goes to the first job in line that needs it."""
        if not self.cl.soon_any or key in self.failed_claim:
            return False
        found = search(self.cl, job, allowed, sel, end)
        if found is None:
            self.failed_claim.add(key)
            return False
        t, picks, _ = found
        for s in picks:
            self.cl.claim(s, job.cpu, job.memory, job.gpu, end)
        self._charge(job, q, t)
        self.left.append((job, q, "claim", None))
        return True

    def _preempt(self, job, q, allowed, sel, end, key) -> bool:
        reclaim = any(b != job.queue for b in self.borrowing_queues)
        if self.searches <= 0 or not (job.priority > self.min_victim_prio or reclaim):
            return False
        pkey = key + (job.queue,) if job.last_preempted_by is None else None
        if pkey is not None and self.failed_preempt.get(pkey, -INF) >= job.priority:
            return False
        self.searches -= 1
        victims = self._victims_index()
        found = search(self.cl, job, allowed, sel, end, victims, reclaim)
        if found is None or not found[2]:
            if pkey is not None:
                self.failed_preempt[pkey] = max(job.priority, self.failed_preempt.get(pkey, -INF))
            return False
        t, picks, chosen = found
        for v in chosen:
            victims.taken.add(v.attempt_id)
            if v.attempt_id in self.quotas.borrowed and not (v.preemptible and v.priority < job.priority):
                why = f"queue {job.queue} needs its quota back from borrowed work (job {job.id})"
            else:
                why = f"preempted by job {job.id} (priority {job.priority} > {v.priority})"
            self.out.preemptions.append(Preemption(v.attempt_id, v.job_id, job.id, why))
            for p in v.replicas:
                if p.node in self.cl.by_name:
                    self.cl.add_soon(self.cl.by_name[p.node], p.cpu, p.memory, len(p.gpu_ids))
        for s in picks:
            self.cl.claim(s, job.cpu, job.memory, job.gpu, end)
        self._charge(job, q, t)
        self.left.append((job, q, "preempting", [v.job_id for v in chosen]))
        return True

    def _victims_index(self) -> Victims:
        if self._victims is None:
            self._victims = Victims(self.cl, self.running, self.quotas.borrowed, self.now)
        return self._victims

    def _release_list(self) -> Releases:
        if self._releases is None:
            self._releases = Releases(self.cl, self.running)
            for end, s, c, m, g in self.admitted:
                self._releases.add(end, s, c, m, g, self.now)
        return self._releases

    # -- reasons and positions -----------------------------------------------------

    def _explain(self) -> None:
        out, now, cl = self.out, self.now, self.cl
        short = say.Shortfalls(cl)
        head = out.reservations[0] if out.reservations else None
        held = [cl.by_name[n] for n in head.nodes] if head else []
        tails: dict[tuple, str] = {}  # the queue-limit and reservation parts depend on shape, not on the job
        ahead: dict[str, int] = {}
        for job, q, kind, d in self.left:
            k = ahead.get(q.name, 0)
            ahead[q.name] = k + 1
            out.positions[job.id] = k
            line = say.ahead(k, q.name)
            if kind == "backoff":
                out.reasons[job.id] = f"{say.backoff(job, now)}; {line}"
            elif kind == "impossible":
                out.reasons[job.id] = say.impossible(cl, job, d[1])
            elif kind == "head":
                out.reasons[job.id] = f"{say.head(d, now)}; {line}"
            elif kind == "claim":
                out.reasons[job.id] = f"starting: waiting for stopping jobs to hand back their room; {line}"
            elif kind == "preempting":
                names = ", ".join(d[:3]) + (", …" if len(d) > 3 else "")
                out.reasons[job.id] = f"starting: preempting {say.plural(len(d), 'job')} ({names}); {line}"
            else:
                late = head is not None and (job.timeout is None or now + job.timeout > head.start)
                tk = (q.name, d[0], late)
                tail = tails.get(tk)
                if tail is None:
                    tail = tails[tk] = self._tail(job, q, d, head, held, late)
                out.reasons[job.id] = f"{short.text(d[0], job, d[1])}; {line}{tail}"

    def _tail(self, job: PendingJob, q: Queue, d: tuple, head, held: list, late: bool) -> str:
        parts = []
        limit = self.quotas.describe(q, job, d[1])
        if limit:
            parts.append(limit if q.borrowing and job.preemptible else limit + " (borrowing off)")
        shape, types = d
        sel = shape[4]
        if head is not None and any(self.cl.holds(s, job, t, sel) for s in held for t in types):
            parts.append(say.behind(head, job, self.now))
        return "".join("; " + p for p in parts)
