"""Human reasons for pending jobs: what is missing, who is ahead, which limit binds.

e.g. ``needs 2 × A100, 1 free on any node; 3 jobs ahead in queue team-a;
queue quota 4/4 A100 GPUs in use``. The resource part depends only on the
job's shape and the cluster at the end of the cycle, so it is built once per
shape; thousands of pending jobs cost one f-string each.
"""

from __future__ import annotations

from trainyard.scheduler.cluster import Cluster
from trainyard.scheduler.model import INF, Entry, PendingJob, Plan, Queue, Reservation, ShapeFit, Status
from trainyard.scheduler.quota import Quotas
from trainyard.spec.units import format_memory

NO_ROOM, OVER_QUOTA = Status.NO_ROOM, Status.OVER_QUOTA


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def duration(seconds: float) -> str:
    s = max(0, int(seconds + 0.5))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def backoff(job: PendingJob, now: float) -> str:
    why = f" after {job.last_reason}" if job.last_reason else ""
    return f"retrying in {job.not_before - now:.0f}s{why}"


def ahead(n: int, queue: str) -> str:
    if n > 1:
        return f"{n} jobs ahead in queue {queue}"
    return f"1 job ahead in queue {queue}" if n else f"first in queue {queue}"


def _gpu_kind(job: PendingJob) -> str:
    return " or ".join(job.gpu_types) if job.gpu_types else "GPU"


def impossible(cl: Cluster, job: PendingJob, sel: tuple) -> str:
    """Why no node could ever hold one replica, naming the part that does not fit."""
    types = (job.gpu_types or list({s.type for s in cl.cordoned if s.type})) if job.gpu else [None]
    waits_for = sorted(s.name for s in cl.cordoned if any(cl.holds(s, job, t, sel) for t in types))
    if waits_for:  # it waits for an admin, not for a different spec
        named = ", ".join(waits_for[:3]) + (f" and {len(waits_for) - 3} more" if len(waits_for) > 3 else "")
        return f"waits for cordoned node{'s' if len(waits_for) > 1 else ''} {named}: no node in service can run it"
    nodes = cl.classes
    if not nodes:
        return "no node can run it: there are no nodes"
    if sel and not any(all(s.labels.get(k) == v for k, v in sel) for s in nodes):
        return "no node can run it: no node has labels " + ", ".join(f"{k}={v}" for k, v in sel)
    if job.gpu and job.gpu_types and not any(s.type in job.gpu_types for s in nodes):
        have = ", ".join(sorted(cl.typed)) or "none"
        return f"no node can run it: no node has GPU type {_gpu_kind(job)} (have: {have})"
    if job.gpu and job.gpu > max((s.cap_g for s in nodes), default=0):
        return (f"no node can run it: asks for {job.gpu} GPU{'s' if job.gpu != 1 else ''} per replica, "
                f"the largest node has {max(s.cap_g for s in nodes)}")
    if job.cpu > max(s.cap_cpu for s in nodes):
        return f"no node can run it: asks for {job.cpu:g} cores, the largest node has {max(s.cap_cpu for s in nodes):g}"
    if job.memory > max(s.cap_mem for s in nodes):
        return (f"no node can run it: asks for {format_memory(job.memory)}, the largest node has "
                f"{format_memory(max(s.cap_mem for s in nodes))}")
    types = (job.gpu_types or list(cl.typed)) if job.gpu else [None]
    if job.replicas > 1 and any(cl.holds(s, job, t, sel) for s in nodes for t in types):
        most = max((cl.capacity(job, t, sel) for t in types), default=0)
        how = "on separate nodes " if job.placement == "spread" else ""
        return f"no node can run it: {job.replicas} replicas {how}need room the cluster does not have (at most {most} fit)"
    return "no node can run it: no single node has all of it"


class Shortfalls:
    """"needs …" text per job shape, from the free room left at the end of the cycle."""

    def __init__(self, cl: Cluster) -> None:
        self.cl = cl
        self.cache: dict[int, str] = {}
        self._cpu = self._mem = None

    def text(self, sid: int, job: PendingJob, types: list) -> str:
        t = self.cache.get(sid)
        if t is None:
            t = self.cache[sid] = self._build(job, types)
        return t

    def lacks(self, job: PendingJob, types: list) -> bool:
        """No node has the GPUs (or the cores, or the memory) for one replica now."""
        cl = self.cl
        if job.gpu:
            return max((cl.max_free(t) for t in types), default=0) < job.gpu
        self._maxima()
        return job.cpu > self._cpu + 1e-9 or job.memory > self._mem

    def _maxima(self) -> None:
        if self._cpu is None:
            self._cpu = max((s.cpu for s in self.cl.slots), default=0.0)
            self._mem = max((s.mem for s in self.cl.slots), default=0)

    def _build(self, job: PendingJob, types: list) -> str:
        cl, n = self.cl, job.replicas
        gang = f"{n} replicas at once ({job.placement}), each " if n > 1 else ""
        if job.gpu:
            best = max((cl.max_free(t) for t in types), default=0)
            total = sum(cl.gfree.get(t, 0) for t in types)
            if best >= job.gpu and total >= job.gpu * n:
                return (f"{gang}needs {job.gpu} × {_gpu_kind(job)} with {_cores(job.cpu)} and "
                        f"{format_memory(job.memory)}; nodes with free GPUs lack the cores or memory")
            tail = f", {total} in all" if n > 1 else ""
            return f"{gang}needs {job.gpu} × {_gpu_kind(job)}, {best} free on any node{tail}"
        self._maxima()
        want = []
        if job.cpu > self._cpu + 1e-9:
            want.append(f"{_cores(job.cpu)} ({max(self._cpu, 0):g} free on any node)")
        if job.memory > self._mem:
            want.append(f"{format_memory(job.memory)} memory ({format_memory(max(self._mem, 0))} free on any node)")
        if not want:
            want.append(f"{_cores(job.cpu)} and {format_memory(job.memory)} on one node (none has both free)")
        return gang + "needs " + ", ".join(want)


