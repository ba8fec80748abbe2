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
from trainyard.scheduler.preemption import Failures, Releasable, Victims, search
from trainyard.scheduler.quota import Quotas, has_quota, totals


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
        self.totals = tot = {}
        for r in self.running:
            reps = r.replicas
            if len(reps) == 1:
                p = reps[0]
                g = len(p.gpu_ids)
                tot[r.attempt_id] = (p.cpu, p.memory, type_of.get(p.node) if g else None, g)
            else:
                tot[r.attempt_id] = totals(r, type_of)
        self.quotas = Quotas(qmap, self.running, tot)
        self.shares = Shares(cl.cpu_total, cl.mem_total, cl.gpu_cap)
        # cheap gates before an O(nodes) preemption search: how much preemptible work each priority
        # could free per GPU type (None: cores, for CPU-only jobs), and per queue and limit; which
        # queues run borrowed work, and how much
        limited = {name for name, q in self.quotas.queues.items() if has_quota(q)}
        self.borrowing_queues: set[str] = set()
        self.lent: dict = {}  # borrowed room by (queue, GPU type or None for cores), and by type alone
        self.on: dict[str, list] = {}  # node -> attempts that could ever be preempted there
        borrowed = self.quotas.borrowed
        by_team: dict[tuple, list] = {}
        rel: dict[tuple, float] = {}
        qrel: dict[tuple, float] = {}
        on = self.on
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
            lends = r.attempt_id in borrowed
            if lends:
                self.borrowing_queues.add(r.queue)
                for k, v in ((None, cpu), (gtype, gpus)):
                    if v:
                        self.lent[(r.queue, k)] = self.lent.get((r.queue, k), 0) + v
                        self.lent[k] = self.lent.get(k, 0) + v
            if r.preemptible:
                k = (None, r.priority)
                rel[k] = rel.get(k, 0.0) + cpu
                if gtype is not None:
                    k = (gtype, r.priority)
                    rel[k] = rel.get(k, 0.0) + gpus
                if r.queue in limited:  # what lower-priority work could hand back of its queue's quota
                    for k, v in (("cpu", cpu), ("mem", mem), (gtype, gpus), ("*", gpus)):
                        if v:
                            qk = ((r.queue, k), r.priority)
                            qrel[qk] = qrel.get(qk, 0.0) + v
            if r.preemptible or lends:
                for p in r.replicas:
                    lst = on.get(p.node)
                    if lst is None:
                        on[p.node] = [r]
                    elif lst[-1] is not r:
                        lst.append(r)
        self.releasable = Releasable(rel)
        self.queue_releasable = Releasable(qrel)
        for (team, gtype), (cpu, mem, gpus) in by_team.items():
            self.shares.add(team, cpu, mem, gtype, gpus)
        self.out = Plan()
        self.left: list[tuple] = []  # (job, queue, kind, detail) for jobs left pending, in line order
        self.static: dict[tuple, list] = {}
        self.failed: dict[tuple, tuple] = {}  # (shape, types) -> reservation signature it failed under
        self.failed_claim = Failures()
        self.no_reservation: set[tuple] = set()
        self.turned_away: dict[tuple, tuple] = {}  # job class -> (kind, detail) of the first one turned away
        self.epoch = 0  # bumped by each preemption: room coming back may change an earlier answer
        self.failed_preempt = Failures()
        self.failed_quota: dict[tuple, int] = {}
        self.quota_reach: dict[tuple, tuple] = {}
        self.queue_work: dict[str, list] = {}
        self.pots: dict[tuple, list] = {}  # (GPU type, priority, reservations, queue) -> room per node
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
        say.explain(self.out, self.left, self.cl, self.quotas, self.now)
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
        allowed, reach = types, ()
        if not borrowing:
            allowed = quotas.allowed_types(q, job, types, shape)
            if not allowed:
                # inside its queue, priority wins: lower-priority work of the queue may hand its share back
                done, reach = self._quota_preempt(job, q, types, sel, end, shape)
                if done:
                    return None
                if not reach:
                    if q.borrowing and job.preemptible:  # borrowed work must be reclaimable
                        return deferred.append((job, q))
                    return self._turn_away(cls, job, q, "quota", (shape, types))
        key = (shape, allowed)
        if allowed:
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
            others = tuple(t for t in types if t not in allowed)
            if others:
                done, reach = self._quota_preempt(job, q, others, sel, end, shape)
                if done:
                    return None
        hold = allowed + reach  # types it could start on once room frees, quota allowing
        if len(starts) < self.opt.max_reservations and self.searches > 0 and (shape, hold) not in self.no_reservation:
            self.searches -= 1
            found = reserve(self.cl, job, hold, sel, self._release_list(), self.now)
            if found is not None:
                res, t = found
                self.out.reservations.append(res)
                starts.append(res.start if res.start < INF else -INF)
                quotas.admit(q, job, t)  # its queue's share is held with the nodes: later jobs may not take it
                return self.left.append((job, q, "head", res))
            self.no_reservation.add((shape, hold))  # it would not fit even once everything running has ended
        if len(allowed) < len(types) and q.borrowing and job.preemptible:
            return deferred.append((job, q))  # no room on the types inside its quota: borrow the others
        return self._turn_away(cls, job, q, "room" if allowed else "quota", (shape, types))

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
        cl, sig = self.cl, key[-1]
        if cl.soon_any and (not job.gpu or any(cl.soon_g.get(t) for t in allowed)) and not \
                self.failed_claim.covers(job, allowed, sel, sig, (self.epoch,)):
            self.searches -= 1
            found = search(cl, job, allowed, sel, end)
            if found is not None:
                t, picks, _ = found
                for s in picks:
                    cl.claim(s, job.cpu, job.memory, job.gpu, end)
                self._charge(job, q, t)
                self.left.append((job, q, "claim", None))
                return True
            self.failed_claim.add(job, allowed, sel, sig, (self.epoch,))
        reclaim = bool(self.borrowing_queues - {q.name})
        if self.searches <= 0 or not self._could_free(job, q, allowed):
            return False
        # the victims a job may pick depend on its queue only through the borrowed work of that queue
        context = (q.name if q.name in self.borrowing_queues else "",)
        if self.failed_preempt.covers(job, allowed, sel, sig, context) or not self._nodes_could_free(
                job, q, allowed, sig):
            return False
        self.searches -= 1
        victims = self._victims_index()
        # search as if the job had never been preempted, so a failure holds for every job like it
        found = search(cl, job, allowed, sel, end, victims, reclaim)
        last = job.last_preempted_by
        if found is not None and last is not None and any(v.job_id == last for v in found[2]):
            found = search(cl, job, allowed, sel, end, victims, reclaim, spare_job=last)  # never preempt it back
            if found is None:
                return False
        if found is None or not found[2]:
            self.failed_preempt.add(job, allowed, sel, sig, context)
            return False
        self._stop(job, q, found, victims)
        return True

    def _quota_preempt(self, job: PendingJob, q: Queue, types: tuple, sel: tuple, end: float,
                       shape: tuple) -> tuple[bool, tuple]:
        """Inside one queue, priority wins: stop lower-priority work of the queue until the job fits
        its quota (and, if need be, other lower-priority work until it fits on nodes).

        Returns (preempted, types on which the quota could be freed but room is lacking)."""
        pkey = (shape, types, q.name, "quota", job.last_preempted_by)
        if self.searches <= 0 or self.failed_quota.get(pkey, -INF) >= job.priority:
            return False, self.quota_reach.get(pkey, ())
        reach = []
        below = self.queue_releasable.below
        for t in types:
            over = self.quotas.over(q, job, t)
            if not over or any(below((q.name, k), job.priority) + 1e-9 < v for k, v in over.items()):
                continue  # all its lower-priority work together would not hand back enough
            victims = self._victims_index()
            taken, last = victims.taken, job.last_preempted_by
            mine = (r for r in self._queue_work(q.name) if r.priority < job.priority
                    and r.attempt_id not in taken and r.job_id != last)
            self.searches -= 1
            pre = self.quotas.victims_for(q, job, t, mine, self.totals)
            if pre is None:
                continue
            reach.append(t)
            found = search(self.cl, job, (t,), sel, end, victims, False, tuple(pre), spare_job=last)
            if found is not None:
                self._stop(job, q, found, victims)
                return True, ()
            if self.searches <= 0:
                break
        self.failed_quota[pkey] = max(job.priority, self.failed_quota.get(pkey, -INF))
        self.quota_reach[pkey] = tuple(reach)
        return False, tuple(reach)

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

    def _could_free(self, job: PendingJob, q: Queue, allowed: tuple) -> bool:
        """Could all lower-priority work, and all borrowed work of other queues, make room together?"""
        cl, n, below, lent = self.cl, job.replicas, self.releasable.below, self.lent
        if job.gpu:
            return any(cl.gfree.get(t, 0) + cl.soon_g.get(t, 0) + below(t, job.priority)
                       + lent.get(t, 0) - lent.get((q.name, t), 0) >= job.gpu * n for t in allowed)
        return (cl.cpu_free + cl.soon_cpu + below(None, job.priority) + lent.get(None, 0)
                - lent.get((q.name, None), 0) + 1e-9 >= job.cpu * n)

    def _nodes_could_free(self, job: PendingJob, q: Queue, allowed: tuple, sig: tuple) -> bool:
        """Node by node: could free room, stopping room and all the work this job may preempt there
        hold its replicas? An upper bound per (GPU type, priority, reservations), built once a cycle,
        so most futile O(nodes) searches are skipped for O(nodes) arithmetic."""
        c, m, g, n = job.cpu, job.memory, job.gpu, job.replicas
        spread = n > 1 and job.placement == "spread"
        for t in allowed:
            key = (t, job.priority, sig, q.name if q.name in self.borrowing_queues else "")
            pots = self.pots.get(key)
            if pots is None:
                pots = self.pots[key] = self._potentials(t, job.priority, sig, key[3] or None)
            fit = 0
            for pc, pm, pg in pots:
                k = min(int((pc + 1e-9) / c) if c > 0 else n, pm // m if m > 0 else n, pg // g if g > 0 else n)
                if k > 0:
                    fit += 1 if spread else k
                    if fit >= n:
                        return True
        return False

    def _potentials(self, t: str | None, prio: int, sig: tuple, own: str | None) -> list[tuple]:
        out, starts, borrowed, others = [], self.starts, self.quotas.borrowed, bool(self.borrowing_queues - {own})
        for s in (self.cl.typed.get(t, []) if t else self.cl.slots):
            sn = s.soon or (0.0, 0, 0)
            pc, pm, pg = s.cpu + sn[0], s.mem + sn[1], s.g + sn[2]
            r = s.resv
            if r is not None and any(sig[i] for i, st in enumerate(starts) if st == r[0]):
                out.append((min(pc, r[1]), min(pm, r[2]), min(pg, r[3])))  # held: what is left over, no victims
                continue
            for v in self.on.get(s.name, ()):
                if (v.preemptible and v.priority < prio) or (others and v.queue != own and v.attempt_id in borrowed):
                    for p in v.replicas:
                        if p.node == s.name:
                            pc += p.cpu
                            pm += p.memory
                            pg += len(p.gpu_ids)
            out.append((pc, pm, pg))
        return out

    def _queue_work(self, queue: str) -> list[RunningJob]:
        """Preemptible live attempts of one queue, cheapest to stop first."""
        out = self.queue_work.get(queue)
        if out is None:
            v = self._victims_index()
            out = self.queue_work[queue] = sorted(
                (r for r in self.running if r.queue == queue and r.preemptible and not r.stopping), key=v.cost_of)
        return out

    def _victims_index(self) -> Victims:
        if self._victims is None:
            self._victims = Victims(self.cl, self.on, self.quotas.borrowed, self.totals, self.now)
        return self._victims

    def _release_list(self) -> Releases:
        if self._releases is None:
            self._releases = Releases(self.cl, self.running)
            for end, taken in self.admitted:
                for s, c, m, g, _, _ in taken:
                    self._releases.add(end, s, c, m, g, self.now)
        return self._releases
