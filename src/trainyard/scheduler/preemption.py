"""Preemption: which running attempts to stop so a blocked job fits, freeing the least work.

A job may take room from (a) preemptible attempts of strictly lower priority
and (b) attempts running on borrowed quota when the job itself is inside its
queue's quota (the lender takes its room back). Never from the job that last
preempted it, so two jobs cannot preempt each other in turn; and strict
priority plus "only inside-quota jobs reclaim" means no other loop exists.

Victims are ranked borrowed first, then lowest priority, then least work lost
(elapsed time × dominant share of the cluster). Per replica, the search picks
the node needing the cheapest set of victims (greedy in rank order, then
pruned of any victim not needed), treating a victim gang as a whole: stopping
one replica stops them all, and frees room on every node they held.

The same search with no victims finds room that stopping attempts will hand
back (:meth:`Cluster.claim`), so a job waiting on them does not preempt more.
"""

from __future__ import annotations

from bisect import bisect_left

from trainyard.scheduler.cluster import EPS, Cluster, Slot
from trainyard.scheduler.model import PendingJob, RunningJob

Cost = tuple  # (victims not borrowed, highest victim priority, work lost)
ZERO: Cost = (0, -(10**18), 0.0)


class Victims:
    """Running attempts on each node that some job might preempt, cheapest first."""

    def __init__(self, cl: Cluster, running: list[RunningJob], borrowed: set[str], totals: dict[str, tuple],
                 now: float) -> None:
        self.cl = cl
        # slot -> [(cost, attempt, cpu, mem, gpus held on this slot, borrowed)], cheapest first
        self.on: dict[Slot, list[tuple]] = {}
        self.taken: set[str] = set()  # chosen this cycle
        self.cost: dict[str, Cost] = {}
        inv_c = 1 / cl.cpu_total if cl.cpu_total else 0.0
        inv_g = 1 / cl.gpu_total if cl.gpu_total else 0.0
        by_name, on = cl.by_name, self.on
        for r in running:
            b = r.attempt_id in borrowed
            if r.stopping or not (r.preemptible or b):
                continue
            cpu, _, _, gpus = totals[r.attempt_id]
            cost = self.cost[r.attempt_id] = (0 if b else 1, r.priority,
                                              max(now - r.started_at, 1.0) * max(cpu * inv_c, gpus * inv_g))
            if len(r.replicas) == 1:
                p = r.replicas[0]
                ps = by_name.get(p.node)
                if ps is not None:
                    on.setdefault(ps, []).append((cost, r, p.cpu, p.memory, len(p.gpu_ids), b))
                continue
            here: dict[Slot, list] = {}
            for p in r.replicas:
                ps = by_name.get(p.node)
                if ps is not None:
                    h = here.setdefault(ps, [0.0, 0, 0])
                    h[0] += p.cpu
                    h[1] += p.memory
                    h[2] += len(p.gpu_ids)
            for ps, h in here.items():
                on.setdefault(ps, []).append((cost, r, h[0], h[1], h[2], b))
        self.most: dict[Slot, tuple] = {}  # slot -> all its victims' room together: a quick upper bound
        for ps, lst in on.items():
            if len(lst) > 1:
                lst.sort(key=_cost)
            self.most[ps] = (sum(e[2] for e in lst), sum(e[3] for e in lst), sum(e[4] for e in lst))


def _cost(e: tuple) -> tuple:
    return e[0]


class Releasable:
    """How much preemptible work below a priority holds, per GPU type (None: cores anywhere).

    A necessary condition checked in O(log n) before an O(nodes) search: if all
    the lower-priority work together cannot make room, no search can.
    """

    def __init__(self) -> None:
        self.items: dict[str | None, list] = {}
        self.ready: dict[str | None, tuple] = {}

    def add(self, key: str | None, priority: int, amount: float) -> None:
        self.items.setdefault(key, []).append((priority, amount))

    def below(self, key: str | None, priority: int) -> float:
        r = self.ready.get(key)
        if r is None:
            items = sorted(self.items.get(key, ()))
            sums, acc = [], 0.0
            for _, a in items:
                acc += a
                sums.append(acc)
            r = self.ready[key] = ([p for p, _ in items], sums)
        i = bisect_left(r[0], priority)
        return r[1][i - 1] if i else 0.0


def _fits(v: list, c: float, m: int, g: int) -> bool:
    return v[0] + EPS >= c and v[1] >= m and v[2] >= g


def search(cl: Cluster, job: PendingJob, types: list, sel: tuple, end: float,
           victims: Victims | None = None, reclaim: bool = False, pre: tuple = ()):
    """``(gpu type, [slot per replica], [victims])`` letting ``job`` start, or None.

    Room counts free room, room of stopping attempts not yet claimed, and
    room of the chosen victims (``pre`` are chosen already, for the queue's
    quota). Reserved nodes are left to their reservation.
    """
    c, m, g, n = job.cpu, job.memory, job.gpu, job.replicas
    spread = n > 1 and job.placement == "spread"
    most = victims.most if victims is not None else {}
    for t in types:
        cands = [s for s in cl.holders(job, t, sel) if s.resv is None or end <= s.resv[0]]
        virt: dict[Slot, list] = {}
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
                v = room(s)
                if _fits(v, c, m, g):
                    best, best_cost, best_set = s, ZERO, []
                    break
                if victims is None:
                    continue
                top = most.get(s)
                if top is None or v[2] + top[2] < g or v[0] + top[0] + EPS < c or v[1] + top[1] < m:
                    continue
                need = _victims_on(victims.on.get(s), v, c, m, g, job, reclaim, victims.taken, chosen)
                if need is None:
                    continue
                cost = (sum(e[0][0] for e in need), max(e[0][1] for e in need), sum(e[0][2] for e in need))
                if best_cost is None or cost < best_cost:
                    best, best_cost, best_set = s, cost, need
            if best is None:
                break
            for e in best_set:
                chosen[e[1].attempt_id] = e[1]
                _free(cl, e[1], room)
            v = room(best)
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


def _victims_on(on: list | None, v: list, c: float, m: int, g: int, job: PendingJob, reclaim: bool,
                taken: set, chosen: dict) -> list | None:
    """The cheapest set of victims on one node that makes room, pruned to those needed."""
    if not on:
        return None
    prio, queue, last = job.priority, job.queue, job.last_preempted_by
    ac, am, ag = v[0] + EPS, v[1], v[2]
    need = []
    for e in on:
        r = e[1]
        if r.attempt_id in taken or r.attempt_id in chosen or r.job_id == last:
            continue
        if not ((r.preemptible and r.priority < prio) or (reclaim and e[5] and r.queue != queue)):
            continue
        ac += e[2]
        am += e[3]
        ag += e[4]
        need.append(e)
        if ac >= c and am >= m and ag >= g:
            break
    else:
        return None
    for e in reversed(need[:-1]):  # the last one was needed; drop any earlier one that was not
        if ac - e[2] >= c and am - e[3] >= m and ag - e[4] >= g:
            ac, am, ag = ac - e[2], am - e[3], ag - e[4]
            need.remove(e)
    return need
