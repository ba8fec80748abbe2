"""Work asked of a running job's launchers on their nodes: dump the command's stacks (``trainyard stack``) or run
a command beside it (``trainyard exec``).

The launcher is told with the answer to its next report (one comes at least every 3 s while the command
runs), does it in a thread of its own, and sends the result with a later report. Requests are rows, so a
launcher reporting to another server of the same database hears of them too; each server reads the
unanswered ones at most once a second, not once a report.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from trainyard.auth.permissions import LOCAL_ADMIN, Action, Caller
from trainyard.errors import Conflict, Forbidden, NotFound
from trainyard.services.audit import AuditLog
from trainyard.services.jobs import JobService
from trainyard.spec.execs import ExecRequest, ExecResult
from trainyard.spec.records import AttemptInfo, JobInfo, ReplicaInfo
from trainyard.spec.reports import ExecAnswer, StackAnswer
from trainyard.spec.stacks import StackDump, StackRequest
from trainyard.status import AttemptStatus
from trainyard.store import Store
from trainyard.store.replica_requests import Pending, RequestRows

REFRESH = 1.0  # seconds a server's copy of the unanswered requests is used before it reads them again
_NONE = Pending([], [])


class ReplicaRequests:
    def __init__(self, store: Store, jobs: JobService, audit: AuditLog) -> None:
        self.rows = RequestRows(store)
        # the Unix account a job of this owner runs as, if any (bound by the platform to IdentityService.run_as)
        self.runs_as: Callable[[str | None], dict | None] = lambda owner: None
        self.jobs, self.audit = jobs, audit
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, int], Pending] = {}
        self._read_at = -REFRESH

    def _running(self, job_id: str, caller: Caller, what: str) -> tuple[JobInfo, AttemptInfo, list[ReplicaInfo]]:
        """The job's attempt and its running replicas, for one who may act on it."""
        job = self.jobs.get(job_id, caller)
        if not caller.may(Action.CANCEL_OWN, job.team, job.owner):
            raise Forbidden(f"you may {what} your own jobs only; {job_id} is {job.owner}'s", job_id=job_id)
        attempt = job.attempts[-1] if job.attempts else None
        running = [r for r in attempt.replicas if r.status is AttemptStatus.RUNNING] if attempt else []
        if not running:
            state = job.status.value if job.status.is_terminal() or attempt is None else \
                "replicas " + ", ".join(sorted({r.status.value for r in attempt.replicas}))
            raise Conflict(f"job {job_id} has no running command ({state})", job_id=job_id)
        return job, attempt, running

    @staticmethod
    def _one(job_id: str, running: list[ReplicaInfo], replica: int) -> list[ReplicaInfo]:
        mine = [r for r in running if r.index == replica]
        if not mine:
            raise Conflict(f"replica {replica} of job {job_id} is not running", job_id=job_id, replica=replica)
        return mine

    def _asked_now(self) -> None:
        with self._lock:
            self._read_at = -REFRESH  # the next report reads them

    def request_stacks(self, job_id: str, req: StackRequest, caller: Caller = LOCAL_ADMIN) -> list[StackDump]:
        """Ask each running replica of the job's attempt (or ``req.replica``) for its stacks."""
        _, attempt, running = self._running(job_id, caller, "dump the stacks of")
        if req.replica is not None:
            running = self._one(job_id, running, req.replica)
        dumps = self.rows.request_stacks(job_id, attempt.id, [(r.index, r.node) for r in running], caller.user,
                                         with_locals=req.locals, native=req.native)
        self._asked_now()
        self.audit.record(caller, "job.stack", job_id, replicas=[d.replica for d in dumps], locals=req.locals,
                          native=req.native)
        return dumps

    def stacks_of(self, job_id: str, caller: Caller = LOCAL_ADMIN) -> list[StackDump]:
        """The job's kept dumps, newest first."""
        self.jobs.get(job_id, caller)
        return self.rows.stacks_of(job_id)

    def request_exec(self, job_id: str, req: ExecRequest, caller: Caller = LOCAL_ADMIN) -> ExecResult:
        """Ask replica ``req.replica``'s launcher to run ``req.argv`` beside the command."""
        job, attempt, running = self._running(job_id, caller, "run commands in")
        if not caller.admin and caller.user != job.owner and (account := self.runs_as(job.owner)) is not None:
            # a command beside the job runs as its account: a maintainer's would read the owner's own files
            raise Forbidden(f"job {job_id} runs as {job.owner}'s Unix account {account['name']}: only {job.owner} "
                            "or an admin may run commands in it", job_id=job_id)
        [r] = self._one(job_id, running, req.replica)
        made = self.rows.request_exec(job_id, attempt.id, r.index, r.node, req.argv, req.timeout, caller.user)
        self._asked_now()
        self.audit.record(caller, "job.exec", job_id, replica=r.index, argv=req.argv)
        return made

    def exec_of(self, job_id: str, exec_id: int, caller: Caller = LOCAL_ADMIN) -> ExecResult:
        self.jobs.get(job_id, caller)
        if (found := self.rows.exec_of(job_id, exec_id)) is None:
            raise NotFound(f"job {job_id} has no command {exec_id}", job_id=job_id, exec_id=exec_id)
        return found

    def asked(self, attempt_id: str, replica: int) -> Pending:
        """The requests a running replica's launcher has yet to answer (with the answer to its report)."""
        now = time.monotonic()
        with self._lock:
            if now - self._read_at >= REFRESH:
                self._read_at = now
                self._pending = self.rows.pending()
            return self._pending.get((attempt_id, replica), _NONE)

    def answered(self, attempt_id: str, replica: int, answers: list[StackAnswer | ExecAnswer]) -> None:
        """A launcher's answers, from a report its attempt's credential was checked on."""
        self.rows.answer(attempt_id, replica, answers)
        with self._lock:
            if (was := self._pending.get((attempt_id, replica))) is not None:
                done = {(type(a) is ExecAnswer, a.id) for a in answers}
                self._pending[(attempt_id, replica)] = Pending([a for a in was.stacks if (False, a.id) not in done],
                                                               [a for a in was.execs if (True, a.id) not in done])
