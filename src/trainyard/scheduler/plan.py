"""The planner: cluster state in, decisions out. Pure: no I/O, no clock, no store.

A cycle runs in phases, as Kueue's ``schedule()`` does, and gives every pending
job an :class:`~trainyard.scheduler.model.Entry` with a status and a message:

1. **snapshot** (:mod:`cycle`): free room per node, each queue's usage, each
   team's share, and what running work could hand back if preempted;
2. **line up** (:mod:`lineup`): retries in backoff, and jobs preempted for a job that has not
   started yet, are held back; that job goes first, then the oldest few jobs needing whole
   nodes that have waited past ``starve_after`` when it is set (*starved*: whatever their
   priority or quota, each may hold nodes),
   the rest in admission order (:mod:`fairshare`: priority, then dominant share per team, then
   submit time; a job waiting past ``fair_share_wait`` goes first within its priority);
3. **admit**, each job in that order, inside its queue's quota
   (:meth:`_Planner.consider`):
   a. a job like one already turned away this cycle is turned away alike;
   b. over its quota, it may preempt lower-priority work of its own queue
      (for the quota, or, where the queue may borrow, for room only), or else
      is deferred to phase 4 (:mod:`quota`, :mod:`room`);
   c. it is placed if its whole gang fits now (:mod:`cluster`: best fit);
   d. else it claims room that stopping attempts hand back, or preempts
      lower-priority work no quota guarantees to another team, or borrowed
      work (:mod:`room`, :mod:`preemption`);
   e. else the first job blocked (that has waited past ``reserve_after`` when it is set), and
      every starved job, gets a reservation (the nodes it held last cycle, while they can still
      take it), and everyone after it only backfills around it (:mod:`backfill`);
   f. else it waits;
4. **borrow**: deferred jobs may then borrow idle room beyond their quota; the first borrower
   needing whole nodes that has waited past ``reserve_borrowing_after`` and finds none free
   holds them instead, on GPU types where no job of the line holds nodes;
5. **explain**: every job left pending gets a position in its queue and a
   reason (:mod:`reasons`).

Gangs never hold half their room across cycles, so two big gangs cannot
deadlock: one gets the reservation, drains its nodes and starts whole.

Cost: O(N + R + P log P) to set up (N nodes, R running attempts, P pending),
then per job a hash lookup when a job like it was already turned away this
cycle (room only shrinks within a cycle), else a bucket scan; O(N) room
searches for preemption are rationed per cycle and guarded by cheap bounds.
"""

from __future__ import annotations

import gc

from trainyard.scheduler import reasons as say
from trainyard.scheduler.backfill import Releases, reserve
from trainyard.scheduler.cluster import Take
from trainyard.scheduler.cycle import JobClass, Memo, Options, snapshot
from trainyard.scheduler.lineup import line_up
from trainyard.scheduler.model import INF, Assignment, Entry, Node, PendingJob, Plan, Queue, RunningJob, Shape, \
    ShapeFit, Status
from trainyard.scheduler.room import Rooms

__all__ = ["Options", "plan"]

# module constants: an Enum member read off its class costs ~5× a global in this loop
ADMITTED, BACKFILLED, BORROWED = Status.ADMITTED, Status.BACKFILLED, Status.BORROWED
NO_ROOM, OVER_QUOTA, IMPOSSIBLE = Status.NO_ROOM, Status.OVER_QUOTA, Status.IMPOSSIBLE


def plan(nodes: list[Node], pending: list[PendingJob], running: list[RunningJob] = (),
         queues: list[Queue] = (), now: float = 0.0, options: Options | None = None) -> Plan:
    """Decide which pending jobs start where, what to preempt, and why the rest wait."""
    # A cycle allocates ~10 short-lived objects per job; with the collector on, each young-generation
    # pass also walks every pending job, which costs more than the planning itself.
    was = gc.isenabled()
    gc.disable()
    try:
        return _Planner(nodes, running, queues, now, options or Options()).run(pending)
    finally:
        if was:
            gc.enable()


