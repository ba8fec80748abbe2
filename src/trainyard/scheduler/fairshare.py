"""Fair share: the order in which pending jobs are considered.

Priority first (the job's, then its queue's). Within one priority, teams take
turns by dominant resource share (DRF, Ghodsi et al. 2011): the team whose
largest share of any one resource (cores, memory, GPUs of each type) is the
smallest goes next, and its share grows as its jobs are admitted during the
cycle. Within a team, submit order. So a team that submits 1,000 jobs does not
lock out a team that submits one: the one job goes first whenever its team
holds less.
"""

from __future__ import annotations

import heapq
from typing import Iterator

from trainyard.scheduler.model import PendingJob, Queue


class Shares:
    """Dominant resource share per team, against the whole cluster's capacity.

    Usage only grows during a cycle, so the dominant share is a running max.
    """

    def __init__(self, cpu: float, mem: float, gpus: dict[str, int]) -> None:
        self.inv_cpu = 1 / cpu if cpu else 0.0
        self.inv_mem = 1 / mem if mem else 0.0
        self.inv_gpu = {t: 1 / n for t, n in gpus.items() if n}
        self.used: dict[str, list] = {}  # team -> [cpu, mem, {gpu type: count}]
        self.share: dict[str, float] = {}

    def add(self, team: str, cpu: float, mem: float, gtype: str | None, gpus: int) -> None:
        u = self.used.get(team)
        if u is None:
            u = self.used[team] = [0.0, 0.0, {}]
        u[0] += cpu
        u[1] += mem
        s = max(self.share.get(team, 0.0), u[0] * self.inv_cpu, u[1] * self.inv_mem)
        if gpus and gtype:
            g = u[2][gtype] = u[2].get(gtype, 0) + gpus
            s = max(s, g * self.inv_gpu.get(gtype, 0.0))
        self.share[team] = s

    def of(self, team: str) -> float:
        return self.share.get(team, 0.0)


def fair_order(jobs: list[tuple[PendingJob, Queue]], shares: Shares, deferred: list[tuple[PendingJob, Queue]],
               overdue_before: float = -float("inf")) -> Iterator[tuple[PendingJob, Queue] | None]:
    """Yield ``(job, queue)`` in admission order, then None, then the borrowing jobs.

    Each team's oldest job submitted before ``overdue_before`` goes first within its priority (those of
    several teams in submit order): fair share decides who goes next, but it never makes one job wait for
    ever while lighter teams keep submitting (the aging of Slurm's multifactor priority, as a hard bound).
    One a team, not every overdue job: a backlog older than the bound went first whole, and took the
    cluster from every other team for as long as it lasted.

    The caller appends to ``deferred`` the jobs that would have to borrow
    beyond their queue's quota; after the None they come back, in order,
    after every job that fits inside a quota whatever its priority, as Kueue
    orders them. So borrowed work never takes room that a queue within its
    quota could use, and a lender that reclaims its room keeps it.
    """
    groups: dict[tuple, list] = {}
    late: dict[tuple, dict] = {}  # priority key -> team -> its oldest overdue job
    # jobs usually come in submit order; then every group is too, and sorting them (a key call per
    # job) can be skipped: a stable sort of an ordered list leaves it as it is
    in_order, last = True, -float("inf")
    for item in jobs:
        job = item[0]
        if job.seq < last:
            in_order = False
        last = job.seq
        key = (job.priority, item[1].priority)
        if job.submitted_at is not None and job.submitted_at < overdue_before:
            firsts = late.setdefault(key, {})
            held = firsts.get(job.team)
            if held is None or job.seq < held[0].seq:
                firsts[job.team] = item
                groups.setdefault(key, {})
                if held is None:
                    continue
                item, job = held, held[0]  # displaced by an older one: it keeps to fair share with the rest
                in_order = False
        g = groups.get(key)
        if g is None:
            g = groups[key] = {}
        lst = g.get(job.team)
        if lst is None:
            g[job.team] = [item]
        else:
            lst.append(item)
    share = shares.share
    for key in sorted(groups, reverse=True):
        if key in late:
            yield from sorted(late[key].values(), key=_seq)
        teams = groups[key]
        if not teams:
            continue
        if len(teams) == 1:  # one team at this priority: plain submit order
            lst = next(iter(teams.values()))
            if not in_order:
                lst.sort(key=_seq)
            yield from lst
            continue
        heap = []
        for i, (team, lst) in enumerate(teams.items()):
            if not in_order:
                lst.sort(key=_seq)
            heap.append((shares.of(team), lst[0][0].seq, i, team, 0))
        heapq.heapify(heap)
        while heap:
            _, _, i, team, pos = heapq.heappop(heap)
            lst = teams[team]
            end = len(lst)
            while True:
                yield lst[pos]
                pos += 1
                if pos == end:
                    break
                if heap:  # stay with this team while it is still the furthest behind
                    sh, top = share.get(team, 0.0), heap[0]
                    if sh < top[0]:
                        continue  # the usual case, decided without the next job's submit order
                    nseq = lst[pos][0].seq
                    if sh > top[0] or nseq > top[1] or (nseq == top[1] and i > top[2]):
                        heapq.heappush(heap, (sh, nseq, i, team, pos))
                        break
    yield None
    while deferred:
        batch = list(deferred)
        deferred.clear()
        yield from batch


def _seq(item: tuple[PendingJob, Queue]) -> float:
    return item[0].seq
