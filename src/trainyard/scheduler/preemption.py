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

from trainyard.scheduler.cluster import EPS, Cluster, Slot
from trainyard.scheduler.model import PendingJob, RunningJob

Cost = tuple  # (victims not borrowed, highest victim priority, work lost)
ZERO: Cost = (0, -(10**18), 0.0)


class Victims:
    """Running attempts on each node that some job might preempt, cheapest first."""

    def __init__(self, cl: Cluster, running: list[RunningJob], borrowed: set[str], now: float) -> None:
        self.cl = cl
        # slot -> [(cost, attempt, cpu, mem, gpus held on this slot, borrowed)], cheapest first
        self.on: dict[Slot, list[tuple]] = {}
        self.cost: dict[str, Cost] = {}
        self.taken: set[str] = set()  # chosen this cycle
        inv_c = 1 / cl.cpu_total if cl.cpu_total else 0.0
        inv_g = 1 / cl.gpu_total if cl.gpu_total else 0.0
        for r in running:
            b = r.attempt_id in borrowed
            if r.stopping or not (r.preemptible or b):
                continue
            size = max(sum(p.cpu for p in r.replicas) * inv_c, sum(len(p.gpu_ids) for p in r.replicas) * inv_g)
            cost = self.cost[r.attempt_id] = (0 if b else 1, r.priority, max(now - r.started_at, 1.0) * size)
            here: dict[Slot, list] = {}
            for p in r.replicas:
                ps = cl.by_name.get(p.node)
                if ps is not None:
                    h = here.setdefault(ps, [0.0, 0, 0])
                    h[0] += p.cpu
                    h[1] += p.memory
                    h[2] += len(p.gpu_ids)
            for ps, h in here.items():
                self.on.setdefault(ps, []).append((cost, r, h[0], h[1], h[2], b))
        for lst in self.on.values():
            lst.sort(key=lambda e: e[0])


def _fits(v: list, c: float, m: int, g: int) -> bool:
    return v[0] + EPS >= c and v[1] >= m and v[2] >= g


def search(cl: Cluster, job: PendingJob, types: list, sel: tuple, end: float,
           victims: Victims | None = None, reclaim: bool = False):
    """``(gpu type, [slot per replica], [victims])`` letting ``job`` start, or None.

    Room counts free room, room of stopping attempts not yet claimed, and
    room of the chosen victims. Reserved nodes are left to their reservation.
    """
    c, m, g, n = job.cpu, job.memory, job.gpu, job.replicas
    spread = n > 1 and job.placement == "spread"
    for t in types:
        cands = [s for s in (cl.typed.get(t, []) if g else cl.slots)
                 if (s.resv is None or end <= s.resv[0]) and cl.holds(s, job, t, sel)]
        virt: dict[Slot, list] = {}
        chosen: dict[str, RunningJob] = {}
        picks: list[Slot] = []

        def room(s: Slot) -> list:
            v = virt.get(s)
            if v is None:
                sn = s.soon or (0.0, 0, 0)
                v = virt[s] = [s.cpu + sn[0], s.mem + sn[1], s.g + sn[2]]
            return v

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
                need = _victims_on(victims.on.get(s), v, c, m, g, job, reclaim, victims.taken, chosen)
                if need is None:
                    continue
                cost = (sum(e[0][0] for e in need), max(e[0][1] for e in need), sum(e[0][2] for e in need))
                if best_cost is None or cost < best_cost:
                    best, best_cost, best_set = s, cost, need
            if best is None:
                break
            for e in best_set:
                r = e[1]
                chosen[r.attempt_id] = r
                for p in r.replicas:
                    ps = cl.by_name.get(p.node)
                    if ps is not None:
                        pv = room(ps)
                        pv[0] += p.cpu
                        pv[1] += p.memory
                        pv[2] += len(p.gpu_ids)
            v = room(best)
            v[0] -= c
            v[1] -= m
            v[2] -= g
            picks.append(best)
        else:
            return t, picks, list(chosen.values())
    return None


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
