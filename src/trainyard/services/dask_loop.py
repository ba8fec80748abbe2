"""The leader's cluster loop: each tick, every live cluster is brought towards what is wanted.

Phases per cluster: 1 stopping (cancel its jobs, ``stopped`` once none runs);
2 lifetime (lost scheduler → ``failed``; owner job ended → stopping); 3 ask Dask
(clients, tasks, adaptive target, which workers joined); 4 idle timeout; 5 wanted
workers (fixed, or the adaptive target within min/max); 6 start or retire workers.
A worker job that ended (lost, killed, retired) is dropped, so a lost one is
replaced by the next tick's phase 6. Workers are retired gracefully: Dask moves
their data off before it closes them.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from trainyard.errors import Forbidden
from trainyard.services import dask_jobs, dask_probe
from trainyard.services.dask_clusters import DaskClusterService
from trainyard.services.notify import Notifier
from trainyard.services.ticker import Ticker
from trainyard.spec.cluster import ClusterStatus
from trainyard.spec.records import JobInfo
from trainyard.status import JobStatus
from trainyard.store.clusters import ClusterRow

log = logging.getLogger("trainyard.clusters")
TICK = 1.0  # seconds between looks at every live cluster
SHRINK_AFTER = 3  # ticks the adaptive target must stay below the workers before any is retired
RETIRE_GRACE = 150.0  # seconds a retiring worker may take before its job is cancelled


@dataclass
class Memory:
    """What the loop keeps between ticks for one cluster (lost on a restart: it only delays)."""

    idle_since: float | None = None
    below: int = 0  # ticks the adaptive target stayed below the workers
    retiring: dict[str, float] = field(default_factory=dict)  # worker job -> when asked to retire


class DaskClusterLoop(Ticker):
    name = "trainyard-dask-clusters"
    log = log

    def __init__(self, service: DaskClusterService, notifier: Notifier, tick: float = TICK) -> None:
        super().__init__(notifier)
        self.service = service
        self.clusters = service.clusters
        self.tick = tick
        self._memory: dict[str, Memory] = {}
        self._jobs: set[str] = set()  # jobs of live clusters: their news wakes the loop

    def pause(self) -> float:
        return self.tick

    def on_notify(self, key: str) -> bool:
        return key in self._jobs

    def cycle(self) -> None:
        rows = self.clusters.live()
        self._jobs = {j for r in rows for j in [r["scheduler_job"], *r["worker_jobs"]] if j}
        for gone in set(self._memory) - {r["id"] for r in rows}:
            self._memory.pop(gone, None)
            self.service.worker_addresses.pop(gone, None)
            self.service.securities.pop(gone, None)
        for row in rows:
            try:
                self.reconcile(row)
            except Exception:
                log.exception("cluster %s: reconcile failed", row["id"])

    # -- one cluster --------------------------------------------------------------

    def reconcile(self, row: ClusterRow) -> None:
        cid = row["id"]
        mem = self._memory.setdefault(cid, Memory())
        ids = [j for j in [row["scheduler_job"], *row["worker_jobs"]] if j]
        jobs = {j.id: j for j in self.service.store.get_jobs(ids)}
        live_workers = [w for w in row["worker_jobs"] if w in jobs and not jobs[w].status.is_terminal()]
        if live_workers != row["worker_jobs"]:
            self.clusters.set(cid, worker_jobs=live_workers, only_live=False)
            mem.retiring = {w: t for w, t in mem.retiring.items() if w in live_workers}
        scheduler = jobs.get(row["scheduler_job"] or "")

        # 1. stopping
        if row["status"] == ClusterStatus.STOPPING:
            self._cancel([jobs[j] for j in ids if j in jobs], f"Dask cluster {cid} stopped: {row['reason']}")
            if all(jobs[j].status.is_terminal() for j in ids if j in jobs) and row["scheduler_job"]:
                self.clusters.move(cid, ClusterStatus.STOPPED)
            return
        # 2. lifetime
        if scheduler is None:
            return  # created a moment ago: its scheduler job is being submitted
        if scheduler.status.is_terminal():
            self._cancel([jobs[w] for w in live_workers], f"Dask cluster {cid} lost its scheduler")
            why = f"scheduler job {scheduler.id} {scheduler.status.value}: {scheduler.reason or 'no reason given'}"
            self.clusters.move(cid, ClusterStatus.FAILED, reason=f"the Dask scheduler was lost ({why})")
            return
        if row["owner_job"]:
            owner = self.service.store.get_jobs([row["owner_job"]])
            if not owner or owner[0].status.is_terminal():
                self._stop_cluster(row, f"its job {row['owner_job']} ended")
                return
        if not row["address"] or scheduler.status not in (JobStatus.RUNNING, JobStatus.STARTING):
            self._set_reason(row, ClusterStatus.PENDING, f"scheduler job {scheduler.id}: {scheduler.reason or scheduler.status.value}")
            if not row["address"]:
                return
        # 3. ask Dask
        seen = dask_probe.probe(row["address"], self.service.security(row))
        if seen is not None:
            self.service.worker_addresses[cid] = seen.workers
        # 4. idle
        if seen is not None and row["spec"].idle_timeout:
            if seen.clients or seen.tasks:
                mem.idle_since = None
            else:
                mem.idle_since = mem.idle_since or time.time()
                if time.time() - mem.idle_since >= row["spec"].idle_timeout:
                    self._stop_cluster(row, f"idle for {_duration(row['spec'].idle_timeout)}: no client and no task")
                    return
        # 5. wanted
        wanted = row["workers"]
        if row["adapt_max"] is not None and seen is not None:
            target = max(row["adapt_min"] or 0, min(seen.target, row["adapt_max"]))
            mem.below = mem.below + 1 if target < wanted else 0
            if target > wanted or (target < wanted and mem.below >= SHRINK_AFTER):
                wanted = target
                self.clusters.set(cid, workers=wanted)
        # 6. start or retire
        refused = self._resize(row, mem, [jobs[w] for w in live_workers], wanted, seen)
        summary = self._summary(row, [jobs[w] for w in live_workers], wanted)
        self._set_reason(row, ClusterStatus.RUNNING, summary + (f"; no worker is added: {refused}" if refused else ""))

    def _resize(self, row: ClusterRow, mem: Memory, workers: list[JobInfo], wanted: int,
                seen: dask_probe.Probe | None) -> str | None:
        """Start or retire workers towards ``wanted``; why none could be started, if so."""
        now = time.time()
        for w, asked in list(mem.retiring.items()):
            if now - asked > RETIRE_GRACE:  # Dask could not move its data off in time
                self.service.jobs.stop(w, f"retired from Dask cluster {row['id']}: its data did not move off in time",
                                       by="system")
                mem.retiring.pop(w)
        staying = [w for w in workers if w.id not in mem.retiring and w.status != JobStatus.CANCELLING]
        if len(staying) < wanted:
            added, refused = [], None
            for _ in range(wanted - len(staying)):
                try:
                    job = dask_jobs.worker_job(row["id"], row["spec"], row["address"])
                    added.append(self.service.jobs.submit(job, on_behalf=(row["owner"], row["team"])).id)
                except Forbidden as e:  # its owner was disabled or lost the right: the workers running stay
                    refused = e.message
                    break
            if added:
                self.clusters.set(row["id"], worker_jobs=[w.id for w in workers] + added)
                self._jobs.update(added)
            return refused
        extra = len(staying) - wanted
        if extra <= 0:
            return None
        joined = seen.workers if seen is not None else {}
        # cheapest first: workers still waiting for room, then those that have not joined Dask yet
        for w in sorted(staying, key=lambda w: (w.status != JobStatus.PENDING, w.id in joined, -w.created_at)):
            if extra == 0 or w.id in joined:
                break
            self.service.jobs.stop(w.id, f"Dask cluster {row['id']} scaled down", by="system")
            extra -= 1
        if extra and seen is not None:
            by_address = {a: n for n, a in joined.items()}
            security = self.service.security(row)
            names = [by_address[a] for a in dask_probe.workers_to_close(row["address"], extra, security)
                     if a in by_address]
            names = [n for n in names if n not in mem.retiring][:extra]
            for n in names:
                mem.retiring[n] = now
            if names:
                threading.Thread(target=dask_probe.retire, args=(row["address"], names, security),
                                 name=f"trainyard-retire-{row['id']}", daemon=True).start()
        return None

    def _stop_cluster(self, row: ClusterRow, reason: str) -> None:
        if self.clusters.move(row["id"], ClusterStatus.STOPPING, reason=reason):
            log.info("cluster %s: stopping, %s", row["id"], reason)
            self.wake()

    def _cancel(self, jobs: list[JobInfo], why: str) -> None:
        for j in jobs:
            if not j.status.is_terminal() and j.status != JobStatus.CANCELLING:
                self.service.jobs.stop(j.id, why, by="system")

    def _set_reason(self, row: ClusterRow, status: ClusterStatus, reason: str) -> None:
        if row["status"] != status:
            self.clusters.move(row["id"], status, reason=reason)
        elif row["reason"] != reason:
            self.clusters.set(row["id"], reason=reason)

    @staticmethod
    def _summary(row: ClusterRow, workers: list[JobInfo], wanted: int) -> str:
        running = sum(w.status == JobStatus.RUNNING for w in workers)
        text = f"{running} of {wanted} workers running"
        waiting = [w for w in workers if w.status == JobStatus.PENDING]
        if waiting:
            text += f"; {len(waiting)} waiting: {waiting[0].reason}"
        return text + (f" (adaptive {row['adapt_min']}..{row['adapt_max']})" if row["adapt_max"] is not None else "")


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"