def _cores(n: float) -> str:
    return "1 core" if n == 1 else f"{n:g} cores"


def head(res: Reservation, now: float) -> str:
    held = plural(len(res.nodes), "node")
    if res.start == INF:
        text = f"next to start: {held} held for it until running work ends (no timeout says when)"
    else:
        text = f"next to start in ≤ {duration(res.start - now)}: {held} held for it"
    if res.reclaims_at is not None and res.reclaims_at > now:
        text += f" (sooner if borrowed work holds them: its queue takes that room back in " \
                f"{duration(res.reclaims_at - now)})"
    return text


def behind(res: Reservation, job: PendingJob, now: float) -> str:
    if res.start == INF:
        return f"job {res.job_id} is next to start"
    wait = duration(res.start - now)
    if job.timeout is None or now + job.timeout > res.start:
        return f"job {res.job_id} is next to start in ≤ {wait}; a timeout ≤ {wait} would let this one backfill"
    return f"job {res.job_id} is next to start in ≤ {wait}"


def explain(out: Plan, left: list[Entry], cl: Cluster, quotas: Quotas, now: float) -> None:
    """Phase 5: the message of every entry left pending, in line order, and its position in its queue;
    both also go to ``out.reasons`` and ``out.positions``, and the entries to ``out.entries``."""
    reasons, positions, entries = out.reasons, out.positions, out.entries
    short = Shortfalls(cl)
    first = out.reservations[0] if out.reservations else None
    held = [cl.by_name[n] for n in first.nodes] if first else []
    parts: dict[tuple, tuple] = {}  # (queue, shape id, status, outlasts the reservation) -> text around the count
    ahead_in: dict[str, int] = {}
    start = first.start if first is not None else None
    for e in left:  # once per pending job: keep the common case (no room, over quota) lean
        job, qn, st = e.job, e.queue.name, e.status
        jid = job.id
        k = ahead_in.get(qn, 0)
        ahead_in[qn] = k + 1
        positions[jid] = k
        if st is NO_ROOM or st is OVER_QUOTA:
            late = start is not None and (job.timeout is None or now + job.timeout > start)
            pk = (qn, e.shape.id, st, late)
            pair = parts.get(pk)
            if pair is None:
                lead, tail = _parts(cl, quotas, short, job, e.queue, st, e.shape, first, held, now)
                # the text around the count, joined once: thousands of jobs share it
                pair = parts[pk] = (lead, tail, lead + "; ", f" jobs ahead in queue {qn}{tail}")
            if k > 1:
                msg = f"{pair[2]}{k}{pair[3]}"
            else:
                msg = f"{pair[0]}; {ahead(k, qn)}{pair[1]}"
        elif st is Status.BACKOFF:
            msg = f"{backoff(job, now)}; {ahead(k, qn)}"
        elif st is Status.YIELDING:
            msg = f"preempted for job {job.last_preempted_by}: waits until it has started; {ahead(k, qn)}"
        elif st is Status.IMPOSSIBLE:
            msg = impossible(cl, job, e.shape.shape.selector)
        elif st is Status.RESERVED:
            msg = f"{short.text(e.shape.id, job, e.shape.types)}; {head(e.reservation, now)}; {ahead(k, qn)}"
        elif st is Status.CLAIMED:
            msg = f"starting: waiting for stopping jobs to hand back their room; {ahead(k, qn)}"
        else:  # PREEMPTING
            d = e.victims
            names = ", ".join(d[:3]) + (", …" if len(d) > 3 else "")
            msg = f"starting: preempting {plural(len(d), 'job')} ({names}); {ahead(k, qn)}"
        e.message = msg
        reasons[jid] = msg
        entries[jid] = e


def _parts(cl: Cluster, quotas: Quotas, short: Shortfalls, job: PendingJob, q: Queue, st: Status, fit: ShapeFit,
           first: Reservation | None, held: list, now: float) -> tuple[str, str]:
    """The text before and after "N jobs ahead" for a job with no room or over its quota."""
    limit = quotas.describe(q, job, fit.types)
    if limit and not (q.borrowing and job.preemptible):
        limit += " (borrowing off)"
    quota_binds = st is OVER_QUOTA and limit and not short.lacks(job, fit.types)
    lead = limit if quota_binds else short.text(fit.id, job, fit.types)
    tail = [limit] if limit and lead != limit else []
    if first is not None and any(cl.holds(s, job, t, fit.shape.selector) for s in held for t in fit.types):
        tail.append(behind(first, job, now))
    return lead, "".join("; " + p for p in tail)
