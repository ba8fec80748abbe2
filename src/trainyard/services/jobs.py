"""Job rules shared by the API and the scheduler: submit, cancel, look up, wait, follow logs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import NamedTuple

from trainyard.artifact_paths import check_artifact_path
from trainyard.artifacts.store import ArtifactStore
from trainyard.engines.base import Engine
from trainyard.errors import InvalidSpec, NotFound, StorageError, Unschedulable
from trainyard.scheduler.fit import check_fits_some_node
from trainyard.services.notify import Notifier, off_loop
from trainyard.services.scheduling import Scheduler
from trainyard.spec.job import JobSpec
from trainyard.spec.records import ArtifactInfo, JobInfo, JobPage, LogChunk, MetricPoint
from trainyard.status import JobStatus
from trainyard.store import Store

logger = logging.getLogger("trainyard.jobs")

KEEP_ALIVE = 5.0  # seconds a log stream waits for news before it looks at the job again


class LogEvent(NamedTuple):
    cursor: int  # where a reader that reconnects resumes
    chunk: str  # one LogChunk, already JSON


class LogEnd(NamedTuple):
    status: JobStatus  # the job ended: nothing more will come


class JobService:
    def __init__(
        self, store: Store, engine: Engine, artifacts: ArtifactStore, notifier: Notifier, scheduler: Scheduler,
        check_queue: Callable[[str], None],
    ) -> None:
        self.store = store
        self.engine = engine
        self.artifacts = artifacts
        self.notifier = notifier
        self.scheduler = scheduler
        self.check_queue = check_queue  # refuses unknown queues (the queue service's rule)

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
        self.scheduler.remember(job)
        self.scheduler.wake()
        return job

    def cancel(self, job_id: str) -> JobInfo:
        status = self.store.request_cancel(job_id)
        job = self.store.get_job(job_id)
        if status == JobStatus.CANCELLING:
            for a in job.attempts:
                if not a.status.is_terminal():
                    self.scheduler.stop_attempt(a)
        self.notifier.notify(job_id)
        self.scheduler.wake()
        return job

    # -- looking up -----------------------------------------------------------

    def list(self, *, status: list[str] | None, name: str | None, queue: str | None, limit: int,
             cursor: str | None, since: float | None = None) -> JobPage:
        return self.store.list_jobs(status=status, name=name, queue=queue, limit=limit, cursor=cursor, since=since)

    def get(self, job_id: str) -> JobInfo:
        return self.store.get_job(job_id)

    def logs(self, job_id: str, *, after: int, attempt: int | None, replica: int | None,
             ) -> tuple[list[LogChunk], int]:
        """Log chunks after cursor ``after``, and the cursor of the last one."""
        self.store.get_job(job_id)  # raises JobNotFound for an unknown job
        return self.store.read_logs(job_id, after=after, attempt=attempt, replica=replica)

    def metrics(self, job_id: str) -> list[MetricPoint]:
        self.store.get_job(job_id)
        return self.store.metrics(job_id)

    def outputs(self, job_id: str) -> list[ArtifactInfo]:
        self.store.get_job(job_id)
        return [info for info, _ in self.store.artifacts(job_id)]

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

    def open_output(self, job_id: str, path: str) -> tuple[ArtifactInfo, Iterator[bytes]]:
        """One output file's record and its bytes, read as they are sent and checked against the record
        (a missing object or one of the wrong size raises here, naming its key)."""
        info, url = self.output(job_id, path)
        return info, _ended_quietly(self.artifacts.read(url, info.size, info.digest))

    # -- watching (async: one waiter costs a future, not a thread) ----------------

    async def wait(self, job_id: str, timeout: float) -> str:
        """The job as JSON once it has ended, or as it is after ``timeout`` seconds.

        JSON, not a JobInfo: the caller sends it as it is, and validating the model again
        on the way out would hold the GIL while the scheduler works."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen = self.notifier.version(job_id)
        while True:
            job = await off_loop(self.store.get_job, job_id)
            left = deadline - loop.time()
            if job.status.is_terminal() or left <= 0:
                return job.model_dump_json()
            await self.notifier.wait(job_id, seen, left)
            if (final := self.notifier.final(job_id, seen)) is not None:  # it ended: no need to read it back
                return final
            seen = self.notifier.version(job_id)

    def follow(self, job_id: str, *, after: int, attempt: int | None, replica: int | None,
               ) -> AsyncIterator[LogEvent | LogEnd]:
        """Log chunks after cursor ``after`` as they come, then the job's final status.

        Raises JobNotFound here, before the caller starts a stream it could no longer turn into a 404."""
        self.store.get_job(job_id)
        return self._follow(job_id, after, attempt, replica)

    async def _follow(self, job_id: str, after: int, attempt: int | None, replica: int | None,
                      ) -> AsyncIterator[LogEvent | LogEnd]:
        cursor = after
        while True:
            seen = self.notifier.version(job_id)
            chunks, cursor = await off_loop(self.store.read_logs, job_id, after=cursor, attempt=attempt,
                                         replica=replica)
            for c in chunks:
                yield LogEvent(cursor, c.model_dump_json())
            if chunks:
                continue
            job = await off_loop(self.store.get_job, job_id)
            if job.status.is_terminal():
                yield LogEnd(job.status)
                return
            await self.notifier.wait(job_id, seen, KEEP_ALIVE)


def _ended_quietly(body: Iterator[bytes]) -> Iterator[bytes]:
    """``body``, whose late failure (a wrong digest is known after the last byte) is logged with the
    object's key, not raised: the response has started, and the client checks ``X-Digest`` itself."""
    try:
        yield from body
    except StorageError as e:
        logger.error("%s", e.message)
