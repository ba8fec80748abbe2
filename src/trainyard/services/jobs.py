"""Job rules shared by the API and the scheduler: submit, cancel, look up, wait, follow logs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, NamedTuple

from trainyard.artifacts.store import ArtifactStore
from trainyard.engines.base import Engine
from trainyard.auth.permissions import LOCAL_ADMIN, Action, Caller, Role, visible
from trainyard.errors import Conflict, Forbidden, InvalidSpec, JobNotFound, Unschedulable
from trainyard.scheduler.fit import check_fits_some_node
from trainyard.services.audit import AuditLog
from trainyard.services.dependencies import Dependencies
from trainyard.services.job_deletion import JobRemover
from trainyard.services.job_outputs import OutputsMixin
from trainyard.services.job_pages import PageCache
from trainyard.services.notify import Notifier, off_loop
from trainyard.services import store_inputs
from trainyard.services.scheduling import Scheduler
from trainyard.spec.dump import to_yaml
from trainyard.spec.exec_size import ARG_MAX, exec_size_problems, node_arg_max
from trainyard.spec.job import JobSpec
from trainyard.spec.job_query import JobFilter
from trainyard.spec.labels import LabelChange
from trainyard.spec.records import JobInfo, JobPage, LogChunk, MetricPoint
from trainyard.status import JobStatus
from trainyard.store import Store
from trainyard.store.store import Link
from trainyard.store.cache import Recent

logger = logging.getLogger("trainyard.jobs")

KEEP_ALIVE = 5.0  # seconds a log stream waits for news before it looks at the job again
LOG_PAGE = 2000  # log chunks read per query when the whole log is sent as text


class LogEvent(NamedTuple):
    cursor: int  # where a reader that reconnects resumes
    chunk: str  # one LogChunk, already JSON


class LogEnd(NamedTuple):
    status: JobStatus  # the job ended: nothing more will come


class LogCut(NamedTuple):
    """Bytes ``head…tail`` of a replica's log are gone from the server (past ``log_keep``): a reader that follows
    the log and holds them drops them, and shows what a reader from the start would."""

    attempt: int
    replica: int
    head: int
    tail: int


class JobService(OutputsMixin):
    def __init__(
        self, store: Store, engine: Engine, artifacts: ArtifactStore, notifier: Notifier, scheduler: Scheduler,
        team_for: Callable[[Caller, str], str | None], audit: AuditLog,
    ) -> None:
        self.store = store
        self.engine = engine
        self.artifacts = artifacts
        self.notifier = notifier
        self.scheduler = scheduler
        self.team_for = team_for  # who may use which queue, and the job's team (the queue service's rule)
        # each secret a job names exists in its team (bound by the platform to SecretService.check)
        self.check_secrets: Callable[[dict[str, str], str | None], None] = lambda wanted, team: None
        # variable -> bytes of the secret it names (bound by the platform to SecretService.sizes)
        self.secret_sizes: Callable[[dict[str, str], str | None, bool], dict[str, int]] = lambda w, t, exact: {}
        # one made later in an owner's name: they may still submit it, at its priority (bound by the platform to
        # IdentityService.check_submitter and QueueService.check_priority)
        self.check_owner: Callable[[str | None, str | None, JobSpec], None] = lambda owner, team, spec: None
        # a non-admin's job is no higher than its queue allows (bound by the platform to QueueService.check_priority)
        self.check_priority: Callable[[Caller, JobSpec], None] = lambda caller, spec: None
        # what a job's queue's quota counts, the job says (bound by the platform to QueueService.unmeasured)
        self.unmeasured: Callable[[JobSpec], tuple[str, str] | None] = lambda spec: None
        self.audit = audit
        self.dependencies = Dependencies(store, notifier, scheduler)  # a job's ``after``
        self.remover = JobRemover(store, engine, artifacts)
        self._ended_json: Recent[tuple[JobSpec, str]] = Recent(5_000)  # ended jobs change only their labels
        self._submitted: Recent[tuple[str | None, str | None]] = Recent(5_000)  # job id -> (team, owner), see wait
        self._pages = PageCache()

    def submit(self, spec: JobSpec, snapshot: str | None = None, caller: Caller = LOCAL_ADMIN, *,
               on_behalf: tuple[str | None, str | None] | None = None, link: Link | None = None) -> JobInfo:
        """Validate against this platform, store, and wake the scheduler. Nothing is stored on error.

        ``on_behalf``: (owner, team) of a pipeline step, a sweep's trial, a replica: what made it was checked
        when it was created, and its owner is asked again now (may they still submit it?). ``link``: see create_job."""
        if on_behalf is None:
            owner, team = self.check(spec, snapshot, caller)
        else:
            owner, team = on_behalf
            self.check_owner(owner, team, spec)
            self.engine.validate(spec)
            self.check_exec(spec, team)
            self._check_room(spec, snapshot)
        # whose jobs it may wait for: the caller's sight, or for a step its owner's within the run's team
        seer = caller if on_behalf is None or on_behalf[0] is None else \
            Caller(user=on_behalf[0], teams={on_behalf[1]: Role.MEMBER} if on_behalf[1] else {})
        spec = store_inputs.resolved(self, spec, seer)  # as the store URLs the launcher fetches
        waits = self.dependencies.check(spec, seer)
        audit = None if on_behalf is not None else self.audit.entry(caller, "job.submit", name=spec.name,
                                                                     queue=spec.queue, team=team)
        job = self.store.create_job(spec, snapshot, owner=owner, team=team, audit=audit, waits=waits, link=link)
        if self.notifier.max_wait is None:  # a follower's long polls read (see _unchanged)
            self._submitted.put(job.id, (team, owner))
        self.scheduler.remember(job)
        self.scheduler.wake()
        return job

    def check(self, spec: JobSpec, snapshot: str | None = None,
              caller: Caller = LOCAL_ADMIN) -> tuple[str | None, str | None]:
        """Everything :meth:`submit` checks, without storing: the job's (owner, team) if it would be accepted."""
        store_inputs.check_for(self, spec.inputs, caller)  # first: the engine's look for local inputs says more
        store_inputs.resolved(self, spec, caller)  # job:// refs: one the caller may see, that succeeded
        self.engine.validate(spec)
        owner, team = caller.user, self.team_for(caller, spec.queue)
        self.check_priority(caller, spec)
        self.check_secrets(spec.secrets, team)
        self.check_exec(spec, team)
        self._check_room(spec, snapshot)
        return owner, team

    def dry_run(self, spec: JobSpec, snapshot: str | None, caller: Caller) -> None:
        """What :meth:`submit` would refuse of ``spec`` (its ``after`` too), refused alike; nothing is stored."""
        self.check(spec, snapshot, caller)
        self.dependencies.check(spec, caller)

    def check_exec(self, spec: JobSpec, team: str | None) -> None:
        """The job's command and environment with its secrets (which the launcher adds) fit one exec; InvalidSpec
        naming secrets.VAR (or secrets) otherwise. The spec alone was checked when it was read."""
        if not spec.secrets:
            return
        arg_max = node_arg_max() if self.engine.name == "local" else ARG_MAX  # local: this machine execs it
        problems = exec_size_problems(spec.command, spec.params, spec.env_vars,
                                      self.secret_sizes(spec.secrets, team, False), arg_max)
        if problems:  # the bound said no: the exact sizes decide
            problems = exec_size_problems(spec.command, spec.params, spec.env_vars,
                                          self.secret_sizes(spec.secrets, team, True), arg_max)
        if problems:
            raise InvalidSpec(errors=[{"field": ".".join(map(str, loc)), "line": None, "where": ".".join(map(str, loc)),
                                       "message": message} for loc, message in problems])

    def _check_room(self, spec: JobSpec, snapshot: str | None) -> None:
        """The job fits some node, and its code was uploaded."""
        if (problem := self.placement_problem(spec)) is not None:
            field, message = problem
            raise Unschedulable(f"{field}: {message}", field=field)
        if snapshot is not None and not self.artifacts.has_snapshot(snapshot):
            raise InvalidSpec(errors=[{"field": "workdir", "line": None, "where": "workdir",
                                       "message": f"snapshot {snapshot} was not uploaded"}])

    def placement_problem(self, spec: JobSpec) -> tuple[str, str] | None:
        """(field, why) ``spec`` could never start: no node fits it, or its queue's quota could not count it."""
        return check_fits_some_node(spec, self.engine.nodes()) or self.unmeasured(spec)

    def cancel(self, job_id: str, caller: Caller = LOCAL_ADMIN) -> JobInfo:
        found = self.get(job_id, caller)
        if not caller.may(Action.CANCEL_OWN, found.team, found.owner):
            raise Forbidden(f"you may cancel only your own jobs; {job_id} is {found.owner}'s", job_id=job_id)
        job = self.stop(job_id)
        self.audit.record(caller, "job.cancel", job_id, status=job.status.value)
        return job

    def relabel(self, job_id: str, change: LabelChange, caller: Caller = LOCAL_ADMIN) -> dict[str, str]:
        """The job's labels after ``change`` (as its cancel, the owner's or a maintainer's to make)."""
        found = self.get(job_id, caller)
        if not caller.may(Action.CANCEL_OWN, found.team, found.owner):
            raise Forbidden(f"you may change the labels of your own jobs only; {job_id} is {found.owner}'s",
                            job_id=job_id)
        before, after = self.store.relabel(job_id, change.labels, change.overwrite)
        if after != before:
            self.audit.record(caller, "job.label", job_id, labels=change.labels)
        return after

    def stop(self, job_id: str, why: str | None = None, by: str = "user") -> JobInfo:
        """Cancel without asking who (a pipeline run stopping its steps); ``why`` becomes the job's reason (a
        sweep's pruning, a service's scale-down: what the job's owner reads for a cancel they did not ask)."""
        return self.stopping(job_id, self.store.request_cancel(job_id, by=by, why=why))

    def stopping(self, job_id: str, status: JobStatus) -> JobInfo:
        """What follows a committed cancel request (``status``: the job's after it): its attempts' replicas told
        to stop, its waiters and the scheduler woken."""
        job = self.store.get_job(job_id)
        if status == JobStatus.CANCELLING:
            for a in job.attempts:
                if not a.status.is_terminal():
                    self.scheduler.stop_attempt(a)
        self.notifier.notify(job_id)
        self.scheduler.wake()
        return job

    def delete(self, job_id: str, caller: Caller = LOCAL_ADMIN) -> None:
        """An ended job, with its records and files (:mod:`trainyard.services.job_deletion`); Conflict saying
        why for one that has not ended or is part of something larger."""
        found = self.get(job_id, caller)
        if not caller.may(Action.CANCEL_OWN, found.team, found.owner):
            raise Forbidden(f"you may delete only your own jobs; {job_id} is {found.owner}'s", job_id=job_id)
        if (why := self.remover.why_not([job_id]).get(job_id)) is not None:
            raise Conflict(f"job {job_id} cannot be deleted: {why}", job_id=job_id)
        if not self.remover.remove([job_id]):  # deleted meanwhile, by another request
            raise JobNotFound(f"no such job: {job_id}", job_id=job_id)
        self._ended_json.forget(job_id)
        self.audit.record(caller, "job.delete", job_id, name=found.name, queue=found.queue, status=found.status.value)

    # -- looking up -----------------------------------------------------------

    def list(self, where: JobFilter = JobFilter(), *, sort: str = "-created", limit: int = 50,
             cursor: str | None = None, offset: int = 0, count: bool = False,
             caller: Caller = LOCAL_ADMIN) -> JobPage:
        """A page of the jobs the caller may see. ``cursor`` pages in submit order (the CLI and SDK);
        ``offset`` pages any sort (the web UI)."""
        if cursor and sort not in ("-created", "created"):
            raise InvalidSpec.parameter("cursor", f"a cursor pages only in submit order, not sort={sort}: use offset")
        return self.store.list_jobs(where, sort=sort, limit=limit, cursor=cursor, offset=offset, count=count,
                                    visible=visible(caller))

    def list_json(self, where: JobFilter = JobFilter(), **query: Any) -> str:
        """:meth:`list` as JSON (a JobPage's), each ended job's part made once: a page of 50 cost
        more to serialize than to read."""
        page = self.list(_checked(where), **query)
        items = ",".join(self._json(job) for job in page.items)
        rest = page.model_dump_json(exclude={"items"})[1:]
        return f'{{"items":[{items}],{rest}'

    async def page_json(self, where: JobFilter = JobFilter(), *, caller: Caller = LOCAL_ADMIN, **query: Any) -> str:
        """:meth:`list_json` read off the event loop, once per page and version of the store for all
        who ask it (trainyard.services.job_pages)."""
        key = (where, visible(caller), tuple(sorted(query.items())))
        return await self._pages.get(key, self.store.version,
                                     lambda: self.list_json(where, caller=caller, **query))

    def counts(self, where: JobFilter = JobFilter(), caller: Caller = LOCAL_ADMIN) -> dict[str, int]:
        """How many jobs the caller may see are in each status, every status named (0 for none)."""
        found = self.store.job_counts(_checked(where), visible(caller))
        return {s.value: found.get(s.value, 0) for s in JobStatus}

    def _json(self, job: JobInfo) -> str:
        if not job.status.is_terminal():
            return job.model_dump_json()
        # kept with the spec it was made of: one whose labels changed since (here or on another server) is
        # another spec object, read again by the store
        if (kept := self._ended_json.get(job.id)) is not None and kept[0] is job.spec:
            return kept[1]
        text = job.model_dump_json()
        self._ended_json.put(job.id, (job.spec, text))
        return text

    def get(self, job_id: str, caller: Caller = LOCAL_ADMIN) -> JobInfo:
        """The job, if the caller may see it: another team's job is not found, as if it did not exist."""
        job = self.store.get_job(job_id)
        if not caller.sees(job.team, job.owner):
            raise JobNotFound(f"no such job: {job_id}", job_id=job_id)
        return job

    async def read(self, job_id: str, caller: Caller = LOCAL_ADMIN) -> str:
        """The job as JSON, if the caller may see it. One that has ended is answered from memory on the
        event loop: under many clients, each hop to a worker thread and back waited for the GIL and for a core."""
        return self._json(await self._seen(job_id, caller))

    async def _seen(self, job_id: str, caller: Caller) -> JobInfo:
        """:meth:`get` for the event loop: a job that has ended from memory, any other read in a worker thread."""
        job = self.store.ended_job(job_id) or await off_loop(self.store.get_job, job_id)
        if not caller.sees(job.team, job.owner):
            raise JobNotFound(f"no such job: {job_id}", job_id=job_id)
        return job

    def logs(self, job_id: str, *, after: int, attempt: int | None, replica: int | None, tail: int | None = None,
             caller: Caller = LOCAL_ADMIN) -> tuple[list[LogChunk], int]:
        """Log chunks after cursor ``after`` (or those of its last ``tail`` lines), and the cursor of the last one."""
        self.get(job_id, caller)  # raises JobNotFound for an unknown (or unseen) job
        if tail is not None:
            return self.store.read_log_tail(job_id, tail, attempt=attempt, replica=replica)
        return self.store.read_logs(job_id, after=after, attempt=attempt, replica=replica)

    def log_text(self, job_id: str, *, attempt: int | None, replica: int | None,
                 caller: Caller = LOCAL_ADMIN) -> Iterator[str]:
        """The whole log as text, read from the store a page at a time as it is sent: never cut, and
        a log of millions of lines costs one page of memory. Raises JobNotFound here, before a response starts."""
        self.get(job_id, caller)
        return self._log_pages(job_id, attempt, replica)

    def _log_pages(self, job_id: str, attempt: int | None, replica: int | None) -> Iterator[str]:
        cursor = 0
        while True:
            chunks, cursor = self.store.read_logs(job_id, after=cursor, attempt=attempt, replica=replica,
                                                  limit=LOG_PAGE)
            if not chunks:
                return
            yield "".join(c.data for c in chunks)

    def spec_yaml(self, job_id: str, caller: Caller = LOCAL_ADMIN) -> str:
        return to_yaml(self.get(job_id, caller).spec)

    def metrics(self, job_id: str, caller: Caller = LOCAL_ADMIN, system: bool = False) -> list[MetricPoint]:
        self.get(job_id, caller)
        return self.store.metrics(job_id, system)

    # -- watching (async: one waiter costs a future, not a thread) ----------------

    async def wait(self, job_id: str, timeout: float, caller: Caller = LOCAL_ADMIN) -> str:
        """The job as JSON once it has ended, or as it is after ``timeout`` seconds.

        JSON, not a JobInfo: the caller sends it as it is, and validating the model again
        on the way out would hold the GIL while the scheduler works."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen = self.notifier.version(job_id)
        # the SDK's wait for a job it just submitted here lands while the scheduler admits that job:
        # nothing to read then (its read and thread hop took the GIL from the cycle), see _unchanged
        unchanged = self._unchanged(job_id, seen)
        while True:
            # most waits of a burst find their job ended: no thread hop; one that waits reads only the
            # job's status (the whole job, read on every wake-up, cost 4x as much beside the scheduler)
            job = self.store.ended_job(job_id)
            if job is not None:
                status, team, owner = job.status, job.team, job.owner
            elif unchanged is not None:
                status, (team, owner), unchanged = JobStatus.PENDING, unchanged, None
            else:
                status, team, owner = await off_loop(self.store.job_state, job_id)
            if not caller.sees(team, owner):
                raise JobNotFound(f"no such job: {job_id}", job_id=job_id)
            left = deadline - loop.time()
            if status.is_terminal() or left <= 0:
                return self._json(job or await self._seen(job_id, caller))
            await self.notifier.wait(job_id, seen, left)
            if (final := self.notifier.final(job_id, seen)) is not None:  # it ended: no need to read it back
                return final
            seen = self.notifier.version(job_id)

    def leading(self) -> None:
        """This server schedules from now on: what it submitted before may have ended under another
        leader, unheard here."""
        self._submitted.clear()

    def _unchanged(self, job_id: str, seen: int) -> tuple[str | None, str | None] | None:
        """(team, owner) of a job submitted here that has not ended, known without a read: None unless
        this server schedules (every end it writes is notified here, and one that another server writes,
        such as a follower's cancel, within ``FOLLOWER_POLL``: trainyard.services.end_watch) and none
        has been notified for it (``seen``, its version, still 0)."""
        if seen != 0 or self.notifier.max_wait is not None:
            return None
        return self._submitted.get(job_id)

    def follow(self, job_id: str, *, after: int, attempt: int | None, replica: int | None, cuts: bool = False,
               caller: Caller = LOCAL_ADMIN) -> AsyncIterator[LogEvent | LogCut | LogEnd]:
        """Log chunks after cursor ``after`` as they come, then the job's final status; with ``cuts``, after
        chunks of a log past the bound, where its kept end now starts (a :class:`LogCut`, once per move).

        Raises JobNotFound here, before the caller starts a stream it could no longer turn into a 404."""
        self.get(job_id, caller)
        return self._follow(job_id, after, attempt, replica, cuts)

    async def _follow(self, job_id: str, after: int, attempt: int | None, replica: int | None, cuts: bool,
                      ) -> AsyncIterator[LogEvent | LogCut | LogEnd]:
        cursor, ended, sent = after, None, {}
        half = self.store.log_keep // 2
        while True:
            seen = self.notifier.version(job_id)
            chunks = await off_loop(self.store.read_log_cursors, job_id, after=cursor, attempt=attempt,
                                    replica=replica)
            for cursor, c in chunks:
                yield LogEvent(cursor, c.model_dump_json())
            # read after the chunks: a cut between the two reads drops bytes this reader got, never ones to come
            if cuts and half and any(c.offset >= half for _, c in chunks):
                # a chunk that starts the kept end, read after its cut was told, is told again: its lead lies in
                # the bytes the cut dropped (log_bound.lead), and goes with them
                again = {(c.attempt, c.replica) for _, c in chunks
                         if half <= c.offset < sent.get((c.attempt, c.replica), 0)}
                for (a, r), tail in (await off_loop(self.store.log_kept_from, job_id)).items():
                    if (sent.get((a, r)) != tail or (a, r) in again) and (attempt is None or a == attempt) and \
                            (replica is None or r == replica):
                        sent[(a, r)] = tail
                        yield LogCut(a, r, half, tail)
            if chunks:
                continue
            if ended is not None:
                yield LogEnd(ended)
                return
            job = await off_loop(self.store.get_job, job_id)
            if job.status.is_terminal():
                # read once more before the end: a launcher's last lines are committed with its end, and
                # may have come between the read above and this one (after a restart, both at once)
                ended = job.status
                continue
            await self.notifier.wait(job_id, seen, KEEP_ALIVE)


def _checked(where: JobFilter) -> JobFilter:
    if where.since is not None and where.until is not None and where.until <= where.since:
        raise InvalidSpec.parameter("until", "until must come after since")
    return where
