"""Job rules shared by the API and the scheduler: submit, cancel, look up."""

from __future__ import annotations

from typing import Callable

from trainyard.artifacts.store import ArtifactStore
from trainyard.engines.base import Engine
from trainyard.errors import InvalidSpec, NotFound, Unschedulable
from trainyard.scheduler.admission import check_fits_some_node
from trainyard.services.notify import Notifier
from trainyard.spec.job import JobSpec
from trainyard.spec.records import ArtifactInfo, AttemptInfo, JobInfo, NodeInfo
from trainyard.status import JobStatus
from trainyard.store import Store


class JobService:
    def __init__(
        self, store: Store, engine: Engine, artifacts: ArtifactStore, notifier: Notifier, wake: Callable[[], None],
        stop: Callable[[AttemptInfo], None],
    ) -> None:
        self.stop = stop
        self._specs: dict[str, JobSpec] = {}  # job id -> spec; specs never change once stored
        self.store = store
        self.engine = engine
        self.artifacts = artifacts
        self.notifier = notifier
        self.wake = wake

    def submit(self, spec: JobSpec, snapshot: str | None = None) -> JobInfo:
        """Validate against this platform, store, and wake the scheduler. Nothing is stored on error."""
        self.engine.validate(spec)
        if (problem := check_fits_some_node(spec, self.engine.nodes())) is not None:
            field, message = problem
            raise Unschedulable(f"{field}: {message}", field=field)
        if snapshot is not None and not self.artifacts.has_snapshot(snapshot):
            raise InvalidSpec(errors=[{"field": "workdir", "line": None, "where": "workdir",
                                       "message": f"snapshot {snapshot} was not uploaded"}])
        job = self.store.create_job(spec, snapshot)
        self.wake()
        return job

    def cancel(self, job_id: str) -> JobInfo:
        status = self.store.request_cancel(job_id)
        job = self.store.get_job(job_id)
        if status == JobStatus.CANCELLING:
            for a in job.attempts:
                if not a.status.is_terminal():
                    self.stop(a)
        self.notifier.notify(job_id)
        self.wake()
        return job

    def nodes(self) -> list[NodeInfo]:
        """The engine's nodes with what running attempts hold on each."""
        nodes = {n.name: n.model_copy(deep=True) for n in self.engine.nodes()}
        active = self.store.active_attempts()
        for a in active:
            if a.job_id not in self._specs:
                self._specs[a.job_id] = self.store.get_job(a.job_id).spec
        if len(self._specs) > 4 * len(active) + 1000:  # forget finished jobs now and then
            keep = {a.job_id for a in active}
            self._specs = {k: v for k, v in self._specs.items() if k in keep}
        for a in active:
            r = self._specs[a.job_id].resources
            for rep in a.replicas:
                node = nodes.get(rep.node)
                if node is None or rep.status.is_terminal():
                    continue
                node.cpu_used += r.cpu
                node.memory_used += r.memory or 0
                node.gpus_used += rep.gpus
        return list(nodes.values())

    def output(self, job_id: str, path: str) -> tuple[ArtifactInfo, str]:
        for info, url in self.store.artifacts(job_id):
            if info.path == path:
                return info, url
        self.store.get_job(job_id)  # raises JobNotFound for an unknown job
        raise NotFound(f"job {job_id} has no output {path!r}", job_id=job_id, path=path)
