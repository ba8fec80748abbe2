"""Job rules shared by the API and the scheduler: submit, cancel, look up."""

from __future__ import annotations

from typing import Callable

from trainyard.artifact_paths import check_artifact_path
from trainyard.artifacts.store import ArtifactStore
from trainyard.engines.base import Engine
from trainyard.errors import InvalidSpec, NotFound, Unschedulable
from trainyard.scheduler.fit import check_fits_some_node
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
        self._jobs: dict[str, JobInfo] = {}  # live jobs as submitted; spec, queue and priority never change
        self.store = store
        self.engine = engine
        self.artifacts = artifacts
        self.notifier = notifier
        self.wake = wake
        self.check_queue: Callable[[str], None] = lambda name: None  # set by the platform: refuses unknown queues
        self.created: Callable[[JobInfo], None] = lambda job: None  # set by the platform: the scheduler learns the spec

    def submit(self, spec: JobSpec, snapshot: str | None = None) -> JobInfo:
        """Validate against this platform, store, and wake the scheduler. Nothing is stored on error."""
        self.engine.validate(spec)
        self.check_queue(spec.queue)
        if (problem := check_fits_some_node(spec, self.engine.nodes())) is not None:
            field, message = problem
            raise Unschedulable(f"{field}: {message}", field=field)
        if snapshot is not None and not self.artifacts.has_snapshot(snapshot):
            raise InvalidSpec(errors=[{"field": "workdir", "line": None, "where": "workdir",
                                       "message": f"snapshot {snapshot} was not uploaded"}])
        job = self.store.create_job(spec, snapshot)
        self.created(job)
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

    def live(self) -> list[tuple[JobInfo, AttemptInfo]]:
        """Every starting or running attempt with its job (as submitted: spec, queue, priority)."""
        active = self.store.active_attempts()
        missing = [a.job_id for a in active if a.job_id not in self._jobs]
        if missing:
            self._jobs.update((j.id, j) for j in self.store.get_jobs(missing))
        if len(self._jobs) > 4 * len(active) + 1000:  # forget finished jobs now and then
            keep = {a.job_id for a in active}
            self._jobs = {k: v for k, v in self._jobs.items() if k in keep}
        return [(self._jobs[a.job_id], a) for a in active]

    def nodes(self, live: list[tuple[JobInfo, AttemptInfo]] | None = None) -> list[NodeInfo]:
        """The engine's nodes with what live attempts (default: :meth:`live`) hold on each."""
        nodes = {n.name: n.model_copy(deep=True) for n in self.engine.nodes()}
        for job, a in self.live() if live is None else live:
            r = job.spec.resources
            for rep in a.replicas:
                node = nodes.get(rep.node)
                if node is None or rep.status.is_terminal():
                    continue
                node.cpu_used += r.cpu
                node.memory_used += r.memory or 0
                node.gpus_used += rep.gpus
        return list(nodes.values())

    def output(self, job_id: str, path: str) -> tuple[ArtifactInfo, str]:
        """One output file's record and its URL, which is checked to lie inside the artifact store."""
        try:
            check_artifact_path(path)
        except ValueError as e:
            raise InvalidSpec(errors=[{"field": "path", "line": None, "where": "path", "message": str(e)}]) from None
        for info, url in self.store.artifacts(job_id):
            if info.path == path:
                try:
                    return info, self.artifacts.confined(url)
                except ValueError:
                    break  # recorded before paths were checked: never served
        self.store.get_job(job_id)  # raises JobNotFound for an unknown job
        raise NotFound(f"job {job_id} has no output {path!r}", job_id=job_id, path=path)
