"""A running job's stacks on request (``trainyard stack``): asked for here, dumped by each replica's launcher.

The launcher is told with the answer to its next report (one comes at least every 3 s while the command
runs), dumps its command's Python processes with py-spy, and sends the text with a later report. Requests
are rows, so a launcher reporting to another server of the same database hears of them too; each server
reads the unanswered ones at most once a second, not once a report.
"""

from __future__ import annotations

import threading
import time

from trainyard.auth.permissions import LOCAL_ADMIN, Action, Caller
from trainyard.errors import Conflict, Forbidden
from trainyard.services.audit import AuditLog
from trainyard.services.jobs import JobService
from trainyard.spec.reports import StackAnswer, StackAsk
from trainyard.spec.stacks import StackDump, StackRequest
from trainyard.status import AttemptStatus
from trainyard.store import Store
from trainyard.store.stacks import StackStore

REFRESH = 1.0  # seconds a server's copy of the unanswered requests is used before it reads them again


class StackService:
    def __init__(self, store: Store, jobs: JobService, audit: AuditLog) -> None:
        self.rows = StackStore(store)
        self.jobs, self.audit = jobs, audit
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, int], list[StackAsk]] = {}
        self._read_at = -REFRESH

    def request(self, job_id: str, req: StackRequest, caller: Caller = LOCAL_ADMIN) -> list[StackDump]:
        """Ask each running replica of the job's attempt (or ``req.replica``) for its stacks."""
        job = self.jobs.get(job_id, caller)
        if not caller.may(Action.CANCEL_OWN, job.team, job.owner):
            raise Forbidden(f"you may dump the stacks only of your own jobs; {job_id} is {job.owner}'s", job_id=job_id)
        attempt = job.attempts[-1] if job.attempts else None
        running = [r for r in attempt.replicas if r.status is AttemptStatus.RUNNING] if attempt else []
        if not running:
            state = job.status.value if job.status.is_terminal() or attempt is None else \
                "replicas " + ", ".join(sorted({r.status.value for r in attempt.replicas}))
            raise Conflict(f"job {job_id} has no running command to dump ({state})", job_id=job_id)
        if req.replica is not None:
            running = [r for r in running if r.index == req.replica]
            if not running:
                raise Conflict(f"replica {req.replica} of job {job_id} is not running", job_id=job_id,
                               replica=req.replica)
        dumps = self.rows.request(job_id, attempt.id, [(r.index, r.node) for r in running], caller.user,
                                  with_locals=req.locals, native=req.native)
        with self._lock:
            self._read_at = -REFRESH  # the next report reads them
        self.audit.record(caller, "job.stack", job_id, replicas=[d.replica for d in dumps], locals=req.locals,
                          native=req.native)
        return dumps

    def of_job(self, job_id: str, caller: Caller = LOCAL_ADMIN) -> list[StackDump]:
        """The job's kept dumps, newest first."""
        self.jobs.get(job_id, caller)
        return self.rows.of_job(job_id)

    def asked(self, attempt_id: str, replica: int) -> list[StackAsk]:
        """The requests a running replica's launcher has yet to answer (with the answer to its report)."""
        now = time.monotonic()
        with self._lock:
            if now - self._read_at >= REFRESH:
                self._read_at = now
                self._pending = self.rows.pending()
            return self._pending.get((attempt_id, replica), [])

    def answered(self, attempt_id: str, replica: int, answers: list[StackAnswer]) -> None:
        """A launcher's answers, from a report its attempt's credential was checked on."""
        self.rows.answer(attempt_id, replica, answers)
        with self._lock:
            ids = {a.id for a in answers}
            left = [a for a in self._pending.get((attempt_id, replica), []) if a.id not in ids]
            self._pending[(attempt_id, replica)] = left
