"""The leader's retention sweeps: what ended attempts leave on their nodes is removed once it is old enough.

Two sweeps, each with a cursor on when attempts ended (``store/retention.py``), so each finished attempt is
looked at once, whatever the history's length:

- ``work_dirs``: an attempt that ended that long ago loses the bulk of its folder on every node a replica ran
  on (work dir, outputs as written and uploaded, its own virtualenv); its log, metrics and result stay
  (:mod:`trainyard.engines.leftovers`).
- ``checkpoints``: a job whose last attempt ended that long ago, and which has ended, loses its checkpoint
  folder on those nodes and, on an object store, its checkpoint sets there.

- ``jobs``: an ended job that last changed that long ago is deleted as ``trainyard rm`` deletes it
  (:mod:`trainyard.services.job_deletion`), unless it is part of something larger or labelled to be kept
  (``keep``, a label selector: ``keep=true`` by default, so ``trainyard label JOB keep=true`` pins one); so is
  an ended sweep, with its trials' jobs (``trainyard sweep rm``), and a pipeline run with its steps' jobs,
  unless one of those is labelled to be kept; then the record of an ended Dask cluster none of whose jobs is
  left.

Off (None) by default for checkpoints and jobs: "keep them" is what users expect unless an admin says.
The engine removes the folders (:meth:`trainyard.engines.base.Engine.remove_leftovers`): the local engine in
this process, a Ray node's agent on its node.
"""

from __future__ import annotations

import logging
import time
from typing import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from trainyard.artifacts.store import ArtifactStore
from trainyard.config import RetentionSettings
from trainyard.engines.base import Engine
from trainyard.engines.leftovers import Leftover
from trainyard.services.job_deletion import JobRemover
from trainyard.services.ticker import Ticker
from trainyard.spec.label_selector import parse_selector
from trainyard.store import Store
from trainyard.store.clusters import ClusterStore
from trainyard.store.retention import Ended, RetentionStore
from trainyard.store.snapshot_owners import SnapshotOwners

log = logging.getLogger("trainyard.retention")
BATCH = 500  # attempts read, and their folders removed, at a time
# seconds the cursor stays behind what was swept: an end committed late, or written by a server whose clock is
# behind, is still seen by the next sweep (what is gone is not removed twice)
SLACK = 300.0
BETWEEN = 0.1  # seconds between two batches of jobs deleted


