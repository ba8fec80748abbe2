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
from trainyard.scheduler.preemption import Releasable, Victims, search
from trainyard.scheduler.quota import Quotas, totals


@dataclass(slots=True)
class Options:
    max_reservations: int = 1  # jobs at the head of the line that hold nodes
    max_searches: int = 16  # room searches (claims, preemptions) per cycle; each is O(nodes)


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
        type_of = {s.name: s.type for s in cl.slots}
        self.totals = tot = {r.attempt_id: totals(r, type_of) for r in self.running}
        self.quotas = Quotas(qmap, self.running, tot)
        self.shares = Shares(cl.cpu_total, cl.mem_total, cl.gpu_cap)
        by_team: dict[tuple, list] = {}
        # cheap gates before an O(nodes) preemption search: how much preemptible work each priority
        # could free per GPU type (None: cores, for CPU-only jobs), and which queues run borrowed work
        self.releasable = Releasable()
        self.borrowing_queues: set[str] = set()
        borrowed = self.quotas.borrowed
        for r in self.running:
            cpu, mem, gtype, gpus = tot[r.attempt_id]
            acc = by_team.get((r.team, gtype))
            if acc is None:
                acc = by_team[(r.team, gtype)] = [0.0, 0, 0]
            acc[0] += cpu
            acc[1] += mem
            acc[2] += gpus
            if r.stopping:
                continue
            if r.attempt_id in borrowed:
                self.borrowing_queues.add(r.queue)
            if r.preemptible:
                self.releasable.add(None, r.priority, cpu)
                if gtype is not None:
                    self.releasable.add(gtype, r.priority, gpus)
        for (team, gtype), (cpu, mem, gpus) in by_team.items():
            self.shares.add(team, cpu, mem, gtype, gpus)
        self.reclaim: dict[str, bool] = {}
        self.out = Plan()
        self.left: list[tuple] = []  # (job, queue, kind, detail) for jobs left pending, in line order
        self.static: dict[tuple, list] = {}
        self.failed: dict[tuple, tuple] = {}  # (shape, types) -> reservation signature it failed under
        self.failed_claim: set[tuple] = set()
        self.no_reservation: set[tuple] = set()
        self.turned_away: dict[tuple, tuple] = {}  # job class -> (kind, detail) of the first one turned away
        self.epoch = 0  # bumped by each preemption: room coming back may change an earlier answer
        self.failed_preempt: dict[tuple, int] = {}
        self.searches = options.max_searches
        self.starts: list[float] = []  # reservation starts as backfill compares them (-INF: unknown)
        self._victims = self._releases = None
        self.admitted: list[tuple] = []  # releases of jobs admitted this cycle

    def run(self, pending: list[PendingJob]) -> Plan:
        eligible, waiting = [], []
        queue_of = self.quotas.queue
        for job in pending:
            q = queue_of(job.queue)
            if job.not_before is not None and job.not_before > self.now:
                waiting.append((job, q))
            else:
                eligible.append((job, q))
        deferred: list = []
        consider = self._consider
        for job, q, borrowing in fair_order(eligible, self.shares, deferred):
            consider(job, q, borrowing, deferred)
        for job, q in waiting:
            self.left.append((job, q, "backoff", None))
        self._explain()
        return self.out

    # -- one job ---------------------------------------------------------------

    def _consider(self, job: PendingJob, q: Queue, borrowing: bool, deferred: list) -> None:
        sel = tuple(sorted(job.node_selector.items())) if job.node_selector else ()
        shape = (job.cpu, job.memory, job.gpu, job.gpu_types, sel, job.replicas, job.placement)
        starts = self.starts
        end = self.now + job.timeout if job.timeout is not None else INF
        sig = tuple([end > s for s in starts]) if starts else ()
        # A job like one already turned away this cycle meets the same fate: room only shrinks, except
        # when a preemption frees some (the epoch), so skip straight to the same answer.
        cls = (q.name, shape, job.priority, sig, borrowing, job.preemptible, job.last_preempted_by, self.epoch)
        seen = self.turned_away.get(cls)
        if seen is not None:
            return self.left.append((job, q, seen[0], seen[1]))
        types = self.static.get(shape)
        if types is None:
            types = self.static[shape] = self.cl.static_types(job, sel)
        if not types:
            return self._turn_away(cls, job, q, "impossible", (shape, sel))
        quotas = self.quotas
        if q.max_running is not None and quotas.running_full(q):
            return self._turn_away(cls, job, q, "quota", (shape, types))
        allowed = types
        if not borrowing:
            allowed = quotas.allowed_types(q, job, types, shape)
            if not allowed:
                if self._quota_preempt(job, q, types, sel, end, shape):
                    return None
                if q.borrowing and job.preemptible:  # borrowed work must be reclaimable
                    return deferred.append((job, q))
                return self._turn_away(cls, job, q, "quota", (shape, types))
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
            return self._turn_away(cls, job, q, "room", (shape, types))
        if self.searches > 0 and self._make_room(job, q, allowed, sel, end, key + (sig,)):
            return None
        others = tuple(t for t in types if t not in allowed) if len(allowed) < len(types) else ()
        if others and self._quota_preempt(job, q, others, sel, end, shape):
            return None
        if len(starts) < self.opt.max_reservations and self.searches > 0 and key not in self.no_reservation:
            self.searches -= 1
            res = reserve(self.cl, job, allowed, sel, self._release_list(), self.now)
            if res is not None:
                self.out.reservations.append(res)
                starts.append(res.start if res.start < INF else -INF)
                return self.left.append((job, q, "head", res))
            self.no_reservation.add(key)  # it would not fit even once everything running has ended
        if others and q.borrowing and job.preemptible:
            return deferred.append((job, q))  # no room on the types inside its quota: borrow the others
        return self._turn_away(cls, job, q, "room", (shape, types))

    def _turn_away(self, cls: tuple, job: PendingJob, q: Queue, kind: str, detail) -> None:
        self.turned_away[cls] = (kind, detail)
        self.left.append((job, q, kind, detail))

    def _admit(self, job, q, t, taken, end, borrowing) -> None:
        self.out.admissions[job.id] = [Assignment(s.name, ids) for s, _, _, _, ids, _ in taken]
        if borrowing:
            self.out.borrowed.add(job.id)
        self._charge(job, q, t)
        if self._releases is not None:
            for s, c, m, g, _, _ in taken:
                self._releases.add(end, s, c, m, g, self.now)
        else:
            self.admitted.append((end, taken))

    def _charge(self, job: PendingJob, q: Queue, t: str | None) -> None:
        n = job.replicas
        self.quotas.admit(q, job, t)
        self.shares.add(job.team, job.cpu * n, job.memory * n, t, job.gpu * n)

    def _make_room(self, job, q, allowed, sel, end, key) -> bool:
        """Room stopping attempts hand back goes to the first job in line that needs it;
        failing that, the job preempts. Each search is O(nodes), so they are rationed."""
        cl = self.cl
        if cl.soon_any and key not in self.failed_claim and (
                not job.gpu or any(cl.soon_g.get(t) for t in allowed)):
            self.searches -= 1
            found = search(cl, job, allowed, sel, end)
            if found is not None:
                t, picks, _ = found
                for s in picks:
                    cl.claim(s, job.cpu, job.memory, job.gpu, end)
                self._charge(job, q, t)
                self.left.append((job, q, "claim", None))
                return True
            self.failed_claim.add(key)
        reclaim = self.reclaim.get(q.name)
        if reclaim is None:
            reclaim = self.reclaim[q.name] = bool(self.borrowing_queues - {q.name})
        if self.searches <= 0 or not (reclaim or self._could_free(job, allowed)):
            return False
        pkey = key + (job.queue,) if job.last_preempted_by is None else None
        if pkey is not None and self.failed_preempt.get(pkey, -INF) >= job.priority:
            return False
        self.searches -= 1
        victims = self._victims_index()
        found = search(cl, job, allowed, sel, end, victims, reclaim)
        if found is None or not found[2]:
            if pkey is not None:
                self.failed_preempt[pkey] = max(job.priority, self.failed_preempt.get(pkey, -INF))
            return False
        self._stop(job, q, found, victims)
        return True

    def _quota_preempt(self, job: PendingJob, q: Queue, types: tuple, sel: tuple, end: float, shape: tuple) -> bool:
        """Inside one queue, priority wins: stop lower-priority work of the same queue until the job
        fits the quota (and, if need be, other lower-priority work until it fits a node)."""
        pkey = (shape, types, q.name, "quota") if job.last_preempted_by is None else None
        if self.searches <= 0 or (pkey is not None and self.failed_preempt.get(pkey, -INF) >= job.priority):
            return False
        victims = self._victims_index()
        mine = [r for r in self.running if r.queue == q.name and r.preemptible and not r.stopping
                and r.priority < job.priority and r.job_id != job.last_preempted_by
                and r.attempt_id not in victims.taken]
        if mine:
            mine.sort(key=lambda r: victims.cost[r.attempt_id])
            for t in types:
                pre = self.quotas.victims_for(q, job, t, mine, self.totals)
                if pre is None:
                    continue
                self.searches -= 1
                found = search(self.cl, job, (t,), sel, end, victims, False, tuple(pre))
                if found is not None:
                    self._stop(job, q, found, victims)
                    return True
        if pkey is not None:
            self.failed_preempt[pkey] = max(job.priority, self.failed_preempt.get(pkey, -INF))
        return False

    def _stop(self, job: PendingJob, q: Queue, found: tuple, victims: Victims) -> None:
        """Record the preemptions, hold the room they free for ``job``, and say so."""
        cl = self.cl
        t, picks, chosen = found
        for v in chosen:
            victims.taken.add(v.attempt_id)
            if v.preemptible and v.priority < job.priority:
                why = f"preempted by job {job.id} (priority {job.priority} > {v.priority})"
            else:
                why = f"queue {job.queue} needs its quota back from borrowed work (job {job.id})"
            self.out.preemptions.append(Preemption(v.attempt_id, v.job_id, job.id, why))
            self.epoch += 1
            for p in v.replicas:
                if p.node in cl.by_name:
                    cl.add_soon(cl.by_name[p.node], p.cpu, p.memory, len(p.gpu_ids))
        for s in picks:
            cl.claim(s, job.cpu, job.memory, job.gpu, end_of(job, self.now))
        self._charge(job, q, t)
        self.left.append((job, q, "preempting", [v.job_id for v in chosen]))

    def _could_free(self, job: PendingJob, allowed: tuple) -> bool:
        cl, n, below = self.cl, job.replicas, self.releasable.below
        if job.gpu:
            return any(cl.gfree.get(t, 0) + cl.soon_g.get(t, 0) + below(t, job.priority) >= job.gpu * n
                       for t in allowed)
        return cl.cpu_free + cl.soon_cpu + below(None, job.priority) + 1e-9 >= job.cpu * n

    def _victims_index(self) -> Victims:
        if self._victims is None:
            self._victims = Victims(self.cl, self.running, self.quotas.borrowed, self.totals, self.now)
        return self._victims

    def _release_list(self) -> Releases:
        if self._releases is None:
            self._releases = Releases(self.cl, self.running)
            for end, taken in self.admitted:
                for s, c, m, g, _, _ in taken:
                    self._releases.add(end, s, c, m, g, self.now)
        return self._releases

    # -- reasons and positions -----------------------------------------------------

    def _explain(self) -> None:
        out, now, cl = self.out, self.now, self.cl
        reasons, positions = out.reasons, out.positions
        short = say.Shortfalls(cl)
        head = out.reservations[0] if out.reservations else None
        held = [cl.by_name[n] for n in head.nodes] if head else []
        # all but the position depend on (queue, shape, kind), not on the job: built once, reused
        parts: dict[tuple, tuple[str, str]] = {}
        ahead: dict[str, int] = {}
        for job, q, kind, d in self.left:
            qn = q.name
            k = ahead.get(qn, 0)
            ahead[qn] = k + 1
            positions[job.id] = k
            if kind == "room" or kind == "quota":
                late = head is not None and (job.timeout is None or now + job.timeout > head.start)
                pk = (qn, d[0], kind, late)
                pair = parts.get(pk)
                if pair is None:
                    pair = parts[pk] = (short.text(d[0], job, d[1]), self._tail(job, q, d, head, held, late))
                reasons[job.id] = f"{pair[0]}; {say.ahead(k, qn)}{pair[1]}"
            elif kind == "backoff":
                reasons[job.id] = f"{say.backoff(job, now)}; {say.ahead(k, qn)}"
            elif kind == "impossible":
                reasons[job.id] = say.impossible(cl, job, d[1])
            elif kind == "head":
                reasons[job.id] = f"{say.head(d, now)}; {say.ahead(k, qn)}"
            elif kind == "claim":
                reasons[job.id] = f"starting: waiting for stopping jobs to hand back their room; {say.ahead(k, qn)}"
            else:  # preempting
                names = ", ".join(d[:3]) + (", …" if len(d) > 3 else "")
                reasons[job.id] = f"starting: preempting {say.plural(len(d), 'job')} ({names}); {say.ahead(k, qn)}"

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
