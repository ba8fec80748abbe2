"""The state one planning cycle shares between its phases and :class:`room.Rooms`, and phase 1, which
builds it from the planner's inputs.

A leaf under the planner: :mod:`plan` and :mod:`room` both import it and it imports neither, so the
dependencies point one way. Nothing here outlives a cycle. Every cache is sound for the same two
reasons: within one cycle room only shrinks (except where a preemption frees some, which bumps
:attr:`Cycle.epoch`) and a queue's usage only grows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from trainyard.scheduler.cluster import Cluster
from trainyard.scheduler.fairshare import Shares
from trainyard.scheduler.model import Entry, Node, PendingJob, Plan, Queue, RunningJob, Shape, ShapeFit, Status, \
    default_queue
from trainyard.scheduler.quota import Held, Quotas, has_quota, totals


@dataclass(slots=True)
class Options:
    max_reservations: int = 1  # jobs at the head of the line that hold nodes
    # a job holds nodes (step 3e) only once it has waited longer than this (seconds; None or 0: at once).
    # Holding drains nodes for the length of the longest work on them (1-2.5 h for an H100 gang on the
    # busy simulated day) while most blocked jobs would have found room within minutes anyway. A younger job
    # at the head leaves the hold to the first job behind it that has waited long enough.
    # Off by default: on the busy simulated day (bench/RESULTS.md, session 7) no threshold from 2 min to 1 h
    # brought the 8-GPU class's mean wait near 2x first-come's (4.5-8.6x, against 4.7x without it): the
    # hold passes to the oldest blocked job, usually an H100 gang, which drains its nodes all the same.
    reserve_after: float | None = None
    max_searches: int = 16  # room searches (claims, preemptions) per cycle; each is O(nodes)
    # a job waiting longer than this goes ahead of fair share within its priority (None: never)
    fair_share_wait: float | None = 4 * 3600.0
    # priority never throws away more than this much of the run of an attempt with a timeout (seconds; None:
    # no limit): older work is left to end, and the job that wanted its room waits for it (a lender still
    # reclaims it); work without a timeout could hold the room for ever, so it is a victim again of a job
    # that has waited longer than this
    preempt_within: float | None = 300.0
    # ... and old work without a timeout is a victim of priority only once the job that wants its room has
    # waited longer than this (None: as long as preempt_within). Stopping it throws hours away: on the busy
    # simulated day half the work lost was normal-priority gangs without timeouts stopped hours in.
    stop_untimed_after: float | None = 4 * 3600.0
    # a queue reclaiming the room it lent stops borrowed work only within this much of its run (seconds; None:
    # whatever its age, at once, as Kueue's reclaimWithinCohort: Any); older borrowed work is left to end ...
    reclaim_within: float | None = 300.0
    # ... until the job inside its quota that wants the room has waited longer than this (seconds): then any
    # borrowed work in its way is its victim, so a lender waits at most this long. None: never (borrowed work
    # without a timeout, whose end nothing bounds, is then reclaimed at once, the rest waited for). Once quotas
    # were guarantees (session 40) the busy simulated day's six teams without a quota ran on borrowed room, and
    # reclaiming it at once, hours into 8-GPU jobs and gangs, lost 2.7 % of the GPU time (median of seeds 1-6);
    # with these two, and borrowed victims ranked by the work they lose, 0.56 % (bench/RESULTS.md, session 41).
    reclaim_after: float | None = 3600.0
    # a job waiting longer than this is starved: it goes first in line, ahead of priority and fair share,
    # may borrow beyond its queue's quota there, and holds nodes even when another reservation is in force
    # (None: never). Without it an 8-GPU job of low priority, or of a queue over its quota, waits hours:
    # every cycle the work ahead of it in line takes the whole nodes that free up, one GPU at a time.
    # Off by default: on the busy simulated day (bench/RESULTS.md) the starved low-priority jobs it
    # started were preempted minutes later by normal work, tripling preemptions for shorter 8-GPU waits.
    starve_after: float | None = None
    max_starved: int = 4  # starved jobs put first in one cycle, the oldest first; each may hold nodes
    # a job of a queue over its quota that needs whole nodes and has waited longer than this may hold nodes in
    # phase 4 when no job inside its quota holds any this cycle (None: never). Phase 4 only places, and a gang
    # of eight whole nodes never finds them free by chance: on the busy simulated day such gangs never started.
    # Off by default: on that day (bench/RESULTS.md, session 7) it started one more gang and cut preemptions
    # 258 -> 132, but the nodes held for borrowing gangs raised the 8-GPU class's mean wait 28 -> 46 min.
    reserve_borrowing_after: float | None = None


class JobClass(NamedTuple):
    """Jobs that meet the same fate this cycle: a job like one already turned away is turned away
    for the same reason, without a search of its own (:attr:`Memo.turned_away`)."""

    queue: str | tuple[str, str]  # its name, or (name, team) for a job of another team than the queue's
    shape: int  # :attr:`ShapeFit.id`
    priority: int
    outlasts: tuple[bool, ...]  # for each reservation (:attr:`Cycle.starts`): would it still run then?
    borrowing: bool  # considered after the line, beyond its queue's quota
    preemptible: bool
    epoch: int  # :attr:`Cycle.epoch` then: a preemption frees room, so earlier answers lapse
    waited: int  # how many of the waits that widen whom it may stop it has passed (:attr:`_Planner.waits`)


@dataclass(slots=True)
class Memo:
    """What the cycle learnt from one job that holds for every job like it, for the rest of the cycle.

    Only jobs that may preempt anyone (``last_preempted_by`` None) write the class answers
    (``turned_away``, ``deferrable``): one that may not preempt the job that preempted it has fewer
    choices, so it reads them but never writes them."""

    shapes: dict[Shape, ShapeFit] = field(default_factory=dict)  # every shape seen, ids in order of first sight
    turned_away: dict[JobClass, tuple[Status, ShapeFit]] = field(default_factory=dict)  # the first one's fate
    # class -> Rooms.quota_runs when one was deferred: while no quota search has run since, its quota
    # stays full and room only shrinks, so the next one is deferred too
    deferrable: dict[JobClass, int] = field(default_factory=dict)
    # (shape id, GPU types) -> the reservations it outlasted when placing it failed: a job of that shape
    # outlasting no fewer of them fails too (`outlasts` compared element-wise)
    failed: dict[tuple[int, tuple], tuple[bool, ...]] = field(default_factory=dict)
    # (shape id, GPU types) that could not get a reservation even once all running work had ended
    no_reservation: set[tuple[int, tuple]] = field(default_factory=set)

    def new_shape(self, shape: Shape, types: tuple) -> ShapeFit:
        fit = self.shapes[shape] = ShapeFit(len(self.shapes), types, shape)
        return fit


@dataclass(slots=True)
class Cycle:
    """What the phases of one cycle and :class:`room.Rooms` read and change together."""

    now: float
    opt: Options
    running: list[RunningJob]
    cl: Cluster  # free room, taken as jobs are placed or claim room
    quotas: Quotas  # each queue's usage, grown as jobs are admitted, claim room or are reserved
    shares: Shares  # each team's dominant share, grown likewise
    held: dict[str, Held]  # attempt id -> what it holds over all its replicas
    out: Plan = field(default_factory=Plan)
    left: list[Entry] = field(default_factory=list)  # jobs left pending, in line order
    starts: list[float] = field(default_factory=list)  # reservation starts as backfill compares them (-INF: unknown)
    searches: int = 0  # O(nodes) room searches left to this cycle
    epoch: int = 0  # bumped by each preemption: room coming back may change an earlier answer

    def charge(self, job: PendingJob, q: Queue, t: str | None) -> None:
        """Count an admitted (or about to start) job against its queue's quota and its team's share."""
        n = job.replicas
        self.quotas.admit(q, job, t)
        self.shares.add(job.team, job.cpu * n, job.memory * n, t, job.gpu * n)


@dataclass(slots=True)
class Survey:
    """What the running attempts can hand back, for :class:`room.Rooms`: preemptible work below each
    priority and in each limited queue, the attempts on each node, and who runs on borrowed quota."""

    by_prio: dict[int, list]  # priority -> [cores, {GPU type: GPUs}]
    by_queue: dict[tuple[str, int], list]  # (queue, priority) -> [cores, memory, {GPU type: GPUs}, GPUs]
    on: dict[str, list[RunningJob]]  # node -> attempts there that might be preempted, in running order
    borrowing_queues: set[str] = field(default_factory=set)  # queues running work beyond their quota
    lent: dict = field(default_factory=dict)  # that work's room by (queue, GPU type or None for cores), and by type


def snapshot(nodes: list[Node], running: list[RunningJob], queues: list[Queue], now: float,
             opt: Options) -> tuple[Cycle, Survey]:
    """Phase 1: the cluster's free room, each queue's usage, each team's share, what may be preempted."""
    cl = Cluster(nodes)
    c = Cycle(now, opt, list(running), cl, Quotas({q.name: q for q in queues} or {"default": default_queue()}),
              Shares(cl.cpu_total, cl.mem_total, cl.gpu_cap), {}, searches=opt.max_searches)
    sv = _survey(c)
    borrowed, held = c.quotas.borrowed, c.held
    for r in c.running if borrowed else ():
        if r.attempt_id in borrowed and r.preemptible and not r.stopping:
            h = held[r.attempt_id]
            cpu, gtype, gpus = h.cpu, h.gpu_type, h.gpus
            sv.borrowing_queues.add(r.queue)
            for k, v in ((None, cpu), (gtype, gpus)):
                if v:
                    sv.lent[(r.queue, k)] = sv.lent.get((r.queue, k), 0) + v
                    sv.lent[k] = sv.lent.get(k, 0) + v
    return c, sv


