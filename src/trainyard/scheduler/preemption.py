"""Preemption: which running attempts to stop so a blocked job fits, freeing the least work.

A job may take room from (a) preemptible attempts of strictly lower priority
that are not guaranteed to another team, and (b) preemptible attempts running
on borrowed quota of another queue when the job itself is inside its queue's
quota (the lender takes its room back). As in Kueue, a quota is a guarantee:
once some queue has one, work inside a queue's quota is a victim of priority
only for its own team, and work of a queue without any quota counts as
borrowed. With no quota anywhere nothing is guaranteed.
Never from non-preemptible work, nor from the job that last preempted it.
No loop can form: priority is strict, borrowing jobs never preempt, and a
preempted job waits until the job that preempted it has started (the
planner holds it back), so it never competes for the room it handed over.

A lender stops borrowed work only within ``Options.reclaim_within`` of its
run, and otherwise waits for it to end, until its job has waited longer than
``Options.reclaim_after``: then any borrowed work in its way is its victim.
Reclaiming borrowed work hours in was most of the work lost on the busy
simulated day (bench/RESULTS.md, session 41).

Priority throws away at most ``Options.preempt_within`` of an attempt's run:
older work with a timeout is no victim of priority (only of a lender reclaiming
its room), so the job that wanted its room waits for it to end, which its
timeout bounds. Work without a timeout could hold its room for ever, so it
becomes a victim again of a job that has itself waited longer than the cap. Without that cap, low-priority
gangs that started in a gap were stopped hours in, and most of the work
preemption lost was theirs.

Victims are ranked borrowed first, by least work lost (elapsed time × dominant
share of the cluster) whatever their priority: borrowed work is another team's,
whose priorities rank only its own team's work; then lowest priority, then least
work lost. Per replica, the search picks
the node needing the cheapest set of victims (greedy in rank order, then
pruned of any victim not needed), treating a victim gang as a whole: stopping
one replica stops them all, and frees room on every node they held.

The same search with no victims finds room that stopping attempts will hand
back (:meth:`Cluster.claim`), so a job waiting on them does not preempt more.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

from trainyard.scheduler.cluster import EPS, Cluster, Slot
from trainyard.scheduler.model import PendingJob, RunningJob
from trainyard.scheduler.quota import Held

Cost = tuple  # (victims not borrowed, highest victim priority (LOWEST for borrowed work), work lost)
LOWEST = -(10**18)
ZERO: Cost = (0, LOWEST, 0.0)


@dataclass(slots=True)
class Victim:
    """One attempt a job might preempt, and what it holds on one node."""

    cost: Cost
    attempt: RunningJob
    cpu: float  # on this node
    memory: int
    gpus: int
    borrowed: bool  # runs beyond its queue's quota


class Victims:
    """Attempts on each node that some job might preempt, cheapest first, built per node on first use."""

    def __init__(self, cl: Cluster, on: dict[str, list[RunningJob]], borrowed: set[str],
                 totals: dict[str, Held], now: float, within: float | None = None,
                 untimed: float | None = None, starved: float | None = None, reclaim: float | None = None,
                 guarded: bool = False, reclaim_after: float | None = None) -> None:
        self.cl, self.raw, self.borrowed, self.totals, self.now = cl, on, borrowed, totals, now
        self.guarded = guarded  # some queue has a quota: work inside one is guaranteed (Quotas.guarded)
        self.since = now - within if within is not None else -float("inf")  # older: no victim of priority
        # older, with a timeout: no victim of a lender reclaiming its room (Options.reclaim_within)
        self.reclaim_since = now - reclaim if reclaim is not None else -float("inf")
        self.reclaim_after = reclaim_after  # ... unless the lender's job has waited longer (Options.reclaim_after)
        self.starved = starved if starved is not None else float("inf")  # waited longer: no victim of priority
        self.patience = untimed if untimed is not None else within  # a job that waited longer may stop untimed work
        self.taken: set[str] = set()  # chosen this cycle
        self.cost: dict[str, Cost] = {}
        self._on: dict[Slot, list] = {}
        self._most: dict[Slot, tuple] = {}
        self._floor: dict[Slot, tuple] = {}
        self.inv_c = 1 / cl.cpu_total if cl.cpu_total else 0.0
        self.inv_g = 1 / cl.gpu_total if cl.gpu_total else 0.0

    def patient(self, job: PendingJob) -> bool:
        """Has ``job`` waited longer than the cap? Then old work without a timeout, whose end nothing
        bounds, is its victim too: its wait is bounded by the cap, not by work that may never end."""
        return job.submitted_at is not None and self.patience is not None and \
            self.now - job.submitted_at > self.patience

    def reclaims_old(self, job: PendingJob) -> bool:
        """Has ``job`` waited longer than ``Options.reclaim_after``? Then, inside its quota, any borrowed work in
        its way is its victim, however long it has run: a lender waits for its room at most that long."""
        return job.submitted_at is not None and self.reclaim_after is not None and \
            self.now - job.submitted_at > self.reclaim_after

    def rule(self, job: PendingJob, reclaim: bool, borrower: bool = False):
        """The one test of which attempts ``job`` may stop, as ``may(attempt, borrowed)``: every search
        and every bound on what a search could free asks it, so no bound counts a victim no search takes.

        Priority stops preemptible work of lower priority that is not guaranteed to another team (of the
        job's team or its queue, or borrowed, or with no quota anywhere), that started within
        ``Options.preempt_within`` (or, for a :meth:`patient` job, old work without a timeout), and whose
        job did not wait past ``Options.starve_after`` before it started (it went first in line for having
        waited: stopping it minutes in sent it back to wait, to be started and stopped again). A
        ``borrower`` (a job of a queue without a quota while others have one: all it runs on is borrowed)
        stops only work of its own queue, as a job beyond its quota does: were it to stop another queue's
        work, that queue would reclaim the room, and the two would take turns. With ``reclaim`` (a job
        inside its queue's quota), borrowed work of other queues too, if it started within
        ``Options.reclaim_within`` or the job has waited past ``Options.reclaim_after`` (with that off,
        borrowed work without a timeout, whose end nothing bounds, whatever its age)."""
        prio, queue, team, guarded = job.priority, job.queue, job.team, self.guarded
        anyone = not borrower
        since, starved, reclaim_since, patient = self.since, self.starved, self.reclaim_since, self.patient(job)
        old_too = self.reclaims_old(job)
        untimed_too = self.reclaim_after is None

        def may(r: RunningJob, borrowed: bool) -> bool:
            if not r.preemptible:
                return False
            if r.priority < prio and (r.queue == queue or anyone and (borrowed or not guarded or r.team == team)) and (
                    r.started_at >= since or (patient and r.expected_end is None)) and (
                    r.submitted_at is None or r.started_at - r.submitted_at <= starved):
                return True
            return reclaim and borrowed and r.queue != queue and (
                r.started_at >= reclaim_since or old_too or untimed_too and r.expected_end is None)
        return may

    def cost_of(self, r: RunningJob) -> Cost:
        aid = r.attempt_id
        c = self.cost.get(aid)
        if c is None:  # once per attempt on every node a search visits: conditionals, not max() calls
            held = self.totals[aid]
            size, gsize = held.cpu * self.inv_c, held.gpus * self.inv_g
            age = self.now - r.started_at
            lent = aid in self.borrowed
            c = self.cost[aid] = (0 if lent else 1, LOWEST if lent else r.priority,
                                  (age if age > 1.0 else 1.0) * (gsize if gsize > size else size))
        return c

    def on(self, s: Slot) -> list[Victim]:
        lst = self._on.get(s)
        if lst is None:
            lst, name, costs, borrowed = [], s.name, self.cost, self.borrowed
            cost_of = self.cost_of
            for r in self.raw.get(name, ()):
                reps = r.replicas
                if len(reps) == 1:  # most attempts: one replica, and it is on this node
                    p = reps[0]
                    c, m, g = p.cpu, p.memory, len(p.gpu_ids)
                else:
                    c = m = g = 0
                    for p in reps:
                        if p.node == name:
                            c += p.cpu
                            m += p.memory
                            g += len(p.gpu_ids)
                aid = r.attempt_id
                lst.append(Victim(costs.get(aid) or cost_of(r), r, c, m, g, aid in borrowed))
            lst.sort(key=_cost)
            self._on[s] = lst
            c = m = g = 0
            for e in lst:  # summed in the order the victims are tried, so the bound is exactly their room
                c += e.cpu
                m += e.memory
                g += e.gpus
            self._most[s] = (c, m, g)
        return lst

    def may_free(self, s: Slot, prio: int, reclaim: bool, queue: str) -> bool:
        """Could any attempt on ``s`` be a victim of a job of priority ``prio`` in ``queue``? A busy
        cluster is mostly nodes full of work at the job's own priority: this skips them without
        costing and sorting their attempts (:meth:`on`)."""
        f = self._floor.get(s)
        if f is None:
            raw = self.raw.get(s.name, ())
            f = self._floor[s] = (min((r.priority for r in raw), default=None),
                                  {r.queue for r in raw if r.attempt_id in self.borrowed})
        return (f[0] is not None and f[0] < prio) or (reclaim and bool(f[1]) and not f[1] <= {queue})

    def most(self, s: Slot) -> tuple | None:
        """All this node's victims' room together: a quick upper bound."""
        if s not in self._most:
            self.on(s)
        return self._most[s] if self._on[s] else None


_cost = attrgetter("cost")  # sort key of a victim


class Releasable:
    """How much preemptible work below a priority holds, per key (a GPU type, None for cores, …).

    A necessary condition checked in O(log n) before an O(nodes) search: if all
    the lower-priority work together cannot make room, no search can.
    """

    def __init__(self, amounts: dict[tuple, float]) -> None:  # (key, priority) -> amount
        self.by: dict = {}
        for (key, prio), v in amounts.items():
            self.by.setdefault(key, []).append((prio, v))
        self.ready: dict = {}

    def below(self, key, priority: int) -> float:
        r = self.ready.get(key)
        if r is None:
            items = sorted(self.by.get(key, ()))
            sums, acc = [], 0.0
            for _, a in items:
                acc += a
                sums.append(acc)
            r = self.ready[key] = ([p for p, _ in items], sums)
        i = bisect_left(r[0], priority)
        return r[1][i - 1] if i else 0.0


class Failure(NamedTuple):
    """One room search that failed, as :class:`Failures` compares them."""

    types: frozenset  # GPU types searched
    cpu: float  # per replica
    memory: int
    gpu: int
    replicas: int
    spread: bool
    labels: frozenset  # node selector pairs
    context: tuple  # what else the search depended on (the epoch, the queue's borrowed work)
    priority: int
    outlasts: tuple[bool, ...]  # the reservations it would have run past


class Failures:
    """Room searches that failed this cycle. Room only shrinks within a cycle, so a job that asks
    at least as much, on no more GPU types, with no fewer labels, at no higher priority and under
    the same reservations, fails too, without an O(nodes) search of its own."""

    def __init__(self) -> None:
        self.items: list[Failure] = []

    @staticmethod
    def _key(job: PendingJob, types: tuple, sel: tuple, sig: tuple, context: tuple) -> Failure:
        return Failure(frozenset(types), job.cpu, job.memory, job.gpu, job.replicas, job.placement == "spread",
                       frozenset(sel), context, job.priority, sig)

    def covers(self, job: PendingJob, types: tuple, sel: tuple, sig: tuple, context: tuple) -> bool:
        k = self._key(job, types, sel, sig, context)
        for f in self.items:
            if (f.context == k.context and f.priority >= k.priority and f.cpu <= k.cpu + EPS
                    and f.memory <= k.memory and f.gpu <= k.gpu and f.replicas <= k.replicas
                    and f.spread <= k.spread and f.types >= k.types and f.labels <= k.labels
                    # more reservations in force: no easier
                    and all(a <= b for a, b in zip(f.outlasts, k.outlasts))):
                return True
        return False

    def add(self, job: PendingJob, types: tuple, sel: tuple, sig: tuple, context: tuple) -> None:
        self.items.append(self._key(job, types, sel, sig, context))


def _fits(v: list, c: float, m: int, g: int) -> bool:
    return v[0] + EPS >= c and v[1] >= m and v[2] >= g


def search(cl: Cluster, job: PendingJob, types: list, sel: tuple, end: float, victims: Victims | None = None,
           reclaim: bool = False, pre: tuple = (), spare_job: str | None = None, bound=None,
           only_queue: str | None = None, borrower: bool = False):
    """``(gpu type, [slot per replica], [victims])`` letting ``job`` start, or None.

    Room counts free room, room of stopping attempts not yet claimed, and
    room of the chosen victims (``pre`` are chosen already, for the queue's
    quota). On a node held for a reservation, work that may run past its
    start only gets what the reservation leaves over, and preempts nothing.
    Attempts of job ``spare_job`` are never chosen, nor, with ``only_queue``, those of other
    queues; which others may be is :meth:`Victims.rule`'s to say (``borrower``: see there). ``bound(t)``,
    if given, maps each node of type ``t`` to at least the room of all the victims this job may choose there.
    """
    c, m, g, n = job.cpu, job.memory, job.gpu, job.replicas
    prio, queue = job.priority, job.queue
    spread = n > 1 and job.placement == "spread"
    may = victims.rule(job, reclaim, borrower) if victims is not None else None
    for t in types:
        cands = cl.holders(job, t, sel)
        upper = bound(t) if bound is not None else None
        virt: dict[Slot, list] = {}
        spare: dict[Slot, list] = {}  # what held nodes leave over, as this search uses it
        chosen: dict[str, RunningJob] = {}
        picks: list[Slot] = []

        def room(s: Slot) -> list:
            v = virt.get(s)
            if v is None:
                sn = s.soon or (0.0, 0, 0)
                v = virt[s] = [s.cpu + sn[0], s.mem + sn[1], s.g + sn[2]]
            return v

        for r in pre:
            chosen[r.attempt_id] = r
            _free(cl, r, room)
        for _ in range(n):
            best, best_cost, best_set = None, None, None
            for s in cands:
                if spread and s in picks:
                    continue
                v = virt.get(s)
                if v is None:  # untouched by this search: read the node, build nothing (most nodes)
                    sn = s.soon
                    v = (s.cpu, s.mem, s.g) if sn is None else (s.cpu + sn[0], s.mem + sn[1], s.g + sn[2])
                r = s.resv
                if r is not None and end > r[0]:
                    left = spare.get(s)
                    if left is None:
                        left = spare[s] = r[1:]
                    if _fits(v, c, m, g) and _fits(left, c, m, g):
                        best, best_cost, best_set = s, ZERO, []
                        break
                    continue
                if v[0] + EPS >= c and v[1] >= m and v[2] >= g:
                    best, best_cost, best_set = s, ZERO, []
                    break
                if victims is None or not victims.may_free(s, prio, reclaim, queue):
                    continue
                if upper is not None:  # even every victim it may choose here is too little (2 EPS: the
                    b = upper[s]  # bound adds the same room in another order, so allow for rounding)
                    if v[0] + b[0] + 2 * EPS < c or v[1] + b[1] < m or v[2] + b[2] < g:
                        continue
                top = victims.most(s)
                if top is None or v[2] + top[2] < g or v[0] + top[0] + EPS < c or v[1] + top[1] < m:
                    continue
                need = _victims_on(victims.on(s), v, c, m, g, may, victims.taken, chosen, spare_job, only_queue)
                if need is None:
                    continue
                if len(need) == 1:  # one victim (the usual case): the set costs what it costs
                    cost = need[0].cost
                else:
                    cost = (sum(e.cost[0] for e in need), max(e.cost[1] for e in need), sum(e.cost[2] for e in need))
                if best_cost is None or cost < best_cost:
                    best, best_cost, best_set = s, cost, need
            if best is None:
                break
            for e in best_set:
                chosen[e.attempt.attempt_id] = e.attempt
                _free(cl, e.attempt, room)
            for v in (room(best), spare.get(best)):
                if v is not None:
                    v[0] -= c
                    v[1] -= m
                    v[2] -= g
            picks.append(best)
        else:
            return t, picks, list(chosen.values())
    return None


def _free(cl: Cluster, r: RunningJob, room) -> None:
    for p in r.replicas:  # a gang stops whole: its room comes back on every node it held
        ps = cl.by_name.get(p.node)
        if ps is not None:
            pv = room(ps)
            pv[0] += p.cpu
            pv[1] += p.memory
            pv[2] += len(p.gpu_ids)


def _victims_on(on: list | None, v: list, c: float, m: int, g: int, may, taken: set, chosen: dict,
                last: str | None, only: str | None = None) -> list | None:
    """The cheapest set of victims on one node that makes room, pruned to those needed: attempts ``may``
    allows (:meth:`Victims.rule`), not taken already, not of job ``last``, and of queue ``only`` if given."""
    if not on:
        return None
    ac, am, ag = v[0] + EPS, v[1], v[2]
    need = []
    for e in on:
        r = e.attempt
        if r.attempt_id in taken or r.attempt_id in chosen or r.job_id == last or (only and r.queue != only) \
                or not may(r, e.borrowed):
            continue
        ac += e.cpu
        am += e.memory
        ag += e.gpus
        need.append(e)
        if ac >= c and am >= m and ag >= g:
            break
    else:
        return None
    for e in reversed(need[:-1]):  # the last one was needed; drop any earlier one that was not
        if ac - e.cpu >= c and am - e.memory >= m and ag - e.gpus >= g:
            ac, am, ag = ac - e.cpu, am - e.memory, ag - e.gpus
            need.remove(e)
    return need