class RetentionLoop(Ticker):
    name = "trainyard-retention"
    log = log

    def __init__(self, store: Store, engine: Engine, artifacts: ArtifactStore, settings: RetentionSettings,
                 remover: JobRemover | None = None) -> None:
        super().__init__()
        self.rows = RetentionStore(store)
        self.engine = engine
        self.artifacts = artifacts
        self.settings = settings
        # the jobs retention leaves these, and the sweep or pipeline run of one of them, whatever their age
        self.keep = parse_selector(settings.keep, "retention.keep") if settings.keep else ()
        self.remover = remover or JobRemover(store, engine, artifacts)
        self.clusters = ClusterStore(store)
        self.owners = SnapshotOwners(store)
        self.removed = {"attempt": 0, "checkpoints": 0, "snapshot": 0}
        self.jobs_deleted = 0
        self.sweeps_deleted = 0
        self.runs_deleted = 0
        self.clusters_deleted = 0
        self.failed = 0
        self.swept_at: float | None = None

    def pause(self) -> float:
        return self.settings.every

    def cycle(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        keep = self.settings.work_dirs
        if keep is not None:
            self._sweep("work_dirs", now - keep, self._work_dirs, last_of_ended_job=False)
        keep = self.settings.checkpoints
        if keep is not None:
            self._sweep("checkpoints", now - keep, self._checkpoints, last_of_ended_job=True)
        keep = self.settings.jobs
        if keep is not None:
            self._jobs(now - keep)  # first: a snapshot whose last jobs go now may go with this sweep
        keep = self.settings.snapshots
        if keep is not None:
            self._snapshots(now - keep)
        self.swept_at = now

    def _snapshots(self, before: float) -> None:
        """Code snapshots nothing names, uploaded by ``before``: their uploaders' rights, then their tarballs."""
        after: str | None = ""
        named: set[str] | None = None  # by workdirs: read once a sweep, when a page first has any to look at
        while after is not None and not self._stop.is_set():
            found, after = self.owners.unused(before, BATCH, after)
            if found and named is None:
                named = self.owners.in_workdirs()
            for digest in found:
                if digest in named or not self.owners.forget(digest):  # named (forget looks again, meanwhile)
                    continue
                try:
                    self.artifacts.remove_snapshot(digest)
                    self.removed["snapshot"] += 1
                except Exception as exc:  # a store that refuses one key keeps the sweep going
                    log.warning("snapshot %s: %s", digest, exc)
                    self.failed += 1

    def _jobs(self, before: float) -> None:
        """Ended sweeps with their trials, pipeline runs with their steps' jobs, then ended jobs, that ended by
        ``before``, a batch at a time. No cursor: what is swept is gone, and what is kept for being part of
        something larger (a pipeline step…) is left out by the query itself, or, for the rarer reasons, skipped
        by id for the rest of this sweep."""
        kept_sweeps: set[str] = set()
        while not self._stop.is_set():
            sweeps = self.remover.rows.expired_sweeps(before, BATCH, kept_sweeps)
            for sweep_id in sweeps:
                if self.remover.why_not_sweep(sweep_id) is not None or \
                        self._kept(self.remover.rows.trial_jobs(sweep_id)):
                    kept_sweeps.add(sweep_id)
                elif (deleted := self.remover.remove_sweep(sweep_id)) is not None:
                    self.jobs_deleted += len(deleted)
                    self.sweeps_deleted += 1
            if len(sweeps) < BATCH:
                break
        self._runs(before)
        skip: set[str] = set()
        while not self._stop.is_set():
            batch = self.remover.rows.expired(before, BATCH, skip, self.keep)
            kept = self.remover.why_not(batch) if batch else {}
            skip |= kept.keys()
            doomed = [j for j in batch if j not in kept]
            if doomed:
                self.jobs_deleted += len(self.remover.remove(doomed, self.keep))  # pinned meanwhile: kept
                log.info("retention: deleted %d ended jobs", len(doomed))
            if len(batch) < BATCH:
                break
            # a batch holds the writer ~0.1 s (bench/deletion.py): a backlog leaves the scheduler its turns
            self._stop.wait(BETWEEN)
        self._clusters(before)

    def _kept(self, job_ids: list[str]) -> bool:
        """Whether one of ``job_ids`` (a sweep's trials', a run's steps') is labelled to be kept: all of them
        stay then, as the whole goes or stays together."""
        return bool(self.keep) and bool(self.remover.rows.matching(job_ids, self.keep))

    def _clusters(self, before: float) -> None:
        """Records of Dask clusters that ended by ``before`` once none of the jobs they name is left (the
        loop above deletes those first; a job kept for its own reason keeps its cluster's record)."""
        kept: set[str] = set()
        while not self._stop.is_set():
            found, gone = self.clusters.expired(before, BATCH, kept)
            kept.update(set(found) - set(gone))
            if gone:
                self.clusters_deleted += self.clusters.delete(gone)
            if len(found) < BATCH:
                return

    def _runs(self, before: float) -> None:
        """Ended pipeline runs with their steps' jobs; a run whose outputs a newer run reuses (cached) waits
        for that one, which ended later."""
        kept: set[str] = set()
        while not self._stop.is_set():
            runs = self.remover.runs.expired(before, BATCH, kept)
            for run_id, status in runs:
                if self.remover.why_not_run(run_id, status) is not None or \
                        self._kept(self.remover.runs.run_jobs(run_id)):
                    kept.add(run_id)
                elif (deleted := self.remover.remove_run(run_id)) is not None:
                    self.jobs_deleted += len(deleted)
                    self.runs_deleted += 1
                else:
                    kept.add(run_id)
            if len(runs) < BATCH:
                return

    def _sweep(self, name: str, until: float, remove, last_of_ended_job: bool) -> None:  # noqa: ANN001
        """Everything that ended after the cursor and by ``until``, a batch at a time; the cursor moves after
        each batch to ``SLACK`` before the end time all of whose attempts are done."""
        after = (self.rows.cursor(name), "")
        while not self._stop.is_set():
            batch = self.rows.ended(after, until, BATCH, last_of_ended_job)
            if batch:
                remove(batch)
                after = (batch[-1].ended_at, batch[-1].attempt_id)
            if len(batch) < BATCH:
                self.rows.advance(name, until - SLACK)
                return
            done = [e.ended_at for e in batch if e.ended_at < batch[-1].ended_at]
            if done:
                self.rows.advance(name, max(done) - SLACK)

    def _work_dirs(self, batch: list[Ended]) -> None:
        self._remove([Leftover(node, "attempt", e.attempt_id) for e in batch for node in e.nodes])

    def _checkpoints(self, batch: list[Ended]) -> None:
        self._remove([Leftover(node, "checkpoints", e.job_id) for e in batch for node in e.nodes])
        if self.artifacts.remote:
            for e in batch:
                try:
                    self.artifacts.remove_checkpoints(e.job_id)
                except Exception as exc:  # a store that refuses one job's keys keeps the sweep going
                    log.warning("checkpoints of %s: %s", e.job_id, exc)
                    self.failed += 1

    def _remove(self, items: list[Leftover]) -> None:
        if not items:
            return
        try:
            removed, failed = self.engine.remove_leftovers(items)
        except Exception:
            log.exception("removing %d folders failed", len(items))
            removed, failed = 0, len(items)
        self.removed[items[0].kind] += removed
        self.failed += failed
        if removed or failed:
            log.info("retention: removed %d %s folders (%d could not be)", removed, items[0].kind, failed)


class RetentionCollector(Collector):
    """The sweeps' work for /metrics, read from the loop's counts (this server's, since it started)."""

    def __init__(self, loop: RetentionLoop) -> None:
        self.loop = loop

    def collect(self) -> Iterable:
        removed = CounterMetricFamily("trainyard_retention_removed", "Folders the retention sweeps removed",
                                      labels=["kind"])
        for kind, n in self.loop.removed.items():
            removed.add_metric([kind], n)
        yield removed
        yield CounterMetricFamily("trainyard_retention_jobs_deleted", "Ended jobs the jobs retention deleted "
                                  "(trials of the sweeps it deleted too)", value=self.loop.jobs_deleted)
        yield CounterMetricFamily("trainyard_retention_pipeline_runs_deleted", "Ended pipeline runs the jobs "
                                  "retention deleted (with their steps' jobs)", value=self.loop.runs_deleted)
        yield CounterMetricFamily("trainyard_retention_sweeps_deleted", "Ended sweeps the jobs retention deleted",
                                  value=self.loop.sweeps_deleted)
        yield CounterMetricFamily("trainyard_retention_dask_clusters_deleted", "Records of ended Dask clusters the "
                                  "jobs retention deleted, once their jobs were gone", value=self.loop.clusters_deleted)
        yield CounterMetricFamily("trainyard_retention_failed", "Folders (or checkpoint sets) a retention sweep "
                                  "could not remove", value=self.loop.failed + self.loop.remover.failed)
        if self.loop.swept_at is not None:
            yield GaugeMetricFamily("trainyard_retention_last_sweep_timestamp_seconds", "When the retention "
                                    "sweeps last ran on this server", value=self.loop.swept_at)
