"""Making room for a job that does not fit: stopping room, preemption, a queue's own quota.

In order: room that stopping attempts hand back goes to the first job in
line that fits in it (a claim), so a job waiting for its victims to exit does
not preempt more; then lower-priority preemptible work and borrowed work of
other queues (:func:`preemption.search`); then, for a job over its queue's
quota, lower-priority work of that same queue.

Each search is O(nodes), so it is rationed per cycle and guarded by cheap
necessary conditions: totals per priority (:class:`Releasable`), then room
node by node, both built once a cycle, and the searches that already failed
(:class:`Failures`). The room node by node counts only the work the search
itself may stop (:meth:`Victims.rule`, the one test both ask), so a search
that cannot succeed is not run; :attr:`Plan.preempt_ruled_out` counts those.
"""

from __future__ import annotations

from trainyard.scheduler.cluster import end_of
from trainyard.scheduler.cycle import Cycle, Survey
from trainyard.scheduler.model import INF, Entry, PendingJob, Preemption, Queue, RunningJob, Status
from trainyard.scheduler.preemption import Failures, Releasable, Victims, search


class Rooms:
    """The room-making half of one planning cycle. It reads the cycle's state and changes only the
    room it claims or frees, the usage it charges, the search budget, the epoch and the preemptions;
    what it decides for a job comes back to the caller as that job's :class:`Entry`."""

    def __init__(self, cycle: Cycle, survey: Survey) -> None:
        self.c = cycle
        self.borrowing_queues = survey.borrowing_queues  # queues running work beyond their quota
        self.lent = survey.lent  # that work's room by (queue, GPU type or None for cores), and by type alone
        # Searches that failed this cycle: room only shrinks, so a job like one of them fails too.
        self.failed_claim = Failures()
        self.failed_preempt = Failures()
        # (shape id, GPU types, queue, "quota", job it may not preempt) -> the highest priority whose
        # quota search failed, and the types on which that search could free the quota but not the room
        self.failed_quota: dict[tuple, int] = {}
        self.quota_reach: dict[tuple, tuple] = {}
        self.quota_runs = 0  # quota searches run to the end: each may change what the next one answers
        self.queue_work: dict[str, list] = {}
        self.pots: dict[tuple, list] = {}  # (GPU type, priority, reservations, _who) -> room per node
        self._vroom: dict[tuple, list] = {}  # (GPU type, priority, _who) -> victims' room per node
        self._vbound: dict[tuple, dict] = {}  # the same, by node
        # what preemptible work each priority holds, per GPU type (None: cores), per limited queue and
        # limit, and which attempts each node holds that might be preempted
        rel: dict[tuple, float] = {}
        for prio, (cpu, gpus) in survey.by_prio.items():
            rel[(None, prio)] = cpu
            for gtype, v in gpus.items():
                rel[(gtype, prio)] = v
        qrel: dict[tuple, float] = {}
        for (queue, prio), (cpu, mem, gpus, every) in survey.by_queue.items():
            for k, v in (("cpu", cpu), ("mem", mem), ("*", every), *gpus.items()):
                qrel[((queue, k), prio)] = v
        self.releasable, self.releasable_in_queue, self.on = Releasable(rel), Releasable(qrel), survey.on
        self._victims = None

    def make_room(self, job: PendingJob, q: Queue, allowed: tuple, sel: tuple, end: float,
                  sig: tuple) -> Entry | None:
        """Room stopping attempts hand back goes to the first job in line that needs it (CLAIMED);
        failing that, the job preempts (PREEMPTING). None: neither. Each search is O(nodes), so they
        are rationed."""
        c, cl = self.c, self.c.cl
        if cl.soon_any and (not job.gpu or any(cl.soon_g.get(t) for t in allowed)) and not \
                self.failed_claim.covers(job, allowed, sel, sig, (c.epoch,)):
            c.searches -= 1
            found = search(cl, job, allowed, sel, end)
            if found is not None:
                t, picks, _ = found
                for s in picks:
                    cl.claim(s, job.cpu, job.memory, job.gpu, end)
                c.charge(job, q, t)
                return Entry(job, q, Status.CLAIMED)
            self.failed_claim.add(job, allowed, sel, sig, (c.epoch,))
        borrower = not c.quotas.guarantees(q)
        reclaim = bool(self.borrowing_queues - {q.name}) and not borrower
        if c.searches <= 0:
            return None
        if not self._could_free(job, q, allowed):
            c.out.preempt_ruled_out += 1
            return None
        victims = self.victims()
        who = self._who(job, q, reclaim, borrower, victims)
        if self.failed_preempt.covers(job, allowed, sel, sig, who):
            return None
        may = victims.rule(job, reclaim, borrower)
        if not self._nodes_could_free(job, allowed, sig, who, may):
            c.out.preempt_ruled_out += 1
            self.failed_preempt.add(job, allowed, sel, sig, who)
            return None
        c.searches -= 1
        c.out.preempt_searches += 1

        def bound(t: str | None) -> dict:
            return self._victim_bound(t, job.priority, who, may)

        # search as if the job had never been preempted, so a failure holds for every job like it
        found = search(cl, job, allowed, sel, end, victims, reclaim, bound=bound, borrower=borrower)
        last = job.last_preempted_by
        if found is not None and last is not None and any(v.job_id == last for v in found[2]):
            # never preempt it back
            found = search(cl, job, allowed, sel, end, victims, reclaim, spare_job=last, bound=bound,
                           borrower=borrower)
            if found is None:
                return None
        if found is None or not found[2]:
            self.failed_preempt.add(job, allowed, sel, sig, who)
            return None
        return self.stop(job, q, found, victims)

    def _who(self, job: PendingJob, q: Queue, reclaim: bool, borrower: bool, victims: Victims) -> tuple:
        """All that decides whom ``job`` may stop (:meth:`Victims.rule`) besides its priority, as a key for
        the bounds and failed searches that depend on it: its queue only through that queue's borrowed work,
        or, once some quota guarantees work to a team, its queue and team; whether it reclaims or only
        borrows; and its own wait, through old work without a timeout (:meth:`Victims.patient`) and old
        borrowed work (:meth:`Victims.reclaims_old`)."""
        guarded = self.c.quotas.guarded
        return (q.name if guarded or q.name in self.borrowing_queues else "", job.team if guarded else None,
                reclaim, borrower, victims.patient(job), reclaim and victims.reclaims_old(job))

    def quota_preempt(self, job: PendingJob, q: Queue, types: tuple, sel: tuple, end: float,
                      sid: int) -> tuple[Entry | None, tuple]:
        """Inside one queue, priority wins: stop lower-priority work of the queue until the job fits
        its quota (and, if need be, other lower-priority work until it fits on nodes).

        Returns (its PREEMPTING entry or None, types on which the quota could be freed but room is lacking)."""
        pkey = (sid, types, q.name, "quota", job.last_preempted_by)
        c = self.c
        if c.searches <= 0 or self.failed_quota.get(pkey, -INF) >= job.priority:
            return None, self.quota_reach.get(pkey, ())
        if q.borrowing and job.preemptible:
            return self._swap_in_queue(job, q, types, sel, end, pkey), ()
        reach = []
        below = self.releasable_in_queue.below
        for t in types:
            over = c.quotas.over(q, job, t)
            if not over or any(below((q.name, k), job.priority) + 1e-9 < v for k, v in over.items()):
                continue  # all its lower-priority work together would not hand back enough
            victims = self.victims()
            taken, last, may, borrowed = victims.taken, job.last_preempted_by, victims.rule(job, False), \
                victims.borrowed
            mine = (r for r in self._queue_work(q.name)
                    if r.attempt_id not in taken and r.job_id != last and may(r, r.attempt_id in borrowed))
            c.searches -= 1
            c.out.preempt_searches += 1
            pre = c.quotas.victims_for(q, job, t, mine, c.held)
            if pre is None:
                continue
            reach.append(t)
            found = search(c.cl, job, (t,), sel, end, victims, False, tuple(pre), spare_job=last)
            if found is not None:
                return self.stop(job, q, found, victims), ()
            if c.searches <= 0:
                break
        self.failed_quota[pkey] = max(job.priority, self.failed_quota.get(pkey, -INF))
        self.quota_reach[pkey] = tuple(reach)
        self.quota_runs += 1
        return None, tuple(reach)

    def may_swap(self, job: PendingJob, q: Queue, types: tuple, sid: int) -> bool:
        """Could :meth:`quota_preempt` still have ``job`` (of a queue that may borrow) stop work of ``q``: is
        there search budget left, has no search like it failed at its priority, and does preemptible work
        of ``q`` below its priority run?"""
        if self.c.searches <= 0 or self.failed_quota.get((sid, types, q.name, "quota", job.last_preempted_by),
                                                         -INF) >= job.priority:
            return False
        below = self.releasable_in_queue.below
        return any(below((q.name, k), job.priority) > 0 for k in ("cpu", "mem", "*"))

    def _swap_in_queue(self, job: PendingJob, q: Queue, types: tuple, sel: tuple, end: float,
                       pkey: tuple) -> Entry | None:
        """A queue that may borrow needs no quota back: its quota only says which of its work is borrowed,
        and that is its lowest-priority work. So a job of it that lacks room stops lower-priority work
        of its own queue for the room alone, and runs in its place (the stopped work was borrowed, or
        becomes so). Stopping enough to bring the whole queue back inside its quota instead stops dozens
        of attempts for one gang, which borrow idle room again next cycle, to be stopped by the next job:
        the churn this replaces."""
        c, cl, below = self.c, self.c.cl, self.releasable_in_queue.below
        n = job.replicas
        if job.gpu:
            types = tuple(t for t in types if cl.gfree.get(t, 0) + cl.soon_g.get(t, 0)
                          + below((q.name, t), job.priority) >= job.gpu * n)
        elif cl.cpu_free + cl.soon_cpu + below((q.name, "cpu"), job.priority) + 1e-9 < job.cpu * n:
            types = ()
        found = None
        if types:
            c.searches -= 1
            c.out.preempt_searches += 1
            victims = self.victims()
            who, may = self._who(job, q, False, False, victims), victims.rule(job, False)

            def bound(t: str | None) -> dict:
                return self._victim_bound(t, job.priority, who, may)

            found = search(cl, job, types, sel, end, victims, False, spare_job=job.last_preempted_by,
                           bound=bound, only_queue=q.name)
        if found is None or not found[2]:
            self.failed_quota[pkey] = max(job.priority, self.failed_quota.get(pkey, -INF))
            self.quota_runs += 1
            return None
        return self.stop(job, q, found, victims)

    def stop(self, job: PendingJob, q: Queue, found: tuple, victims: Victims) -> Entry:
        """Record the preemptions and hold the room they free for ``job``."""
        c, cl = self.c, self.c.cl
        t, picks, chosen = found
        for v in chosen:
            victims.taken.add(v.attempt_id)
            if v.preemptible and v.priority < job.priority:
                why = f"preempted by job {job.id} (priority {job.priority} > {v.priority})"
            else:
                why = f"queue {job.queue} needs its quota back from borrowed work (job {job.id})"
            c.out.preemptions.append(Preemption(v.attempt_id, v.job_id, job.id, why))
            c.epoch += 1
            for p in v.replicas:
                if p.node in cl.by_name:
                    cl.add_soon(cl.by_name[p.node], p.cpu, p.memory, len(p.gpu_ids))
        for s in picks:
            cl.claim(s, job.cpu, job.memory, job.gpu, end_of(job, c.now))
        c.charge(job, q, t)
        entry = Entry(job, q, Status.PREEMPTING)
        entry.victims = [v.job_id for v in chosen]
        return entry

    def _could_free(self, job: PendingJob, q: Queue, allowed: tuple) -> bool:
        """Could all lower-priority work, and all borrowed work of other queues, make room together?"""
        cl, n, below, lent = self.c.cl, job.replicas, self.releasable.below, self.lent
        if job.gpu:
            return any(cl.gfree.get(t, 0) + cl.soon_g.get(t, 0) + below(t, job.priority)
                       + lent.get(t, 0) - lent.get((q.name, t), 0) >= job.gpu * n for t in allowed)
        return (cl.cpu_free + cl.soon_cpu + below(None, job.priority) + lent.get(None, 0)
                - lent.get((q.name, None), 0) + 1e-9 >= job.cpu * n)

    def _nodes_could_free(self, job: PendingJob, allowed: tuple, sig: tuple, who: tuple, may) -> bool:
        """Node by node: could free room, stopping room and all the work this job may stop there (``may``,
        its :meth:`Victims.rule`; ``who``, :meth:`_who`) hold its replicas? An upper bound per (GPU type,
        priority, reservations, who), built once a cycle, so most futile O(nodes) searches are skipped for
        O(nodes) arithmetic."""
        c, m, g, n = job.cpu, job.memory, job.gpu, job.replicas
        spread = n > 1 and job.placement == "spread"
        for t in allowed:
            key = (t, job.priority, sig, who)
            pots = self.pots.get(key)
            if pots is None:
                pots = self.pots[key] = self._potentials(t, job.priority, sig, who, may)
            fit = 0
            for pc, pm, pg in pots:
                k = min(int((pc + 1e-9) / c) if c > 0 else n, pm // m if m > 0 else n, pg // g if g > 0 else n)
                if k > 0:
                    fit += 1 if spread else k
                    if fit >= n:
                        return True
        return False

    def _potentials(self, t: str | None, prio: int, sig: tuple, who: tuple, may) -> list[tuple]:
        """Per node of type ``t``: free and stopping room now, plus all the work the job may stop there.
        (Victims' room is added as one sum: for fractional cores the float may differ in the last bit from
        adding them one by one, far inside the 1e-9 every comparison of room allows.)"""
        c = self.c
        out, starts = [], c.starts
        slots = c.cl.typed.get(t, []) if t else c.cl.slots
        for s, (vc, vm, vg) in zip(slots, self._victim_room(t, prio, who, may)):
            sn = s.soon or (0.0, 0, 0)
            pc, pm, pg = s.cpu + sn[0], s.mem + sn[1], s.g + sn[2]
            r = s.resv
            if r is not None and any(sig[i] for i, st in enumerate(starts) if st == r[0]):
                out.append((min(pc, r[1]), min(pm, r[2]), min(pg, r[3])))  # held: what is left over, no victims
                continue
            out.append((pc + vc, pm + vm, pg + vg))
        return out

    def _victim_bound(self, t: str | None, prio: int, who: tuple, may) -> dict:
        """:meth:`_victim_room` by node, for searches to skip the nodes where even all of it is too little."""
        key = (t, prio, who)
        out = self._vbound.get(key)
        if out is None:
            slots = self.c.cl.typed.get(t, []) if t else self.c.cl.slots
            out = self._vbound[key] = dict(zip(slots, self._victim_room(t, prio, who, may)))
        return out

    def _victim_room(self, t: str | None, prio: int, who: tuple, may) -> list[tuple]:
        """Per node of type ``t`` (all nodes for None), the room of all the work a job of priority ``prio``
        may stop there: what ``may`` (its :meth:`Victims.rule`) allows, the one test the search asks too, so
        work the age rules or a quota spare is not counted and a search that cannot succeed is never run
        (a gang of 10,000 replicas ran one every cycle, 2-3 s, counting old work priority may not stop).
        What running work may be stopped does not change in a cycle, so this is built once per (type,
        priority, :meth:`_who`); the potentials add each search's free room to it."""
        key = (t, prio, who)
        out = self._vroom.get(key)
        if out is not None:
            return out
        c = self.c
        out, borrowed = [], c.quotas.borrowed
        on = self.on
        for s in (c.cl.typed.get(t, []) if t else c.cl.slots):
            pc = pm = pg = 0
            name = s.name
            for v in on.get(name, ()):
                if may(v, v.attempt_id in borrowed):
                    reps = v.replicas
                    if len(reps) == 1:  # most attempts: one replica, and it is on this node
                        p = reps[0]
                        pc += p.cpu
                        pm += p.memory
                        pg += len(p.gpu_ids)
                        continue
                    for p in reps:
                        if p.node == name:
                            pc += p.cpu
                            pm += p.memory
                            pg += len(p.gpu_ids)
            out.append((pc, pm, pg))
        self._vroom[key] = out
        return out

    def _queue_work(self, queue: str) -> list[RunningJob]:
        """Preemptible live attempts of one queue, cheapest to stop first."""
        out = self.queue_work.get(queue)
        if out is None:
            v = self.victims()
            out = self.queue_work[queue] = sorted(
                (r for r in self.c.running if r.queue == queue and r.preemptible and not r.stopping), key=v.cost_of)
        return out

    def victims(self) -> Victims:
        if self._victims is None:
            c = self.c
            o = c.opt
            self._victims = Victims(c.cl, self.on, c.quotas.borrowed, c.held, c.now, o.preempt_within,
                                    o.stop_untimed_after if o.stop_untimed_after is not None else o.preempt_within,
                                    o.starve_after, o.reclaim_within, c.quotas.guarded, o.reclaim_after)
        return self._victims