class _Planner:
    """One cycle: :attr:`c` is the state it shares with :attr:`rooms`, :attr:`memo` what it learnt."""

    def __init__(self, nodes, running, queues, now, options) -> None:
        self.c, survey = snapshot(nodes, running, queues, now, options)  # 1. snapshot
        self.rooms = Rooms(self.c, survey)
        self.memo = Memo()
        self._releases: Releases | None = None  # built on the first reservation search
        self.admitted: list[tuple[float, list[Take]]] = []  # (end, room taken) of jobs admitted before that
        self.starved: set[str] = set()  # ids of the jobs put first for having waited too long (Options.starve_after)
        self.starved_held = 0  # reservations of starved jobs: they do not count against max_reservations
        self.held_types: set = set()  # GPU types (None: cores) some reservation holds nodes of this cycle
        self.borrower_held = False  # a borrower holds nodes (phase 4; Options.reserve_borrowing_after)
        self.too_young = False  # the last job refused nodes to hold only for its wait (Options.reserve_after)
        self.may_hold = options.reserve_borrowing_after is not None  # some borrower may hold nodes
        # the waits past which a job may stop more (Victims.patient, Victims.reclaims_old), soonest first: jobs
        # alike but on either side of one have different choices, so they are of different classes
        untimed = options.stop_untimed_after if options.stop_untimed_after is not None else options.preempt_within
        self.waits = sorted(INF if t is None else t for t in (untimed, options.reclaim_after))

    def run(self, pending: list[PendingJob]) -> Plan:
        c = self.c
        deferred: list[tuple[PendingJob, Queue]] = []  # jobs phase 3 leaves to phase 4, in order
        line, held_back = line_up(self.c, pending, deferred, self.starved)  # 2. line up
        consider = self.consider
        for item in line:  # 3. admit, inside quotas; a None ends that part of the line
            if item is None:
                break
            consider(item[0], item[1], False, deferred)
        for job, q in line:  # 4. borrow: the deferred jobs, beyond their quotas
            consider(job, q, True, deferred)
        c.left.extend(held_back)
        say.explain(c.out, c.left, c.cl, c.quotas, c.now)  # 5. explain
        return c.out

    # -- phases 3 and 4, one job ---------------------------------------------------

    def consider(self, job: PendingJob, q: Queue, borrowing: bool, deferred: list) -> None:
        """Steps 3a–f (module docstring) for one job: the first that decides its fate ends it. A job
        deferred to phase 4 gets its entry there."""
        c, memo = self.c, self.memo
        if not borrowing and c.quotas.guarded and c.quotas.borrows_all(q, job) and \
                (not self.starved or job.id not in self.starved):
            # it has no quota to be inside of: it borrows in phase 4, or else stops lower-priority work of its
            # queue there (asked here first whether it fits, each such job was placed twice)
            return deferred.append((job, q))
        # 3a. its class. Its Shape and JobClass are looked up as plain tuples of their fields, which hash
        # and compare alike: making a NamedTuple costs 3× a tuple, and this runs for every job in line.
        d = job.node_selector
        sel = (tuple(d.items()) if len(d) == 1 else tuple(sorted(d.items()))) if d else ()
        shape = (job.cpu, job.memory, job.gpu, job.gpu_types, sel, job.replicas, job.placement)
        fit = memo.shapes.get(shape)  # hashed once; later keys use the small id
        if fit is None:
            fit = memo.new_shape(Shape._make(shape), c.cl.static_types(job, sel))
        starts = c.starts
        end = c.now + job.timeout if job.timeout is not None else INF
        # which reservations it would outlast; one reservation is the usual case, and a cycle asks this per job
        sig = ((end > starts[0],) if len(starts) == 1 else tuple([end > s for s in starts])) if starts else ()
        # once a quota guarantees work to a team, whom a job may preempt depends on its team, and a job of the
        # default queue is of its submitter's team, not the queue's
        qk = q.name if job.team == q.team or not c.quotas.guarded else (q.name, job.team)
        waited = c.now - job.submitted_at if job.submitted_at is not None else -INF
        cls = (qk, fit.id, job.priority, sig, borrowing, job.preemptible, c.epoch,
               (waited > self.waits[0]) + (waited > self.waits[1]))
        starved = job.id in self.starved if self.starved else False
        # a borrower that may hold nodes had a choice the jobs like it may not have had
        holds = borrowing and self.may_hold and self._may_hold_borrowing(job, fit)
        seen = None if starved or holds else memo.turned_away.get(cls)  # a job like one turned away meets the same fate
        if seen is not None:
            return c.left.append(Entry(job, q, seen[0], seen[1]))
        if not fit.types:
            return self._turn_away(cls, job, q, IMPOSSIBLE, fit)
        # 3b. its queue's limits
        if q.max_running is not None and c.quotas.running_full(q):
            return self._turn_away(cls, job, q, OVER_QUOTA, fit)
        allowed, reach = fit.types, ()
        if not borrowing:
            # a job like one deferred below meets the same fate while no other job's quota search has
            # changed what those searches reach: its quota stays full and room only shrinks
            if not starved and memo.deferrable.get(cls) == self.rooms.quota_runs:
                return deferred.append((job, q))
            allowed = c.quotas.allowed_types(q, job, fit.types, fit.id)
            if not allowed and starved and q.borrowing and job.preemptible:
                return self._starved_over_quota(job, q, fit, sel, end, sig, cls)
            if not allowed:
                reach = self._over_quota(job, q, fit, sel, end, sig, cls, deferred)
                if reach is None:
                    return None
        if allowed:
            # 3c. place it now, unless a job of its shape failed under no more reservations than it outlasts
            f = memo.failed.get((fit.id, allowed))
            if (f is None or (f and not all(a <= b for a, b in zip(f, sig)))) and \
                    self._place(job, q, fit, allowed, sel, end, sig, borrowing):
                return None
            if borrowing:
                if holds and self._reserve(job, q, fit, allowed, sel, borrower=True):
                    return None
                if c.quotas.borrows_all(q, job):  # only now: were there idle room, it would have borrowed it
                    entry, _ = self.rooms.quota_preempt(job, q, fit.types, sel, end, fit.id)
                    if entry is not None:
                        return c.left.append(entry)
                return self._turn_away(cls, job, q, NO_ROOM, fit)
            # 3d. make room
            entry, reach = self._make_room(job, q, fit, allowed, sel, end, sig)
            if entry is not None:
                return c.left.append(entry)
            # idle room on a type beyond its quota starts it now (phase 4); holding nodes of its
            # quota's types could keep it waiting on work that has no end in sight
            if len(allowed) < len(fit.types) and q.borrowing and job.preemptible and \
                    self._fits_now(job, fit, sel, end, sig):
                return deferred.append((job, q))
        # 3e. hold nodes, on the types it could start on once room frees, quota allowing
        if self._reserve(job, q, fit, allowed + reach, sel, inside=True):
            return None
        # 3f. wait, or borrow the types beyond its quota in phase 4
        if len(allowed) < len(fit.types) and q.borrowing and job.preemptible:
            return deferred.append((job, q))
        return self._turn_away(cls, job, q, NO_ROOM if allowed else OVER_QUOTA, fit)

    def _over_quota(self, job: PendingJob, q: Queue, fit: ShapeFit, sel: tuple, end: float, sig: tuple,
                    cls: tuple, deferred: list) -> tuple | None:
        """Step 3b for a job its queue's quota leaves no GPU type: the types on which lower-priority
        work of its queue could hand the quota back but room is lacking, or None when this step
        decided (deferred to phase 4, preempting within its queue, or waiting)."""
        rooms = self.rooms
        # idle room: borrow it rather than stop work of its queue; where it could stop none, it borrows
        # whatever the room (asking first whether it fits placed each borrower twice while a line waits)
        if q.borrowing and job.preemptible and (not rooms.may_swap(job, q, fit.types, fit.id)
                                                or self._fits_now(job, fit, sel, end, sig)):
            return deferred.append((job, q))
        # inside its queue, priority wins: lower-priority work of the queue may hand its share back
        entry, reach = rooms.quota_preempt(job, q, fit.types, sel, end, fit.id)
        if entry is not None:
            return self.c.left.append(entry)
        if reach:
            return reach
        if q.borrowing and job.preemptible:  # borrowed work must be reclaimable
            if job.last_preempted_by is None:  # its quota search differs from its class's
                self.memo.deferrable[JobClass._make(cls)] = rooms.quota_runs
            return deferred.append((job, q))
        return self._turn_away(cls, job, q, OVER_QUOTA, fit)

    def _starved_over_quota(self, job: PendingJob, q: Queue, fit: ShapeFit, sel: tuple, end: float, sig: tuple,
                            cls: tuple) -> None:
        """A starved job of a queue over its quota that may borrow: it borrows now, before the line takes
        the room (in phase 4 it would find none); else it preempts lower-priority work of its queue; else
        it holds nodes. Over its quota it would otherwise never get a reservation, and a gang of eight
        whole nodes never finds them free by chance."""
        if self._place(job, q, fit, fit.types, sel, end, sig, True):
            return None
        entry, _ = self.rooms.quota_preempt(job, q, fit.types, sel, end, fit.id)
        if entry is not None:
            return self.c.left.append(entry)
        if self._reserve(job, q, fit, fit.types, sel):
            return None
        return self._turn_away(cls, job, q, NO_ROOM, fit)

    def _place(self, job: PendingJob, q: Queue, fit: ShapeFit, allowed: tuple, sel: tuple, end: float,
               sig: tuple, borrowing: bool) -> bool:
        """Step 3c: admit the whole gang on the first allowed type with room now."""
        cl = self.c.cl
        for t in allowed if job.gpu_types or len(allowed) < 2 else self._least_busy(allowed):
            taken = cl.place(job, t, sel, end)
            if taken:
                self._admit(job, q, t, taken, end, borrowing)
                return True
        self.memo.failed[(fit.id, allowed)] = sig
        return False

    def _make_room(self, job: PendingJob, q: Queue, fit: ShapeFit, allowed: tuple, sel: tuple, end: float,
                   sig: tuple) -> tuple[Entry | None, tuple]:
        """Step 3d: claim or preempt for room on the allowed types, else preempt within its queue for
        its quota on the others. Returns its entry if one worked, and the types where the quota could
        be freed but room is lacking."""
        rooms = self.rooms
        if self.c.searches > 0:
            entry = rooms.make_room(job, q, allowed, sel, end, sig)
            if entry is not None:
                return entry, ()
        others = tuple(t for t in fit.types if t not in allowed)
        if others:
            return rooms.quota_preempt(job, q, others, sel, end, fit.id)
        return None, ()

    def _reserve(self, job: PendingJob, q: Queue, fit: ShapeFit, hold: tuple, sel: tuple,
                 borrower: bool = False, inside: bool = False) -> bool:
        """Step 3e: the first job blocked holds the nodes where it can start soonest; so does every
        starved job, and in phase 4 one ``borrower`` (:meth:`_may_hold_borrowing`). ``inside``: a job inside
        its queue's quota, which may stop borrowed work once it has waited ``Options.reclaim_after``."""
        c, memo = self.c, self.memo
        starved = borrower or (job.id in self.starved if self.starved else False)
        if (len(c.starts) - self.starved_held >= c.opt.max_reservations and not starved) or c.searches <= 0 \
                or (fit.id, hold) in memo.no_reservation:
            return False
        after = c.opt.reserve_after
        if after and not starved and job.submitted_at is not None and c.now - job.submitted_at <= after:
            self.too_young = True  # an older job like it may still hold nodes: no class answer from this one
            return False
        c.searches -= 1
        found = reserve(c.cl, job, hold, sel, self._release_list(), c.now)
        if found is None:
            memo.no_reservation.add((fit.id, hold))  # it would not fit even once everything running has ended
            return False
        res, t = found
        back = c.opt.reclaim_after
        if inside and back is not None and job.submitted_at is not None and c.quotas.guarded and \
                c.quotas.guarantees(q) and self.rooms.borrowing_queues - {q.name} and \
                job.submitted_at + back < res.start:
            res.reclaims_at = job.submitted_at + back  # its reason says so: the held nodes' end may be hours off
        self.starved_held += starved
        self.held_types.add(t)
        self.borrower_held |= borrower
        c.out.reservations.append(res)
        c.starts.append(res.start if res.start < INF else -INF)
        c.quotas.admit(q, job, t)  # its queue's share is held with the nodes: later jobs may not take it
        entry = Entry(job, q, Status.RESERVED, fit)
        entry.reservation = res
        c.left.append(entry)
        return True

    def _may_hold_borrowing(self, job: PendingJob, fit: ShapeFit) -> bool:
        """Phase 4: may this borrower hold nodes? Only the first such one in a cycle, only if it has waited
        past ``reserve_borrowing_after`` and needs whole nodes (smaller work finds room in what the line
        leaves over), and only nodes of a GPU type on which no job of the line holds any (nobody who owns
        that room is blocked on it)."""
        c = self.c
        after = c.opt.reserve_borrowing_after
        if after is None or self.borrower_held or job.submitted_at is None or c.now - job.submitted_at <= after \
                or not job.gpu or not job.preemptible:
            return False
        top, held = c.cl.top_g, self.held_types
        return all(t not in held for t in fit.types) and any(job.gpu >= top[t] for t in fit.types)

    def _fits_now(self, job: PendingJob, fit: ShapeFit, sel: tuple, end: float, sig: tuple) -> bool:
        """Would the whole gang fit now on some type it accepts, quota aside? (Placed, then given back.)"""
        key = (fit.id, fit.types)
        f = self.memo.failed.get(key)
        if f is not None and (not f or all(a <= b for a, b in zip(f, sig))):
            return False
        cl = self.c.cl
        for t in fit.types:
            taken = cl.place(job, t, sel, end)
            if taken:
                for rec in reversed(taken):
                    cl.give(rec)
                return True
        self.memo.failed[key] = sig
        return False

    def _least_busy(self, types: tuple) -> list:
        """For a job that takes any GPU: the types with the most room free first, so it does not
        take the last GPUs of a type that other jobs can only run on."""
        free, cap = self.c.cl.gfree, self.c.cl.gpu_cap
        return sorted(types, key=lambda t: -free.get(t, 0) / cap[t] if cap.get(t) else 0.0)

    def _turn_away(self, cls: tuple, job: PendingJob, q: Queue, status: Status, fit: ShapeFit) -> None:
        # a starved job had more choices than the jobs like it, and one too young to hold nodes fewer
        young, self.too_young = self.too_young, False
        if job.last_preempted_by is None and not young and (not self.starved or job.id not in self.starved):
            self.memo.turned_away[JobClass._make(cls)] = (status, fit)
        self.c.left.append(Entry(job, q, status, fit))

    def _admit(self, job: PendingJob, q: Queue, t: str | None, taken: list[Take], end: float,
               borrowing: bool) -> None:
        c = self.c
        c.out.admissions[job.id] = [Assignment(x.slot.name, x.gpu_ids) for x in taken]
        if borrowing:
            c.out.borrowed.add(job.id)
        # a job placed while one ahead of it holds a reservation runs in a gap around it
        status = BORROWED if borrowing else BACKFILLED if c.starts else ADMITTED
        c.out.entries[job.id] = Entry(job, q, status, None)
        c.charge(job, q, t)
        if self._releases is not None:
            for x in taken:
                self._releases.add(end, x.slot, x.cpu, x.memory, x.gpus, c.now)
        else:
            self.admitted.append((end, taken))

    def _release_list(self) -> Releases:
        if self._releases is None:
            c = self.c
            self._releases = Releases(c.cl, c.running, c.now)
            for end, taken in self.admitted:
                for x in taken:
                    self._releases.add(end, x.slot, x.cpu, x.memory, x.gpus, c.now)
        return self._releases
