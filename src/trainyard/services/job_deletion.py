"""Deleting ended jobs: ``trainyard rm`` (one by one, by their owner) and the ``jobs`` retention (the leader's).

The records go first, in one transaction per 500 jobs (:mod:`trainyard.store.deletion`: what the attempts used
stays in the usage report); then the files: each attempt's whole folder and the job's checkpoint folder on the
nodes it ran on (the engine's :meth:`~trainyard.engines.base.Engine.remove_leftovers`), and everything under the
job in the artifact store. A file that cannot go is counted and logged; the job is gone either way, as a file
left over is only disk, which the work-dir retention would not reach again.

A job that is part of something larger stays: a step of a pipeline run, a trial of a sweep, a replica of a
service, a job of a live Dask cluster, a job another one waits for (``after``), or outputs a live service serves.
A sweep goes whole with its trials' jobs; so does a pipeline run with its steps' jobs
(:mod:`trainyard.store.run_deletion`), once no other run reuses its outputs.
"""

from __future__ import annotations

import logging

from trainyard.artifacts.store import ArtifactStore
from trainyard.auth.permissions import Visible
from trainyard.engines.base import Engine
from trainyard.engines.leftovers import Leftover
from trainyard.spec.label_selector import Selector
from trainyard.store import Store
from trainyard.store.deletion import Deleted, JobDeletion
from trainyard.store.run_deletion import RunDeletion

log = logging.getLogger("trainyard.deletion")


class JobRemover:
    def __init__(self, store: Store, engine: Engine, artifacts: ArtifactStore) -> None:
        self.rows = JobDeletion(store, artifacts.url)
        self.runs = RunDeletion(self.rows)
        self.engine = engine
        self.artifacts = artifacts
        self.failed = 0  # files that could not be removed, since this server started

    def why_not(self, job_ids: list[str]) -> dict[str, str]:
        """Why each of ``job_ids`` may not be deleted; those that may are left out."""
        return self.rows.blockers(job_ids)

    def why_not_sweep(self, sweep_id: str) -> str | None:
        """Why an ended sweep may not be deleted with its trials' jobs: the first trial's job that may not go."""
        jobs = self.rows.trial_jobs(sweep_id)
        kept = self.rows.blockers(jobs, sweep=sweep_id)
        first = next((j for j in jobs if j in kept), None)
        return None if first is None else f"the job of one of its trials, {first}: {kept[first]}"

    def remove_sweep(self, sweep_id: str) -> list[Deleted] | None:
        """An ended sweep with its trials' jobs (check :meth:`why_not_sweep` first); None if it was not there
        (or is running)."""
        deleted = self.rows.delete_sweep(sweep_id)
        if deleted:
            self._files(deleted)
        return deleted

    def why_not_run(self, run_id: str, status: str, seen: Visible | None = None) -> str | None:
        """Why a pipeline run (``status`` as read) may not be deleted with its steps' jobs; naming only the runs
        ``seen`` shows."""
        return self.runs.blocker(run_id, status, seen)

    def remove_run(self, run_id: str) -> list[Deleted] | None:
        """An ended pipeline run with its steps' jobs (check :meth:`why_not_run` first); None if it was not
        there, has not ended, or is reused meanwhile."""
        deleted = self.runs.delete(run_id)
        if deleted:
            self._files(deleted)
        return deleted

    def remove(self, job_ids: list[str], keep: Selector = ()) -> list[Deleted]:
        """Delete the records of those of ``job_ids`` that have ended and whose labels do not match ``keep``,
        then their files (check :meth:`why_not` first); what was deleted."""
        deleted = self.rows.delete(job_ids, keep)
        if deleted:
            self._files(deleted)
        return deleted

    def _files(self, deleted: list[Deleted]) -> None:
        items = []
        for d in deleted:
            nodes = sorted({n for _, ns in d.attempts for n in ns})
            items += [Leftover(n, "deleted", aid) for aid, ns in d.attempts for n in ns]
            items += [Leftover(n, "checkpoints", d.job_id) for n in nodes]
        if items:
            try:
                _, failed = self.engine.remove_leftovers(items)
            except Exception:
                log.exception("removing the folders of %d deleted jobs failed", len(deleted))
                failed = len(items)
            self.failed += failed
        for d in deleted:
            try:
                self.artifacts.remove_job(d.job_id)
            except Exception as e:  # a store that refuses one job's keys keeps the others going
                log.warning("files of deleted job %s: %s", d.job_id, e)
                self.failed += 1