def _survey(c: Cycle) -> Survey:
    """One pass over the running attempts for all the cycle needs of them: what each holds, their
    teams' shares, the room of stopping ones, what counts against quotas, and what each priority
    (and each limited queue) could hand back if preempted, and where. There are thousands, their
    objects spread over memory, so every extra pass costs; this is the only full one."""
    cl, quotas, borrowed = c.cl, c.quotas, c.quotas.borrowed
    guarded = quotas.guarded
    type_of = cl.type_of
    tot = c.held
    by_team: dict[tuple, list] = {}
    limits: dict[str, tuple] = {}  # queue -> (has a quota, has a quota or a cap on running jobs)
    limited: list[RunningJob] = []
    # Victims' room is summed per priority (and per queue and priority in limited queues), in running
    # order, so each bound is the same float whichever way it is asked for.
    by_prio: dict[int, list] = {}
    by_queue: dict[tuple, list] = {}
    on: dict[str, list] = {}
    # Thousands of attempts come in a few sizes: each size's Held is made once and shared, since making
    # an object per attempt would cost as much as the rest of this loop's bookkeeping for it.
    sizes: dict[tuple, Held] = {}
    for r in c.running:
        reps, aid = r.replicas, r.attempt_id
        one = len(reps) == 1
        if one:
            p = reps[0]
            node = p.node
            g = len(p.gpu_ids)
            size = (p.cpu, p.memory, type_of.get(node) if g else None, g)
            t = sizes.get(size)
            if t is None:
                t = sizes[size] = Held(*size)
        else:
            t = totals(r, type_of)
            size = (t.cpu, t.memory, t.gpu_type, t.gpus)
        tot[aid] = t
        cpu, mem, gtype, gpus = size
        acc = by_team.get((r.team, gtype))
        if acc is None:
            acc = by_team[(r.team, gtype)] = [0.0, 0, 0]
        acc[0] += cpu
        acc[1] += mem
        acc[2] += gpus
        if r.borrowed:
            borrowed.add(aid)
        if r.stopping:  # its room comes back soon, and it is no victim
            for p in reps:
                if p.node in cl.by_name:
                    cl.add_soon(cl.by_name[p.node], p.cpu, p.memory, len(p.gpu_ids))
            if r.preempted:  # its share is handed back: the job it was stopped for took it
                continue
        lim = limits.get(r.queue)
        if lim is None:
            q = quotas.queue(r.queue)
            lim = limits[r.queue] = (has_quota(q), has_quota(q) or q.max_running is not None)
        if lim[1]:
            limited.append(r)
        if guarded and not lim[0]:  # no quota guarantees it, while others have one: borrowed
            borrowed.add(aid)
        if not r.preemptible or r.stopping:  # never a victim, whatever it borrowed
            continue
        prio = r.priority
        a = by_prio.get(prio)
        if a is None:
            a = by_prio[prio] = [0.0, {}]
        a[0] += cpu
        if gtype is not None:
            a[1][gtype] = a[1].get(gtype, 0.0) + gpus
        if lim[0] or guarded:  # a borrower without a quota stops work of its own queue (Rooms._swap_in_queue)
            qa = by_queue.get((r.queue, prio))
            if qa is None:
                qa = by_queue[(r.queue, prio)] = [0.0, 0.0, {}, 0.0]
            qa[0] += cpu
            qa[1] += mem
            if gpus:
                qa[2][gtype] = qa[2].get(gtype, 0.0) + gpus
                qa[3] += gpus
        if one:  # most attempts: one replica, so one node to list it on
            lst = on.get(node)
            if lst is None:
                on[node] = [r]
            elif lst[-1] is not r:
                lst.append(r)
            continue
        for p in reps:
            lst = on.get(p.node)
            if lst is None:
                on[p.node] = [r]
            elif lst[-1] is not r:
                lst.append(r)
    quotas.count(limited, tot)
    for (team, gtype), (cpu, mem, gpus) in by_team.items():
        c.shares.add(team, cpu, mem, gtype, gpus)
    return Survey(by_prio, by_queue, on)
