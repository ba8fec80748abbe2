"""Phase 2 of a planning cycle (:mod:`trainyard.scheduler.plan`): the line of pending jobs that compete
for room, in admission order, and the jobs held back from it this cycle."""

from __future__ import annotations

import heapq
from itertools import chain
from typing import Iterator

from trainyard.scheduler.cycle import Cycle
from trainyard.scheduler.fairshare import fair_order
from trainyard.scheduler.model import INF, Entry, PendingJob, Queue, Status


def line_up(c: Cycle, pending: list[PendingJob], deferred: list, starved: set[str]) -> tuple[Iterator, list[Entry]]:
    """Phase 2: the jobs that may compete for room this cycle, each with its queue, in admission
    order, then None, then ``deferred`` as phase 3 fills it (:func:`fair_order`); and the entries
    of the jobs held back. ``starved`` gets the ids of the jobs put first for having waited too long."""
    eligible, held_back = [], []
    queue_of, queues = c.quotas.queue, {}  # a local map: this loop runs once per pending job
    now = c.now
    ids = None  # pending job ids, built when some job was preempted
    owed: set[str] = set()  # pending jobs that preempted work which now waits for them to start
    for job in pending:
        q = queues.get(job.queue)
        if q is None:
            q = queues[job.queue] = queue_of(job.queue)
        if job.not_before is not None and job.not_before > now:
            held_back.append(Entry(job, q, Status.BACKOFF))
            continue
        if job.last_preempted_by is not None:
            if ids is None:  # those that may start now: one waiting out a retry's backoff (any length) is owed nothing
                ids = {p.id for p in pending if p.not_before is None or p.not_before <= now}
            if job.last_preempted_by in ids:
                # the room and quota it handed back are for the job that preempted it: competing for
                # them again before that job starts is how preemption loops begin
                held_back.append(Entry(job, q, Status.YIELDING))
                owed.add(job.last_preempted_by)
                continue
        eligible.append((job, q))
    first = []
    if owed:
        # The room and quota a preemption freed are owed to the job it was for. No cycle remembers the
        # last one, so unless that job goes first, jobs ahead of it in fair-share order, backfill and
        # borrowers take the room as soon as it is free, and it preempts again, cycle after cycle.
        first = sorted((x for x in eligible if x[0].id in owed), key=_owed_order)
        if first:
            eligible = [x for x in eligible if x[0].id not in owed]
    if put_first := _starved(c, eligible, starved):
        first.extend(put_first)
        eligible = [x for x in eligible if x[0].id not in starved]
    limit = c.opt.fair_share_wait
    line = fair_order(eligible, c.shares, deferred, now - limit if limit is not None else -INF)
    return (chain(first, line) if first else line), held_back

def _starved(c: Cycle, eligible: list[tuple[PendingJob, Queue]], starved: set[str]) -> list[tuple[PendingJob, Queue]]:
    """The oldest jobs that need whole nodes, have waited past ``starve_after`` and could run if room
    came back, at most ``max_starved``. Priority and fair share decide who takes room that frees now;
    on a busy cluster that is small work, and a job that needs a whole node (or eight) sees every
    node that drains taken, a GPU at a time, before its turn. First in line, it takes the node, or
    holds the ones that drain soonest. Smaller jobs fit in what is left over: they keep fair-share
    order."""
    limit, most = c.opt.starve_after, c.opt.max_starved
    if limit is None or most <= 0:
        return []
    cut = c.now - limit
    old = [(x[0].submitted_at, x[0].seq, x[0].id, i) for i, x in enumerate(eligible)
           if x[0].submitted_at is not None and x[0].submitted_at < cut and x[0].gpu]
    if not old:
        return []
    heapq.heapify(old)
    out = []
    while old and len(out) < most:
        x = eligible[heapq.heappop(old)[3]]
        job, q = x
        if q.max_running is not None and c.quotas.running_full(q):
            continue  # its cap, not room, keeps it waiting
        sel = tuple(sorted(job.node_selector.items())) if job.node_selector else ()
        types = c.cl.static_types(job, sel)  # none: it could never run, and would only push one out that could
        if not any(job.gpu >= c.cl.top_g[t] for t in types):
            continue
        out.append(x)
        starved.add(job.id)
    return out


def _owed_order(item: tuple[PendingJob, Queue]) -> tuple:
    job = item[0]
    return (-job.priority, -item[1].priority, job.seq)
