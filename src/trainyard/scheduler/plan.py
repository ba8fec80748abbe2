"""The planner: cluster state in, decisions out. Pure: no I/O, no clock, no store.

One cycle, in admission order (:mod:`fairshare`: priority, then dominant
share per team, then submit time; a job waiting past ``fair_share_wait`` goes
first within its priority):

1. a job whose gang fits now, inside its queue's quota, is admitted
   (:mod:`cluster`: best fit, whole gang or nothing);
2. a job over its quota may preempt lower-priority work of its own queue, or
   else is deferred until every job inside a quota has been considered, and
   may then borrow idle room (:mod:`quota`);
3. a job that does not fit claims room that stopping attempts will hand back,
   or else preempts lower-priority or borrowed work (:mod:`room`,
   :mod:`preemption`);
4. the first job still blocked gets a reservation, and everyone after it
   only backfills around it (:mod:`backfill`);
5. every job left pending gets a position in its queue and a reason
   (:mod:`reasons`).

Gangs never hold half their room across cycles, so two big gangs cannot
deadlock: one gets the reservation, drains its nodes and starts whole.

Cost: O(N + R + P log P) to set up (N nodes, R running attempts, P pending),
then per job a hash lookup when a job like it was already turned away this
cycle (room only shrinks within a cycle), else a bucket scan; O(N) room
searches for preemption are rationed per cycle and guarded by cheap bounds.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

from trainyard.scheduler import reasons as say
from trainyard.scheduler.backfill import Releases, reserve
from trainyard.scheduler.cluster import Cluster
from trainyard.scheduler.fairshare import Shares, fair_order
from trainyard.scheduler.model import INF, Assignment, Node, PendingJob, Plan, Queue, RunningJob, default_queue
from trainyard.scheduler.quota import Quotas, has_quota, totals
from trainyard.scheduler.room import Rooms


@dataclass(slots=True)
class Options:
    max_reservations: int = 1  # jobs at the head of the line that hold nodes
    max_searches: int = 16  # room searches (claims, preemptions) per cycle; each is O(nodes)
    # a job waiting longer than this goes ahead of fair share within its priority (None: never)
    fair_share_wait: float | None = 4 * 3600.0


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
        self.quotas = Quotas({q.name: q for q in queues} or {"default": default_queue()})
        self.shares = Shares(cl.cpu_total, cl.mem_total, cl.gpu_cap)
        victims = self._survey()
        borrowing_queues: set[str] = set()
        lent: dict = {}
        borrowed, tot = self.quotas.borrowed, self.totals
        for r in self.running if borrowed else ():
            if r.attempt_id in borrowed and r.preemptible and not r.stopping:
                cpu, mem, gtype, gpus = tot[r.attempt_id]
                borrowing_queues.add(r.queue)
                for k, v in ((None, cpu), (gtype, gpus)):
                    if v:
                        lent[(r.queue, k)] = lent.get((r.queue, k), 0) + v
                        lent[k] = lent.get(k, 0) + v
        self.rooms = Rooms(self, borrowing_queues, lent, *victims)
        self.out = Plan()
        self.left: list[tuple] = []  # (job, queue, kind, detail) for jobs left pending, in line order
        self.shapes: dict[tuple, tuple] = {}  # shape -> (id, GPU types some node could ever hold it on)
        self.failed: dict[tuple, tuple] = {}  # (shape, types) -> reservation signature it failed under
        self.no_reservation: set[tuple] = set()
        self.turned_away: dict[tuple, tuple] = {}  # job class -> (kind, detail) of the first one turned away
        self.deferrable: dict[tuple, int] = {}  # job class -> quota searches run when one was deferred
        self.epoch = 0  # bumped by each preemption: room coming back may change an earlier answer
        self.searches = options.max_searches
        self.starts: list[float] = []  # reservation starts as backfill compares them (-INF: unknown)
        self._releases = None
        self.admitted: list[tuple] = []  # releases of jobs admitted this cycle

    def _survey(self) -> tuple[dict, dict, dict]:
        """One pass over the running attempts for all the cycle needs of them: their totals, their
        teams' shares, the room of stopping ones, what counts against quotas, and what each priority
        (and each limited queue) could hand back if preempted, and where. There are thousands, their
        objects spread over memory, so every extra pass costs; this is the only full one."""
        cl, quotas, borrowed = self.cl, self.quotas, self.quotas.borrowed
        type_of = {s.name: s.type for s in cl.slots}
        self.totals = tot = {}
        by_team: dict[tuple, list] = {}
        limits: dict[str, tuple] = {}  # queue -> (has a quota, has a quota or a cap on running jobs)
        limited: list[RunningJob] = []
        # Victims' room is summed per priority (and per queue and priority in limited queues), in running
        # order, so each bound is the same float whichever way it is asked for.
        by_prio: dict[int, list] = {}  # priority -> [cores, {GPU type: GPUs}]
        by_queue: dict[tuple, list] = {}  # (queue, priority) -> [cores, memory, {GPU type: GPUs}, GPUs]
        on: dict[str, list] = {}  # node -> attempts there that might be preempted, in running order
        for r in self.running:
            reps, aid = r.replicas, r.attempt_id
            if len(reps) == 1:
                p = reps[0]
                g = len(p.gpu_ids)
                t = (p.cpu, p.memory, type_of.get(p.node) if g else None, g)
            else:
                t = totals(r, type_of)
            tot[aid] = t
            cpu, mem, gtype, gpus = t
            acc = by_team.get((r.team, gtype))
            if acc is None:
                acc = by_team[(r.team, gtype)] = [0.0, 0, 0]
            acc[0] += cpu
            acc[1] += mem
            acc[2] += gpus
            if r.borrowed:
                borrowed.add(aid)
            if r.stopping:  # its room comes back soon; its share is handed back, and it is no victim
                for p in reps:
                    if p.node in cl.by_name:
                        cl.add_soon(cl.by_name[p.node], p.cpu, p.memory, len(p.gpu_ids))
                continue
            lim = limits.get(r.queue)
            if lim is None:
                q = quotas.queue(r.queue)
                lim = limits[r.queue] = (has_quota(q), has_quota(q) or q.max_running is not None)
            if lim[1]:
                limited.append(r)
            if not r.preemptible:  # never a victim, whatever it borrowed
                continue
            prio = r.priority
            a = by_prio.get(prio)
            if a is None:
                a = by_prio[prio] = [0.0, {}]
            a[0] += cpu
            if gtype is not None:
                a[1][gtype] = a[1].get(gtype, 0.0) + gpus
            if lim[0]:
                qa = by_queue.get((r.queue, prio))
                if qa is None:
                    qa = by_queue[(r.queue, prio)] = [0.0, 0.0, {}, 0.0]
                qa[0] += cpu
                qa[1] += mem
                if gpus:
                    qa[2][gtype] = qa[2].get(gtype, 0.0) + gpus
                    qa[3] += gpus
            for p in reps:
                lst = on.get(p.node)
                if lst is None:
                    on[p.node] = [r]
                elif lst[-1] is not r:
                    lst.append(r)
        quotas.count(limited, tot)
        for (team, gtype), (cpu, mem, gpus) in by_team.items():
            self.shares.add(team, cpu, mem, gtype, gpus)
        return by_prio, by_queue, on

    def run(self, pending: list[PendingJob]) -> Plan:
        eligible, waiting = [], []
        queue_of, queues = self.quotas.queue, {}  # a local map: this loop runs once per pending job
        ids = None  # pending job ids, built when some job was preempted
        for job in pending:
            q = queues.get(job.queue)
            if q is None:
                q = queues[job.queue] = queue_of(job.queue)
            if job.not_before is not None and job.not_before > self.now:
                waiting.append((job, q, "backoff", None))
                continue
            if job.last_preempted_by is not None:
                if ids is None:
                    ids = {j.id for j in pending}
                if job.last_preempted_by in ids:
                    # the room and quota it handed back are for the job that preempted it: competing for
                    # them again before that job starts is how preemption loops begin
                    waiting.append((job, q, "yield", job.last_preempted_by))
                    continue
            eligible.append((job, q))
        deferred: list = []
        consider, borrowing = self._consider, False
        limit = self.opt.fair_share_wait
        overdue = self.now - limit if limit is not None else -INF
        for item in fair_order(eligible, self.shares, deferred, overdue):
            if item is None:
                borrowing = True  # what comes now would run beyond its queue's quota
            else:
                consider(item[0], item[1], borrowing, deferred)
        self.left.extend(waiting)
        say.explain(self.out, self.left, self.cl, self.quotas, self.now)
        return self.out

    # -- one job ---------------------------------------------------------------

    def _consider(self, job: PendingJob, q: Queue, borrowing: bool, deferred: list) -> None:
        sel = tuple(sorted(job.node_selector.items())) if job.node_selector else ()
        shape = (job.cpu, job.memory, job.gpu, job.gpu_types, sel, job.replicas, job.placement)
        info = self.shapes.get(shape)  # hashed once; later keys use the small id
        if info is None:
            info = self.shapes[shape] = (len(self.shapes), self.cl.static_types(job, sel))
        sid, types = info
        starts = self.starts
        end = self.now + job.timeout if job.timeout is not None else INF
        # which reservations it would outlast; one reservation is the usual case, and a cycle asks this per job
        sig = ((end > starts[0],) if len(starts) == 1 else tuple([end > s for s in starts])) if starts else ()
        # A job like one already turned away this cycle meets the same fate: room only shrinks, except
        # when a preemption frees some (the epoch), so skip straight to the same answer. One that may not
        # preempt the job that preempted it has fewer choices: it reads these answers but never writes them.
        cls = (q.name, sid, job.priority, sig, borrowing, job.preemptible, self.epoch)
        seen = self.turned_away.get(cls)
        if seen is not None:
            return self.left.append((job, q, seen[0], seen[1]))
        if not types:
            return self._turn_away(cls, job, q, "impossible", (sid, types, shape))
        quotas = self.quotas
        if q.max_running is not None and quotas.running_full(q):
            return self._turn_away(cls, job, q, "quota", (sid, types, shape))
        allowed, reach = types, ()
        if not borrowing:
            # a job like one deferred below meets the same fate while no other job's quota search has
            # changed what those searches reach: its quota stays full and room only shrinks
            if self.deferrable.get(cls) == self.rooms.quota_runs:
                return deferred.append((job, q))
            allowed = quotas.allowed_types(q, job, types, sid)
            if not allowed:
                if q.borrowing and job.preemptible and self._fits_now(job, sid, types, sel, end, sig):
                    return deferred.append((job, q))  # idle room: borrow it rather than stop work of its queue
                # inside its queue, priority wins: lower-priority work of the queue may hand its share back
                done, reach = self.rooms.quota_preempt(job, q, types, sel, end, sid)
                if done:
                    return None
                if not reach:
                    if q.borrowing and job.preemptible:  # borrowed work must be reclaimable
                        if job.last_preempted_by is None:  # its quota search differs from its class's
                            self.deferrable[cls] = self.rooms.quota_runs
                        return deferred.append((job, q))
                    return self._turn_away(cls, job, q, "quota", (sid, types, shape))
        key = (sid, allowed)
        if allowed:
            f = self.failed.get(key)
            # constraints only tighten during a cycle: a failure under fewer or looser reservations still holds
            if f is None or (f and not all(a <= b for a, b in zip(f, sig))):
                for t in allowed if job.gpu_types or len(allowed) < 2 else self._least_busy(allowed):
                    taken = self.cl.place(job, t, sel, end)
                    if taken:
                        return self._admit(job, q, t, taken, end, borrowing)
                self.failed[key] = sig
            if borrowing:
                return self._turn_away(cls, job, q, "room", (sid, types, shape))
            if self.searches > 0 and self.rooms.make_room(job, q, allowed, sel, end, sig):
                return None
            others = tuple(t for t in types if t not in allowed)
            if others:
                done, reach = self.rooms.quota_preempt(job, q, others, sel, end, sid)
                if done:
                    return None
        hold = allowed + reach  # types it could start on once room frees, quota allowing
        if len(starts) < self.opt.max_reservations and self.searches > 0 and (sid, hold) not in self.no_reservation:
            self.searches -= 1
            found = reserve(self.cl, job, hold, sel, self._release_list(), self.now)
            if found is not None:
                res, t = found
                self.out.reservations.append(res)
                starts.append(res.start if res.start < INF else -INF)
                quotas.admit(q, job, t)  # its queue's share is held with the nodes: later jobs may not take it
                return self.left.append((job, q, "head", (res, (sid, types, shape))))
            self.no_reservation.add((sid, hold))  # it would not fit even once everything running has ended
        if len(allowed) < len(types) and q.borrowing and job.preemptible:
            return deferred.append((job, q))  # no room on the types inside its quota: borrow the others
        return self._turn_away(cls, job, q, "room" if allowed else "quota", (sid, types, shape))

    def _fits_now(self, job: PendingJob, sid: int, types: tuple, sel: tuple, end: float, sig: tuple) -> bool:
        key = (sid, types)
        f = self.failed.get(key)
        if f is not None and (not f or all(a <= b for a, b in zip(f, sig))):
            return False
        for t in types:
            taken = self.cl.place(job, t, sel, end)
            if taken:
                for rec in reversed(taken):
                    self.cl.give(*rec)
                return True
        self.failed[key] = sig
        return False

    def _least_busy(self, types: tuple) -> list:
        """For a job that takes any GPU: the types with the most room free first, so it does not
        take the last GPUs of a type that other jobs can only run on."""
        free, cap = self.cl.gfree, self.cl.gpu_cap
        return sorted(types, key=lambda t: -free.get(t, 0) / cap[t] if cap.get(t) else 0.0)

    def _turn_away(self, cls: tuple, job: PendingJob, q: Queue, kind: str, detail) -> None:
        if job.last_preempted_by is None:
            self.turned_away[cls] = (kind, detail)
        self.left.append((job, q, kind, detail))

    def _admit(self, job, q, t, taken, end, borrowing) -> None:
        self.out.admissions[job.id] = [Assignment(s.name, ids) for s, _, _, _, ids, _ in taken]
        if borrowing:
            self.out.borrowed.add(job.id)
        self.charge(job, q, t)
        if self._releases is not None:
            for s, c, m, g, _, _ in taken:
                self._releases.add(end, s, c, m, g, self.now)
        else:
            self.admitted.append((end, taken))

    def charge(self, job: PendingJob, q: Queue, t: str | None) -> None:
        """Count an admitted (or about to start) job against its queue's quota and its team's share."""
        n = job.replicas
        self.quotas.admit(q, job, t)
        self.shares.add(job.team, job.cpu * n, job.memory * n, t, job.gpu * n)

    def _release_list(self) -> Releases:
        if self._releases is None:
            self._releases = Releases(self.cl, self.running, self.now)
            for end, taken in self.admitted:
                for s, c, m, g, _, _ in taken:
                    self._releases.add(end, s, c, m, g, self.now)
        return self._releases
