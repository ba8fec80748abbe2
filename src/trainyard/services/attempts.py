"""What launchers and engines say about attempts and their replicas, applied to the store.

An attempt is a gang of replicas. It ends when every replica has ended: all
succeeded → Succeeded; otherwise the first replica that failed on its own is
the cause. When one replica fails, the others are told to stop at once (no
waiting for an NCCL or gloo timeout), so the gang can be retried whole.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from trainyard.artifacts.store import ArtifactStore
from trainyard.engines.base import Observation
from trainyard.errors import AttemptNotFound
from trainyard.auth.tokens import token_hash
from trainyard.services.notify import Notifier
from trainyard.services.retry import decide
from trainyard.spec.records import AttemptInfo, ReplicaInfo
from trainyard.spec.reports import LauncherReport, LaunchResult, ReportAnswer
from trainyard.status import AttemptStatus, JobStatus, Reason
from trainyard.spec.job import JobSpec
from trainyard.store import Ending, Outputs, Store

if TYPE_CHECKING:
    from trainyard.services.replica_requests import ReplicaRequests

log = logging.getLogger("trainyard.attempts")


class AttemptService:
    def __init__(self, store: Store, artifacts: ArtifactStore, notifier: Notifier, wake: Callable[[], None],
                 stop: Callable[[AttemptInfo], None], freed: Callable[[], None] | None = None) -> None:
        self.store = store
        self.artifacts = artifacts
        self.notifier = notifier
        self.wake = wake
        self.freed = freed or wake  # a job that ended for good: the scheduler plans only if a job waits
        self.stop = stop  # asks the engine to stop every replica of an attempt
        self.requests: ReplicaRequests | None = None  # stacks and commands asked of launchers (Platform sets it)

    def report(self, attempt_id: str, replica: int, report: LauncherReport, token: str | None) -> ReportAnswer:
        """One launcher report (see :mod:`trainyard.launch`); answers whether to stop.

        ``token`` is the attempt's credential as the launcher sent it; without the
        right one, or once the attempt has ended, nothing at all is changed (the
        store checks both in the report's own transaction). The last report of a
        replica (with its result and outputs) is applied in the same transaction
        as its log bytes, and ends the attempt if it was the last.
        """
        result = report.final
        end = self._end_args(attempt_id, replica, result) if result is not None else None
        job_id, stop_reason, done = self.store.report(
            attempt_id, replica, token_hash=token_hash(token) if token else None, running=report.running,
            log=(report.log.offset, report.log.data) if report.log else None,
            metrics=(report.metrics.offset, report.metrics.lines) if report.metrics else None, end=end,
        )
        if done is not None:
            stop_reason = self._after_replica(done, replica, end["reason"]).stop_reason
        else:
            self.notifier.notify(job_id)
        if self.requests is None:
            return ReportAnswer(cancel=stop_reason is not None)
        if report.stacks or report.execs:  # the credential was checked with the report, in store.report
            self.requests.answered(attempt_id, replica, [*report.stacks, *report.execs])
        if result is not None or stop_reason is not None:
            return ReportAnswer(cancel=stop_reason is not None)
        asked = self.requests.asked(attempt_id, replica)
        return ReportAnswer(cancel=False, stacks=asked.stacks, execs=asked.execs)

    def finish_replica(self, attempt: AttemptInfo, replica: int, result: LaunchResult) -> AttemptInfo | None:
        """Apply one replica's final result once; ends the attempt when it was the last."""
        end = self._end_args(attempt.id, replica, result)
        done = self.store.finish_replica(attempt.id, replica, **end)
        return None if done is None else self._after_replica(done, replica, end["reason"])

    def _end_args(self, attempt_id: str, replica: int, result: LaunchResult) -> dict[str, Any]:
        """``finish_replica``'s keyword arguments for a replica's result (outputs recorded with its end)."""
        return {"status": result.kind.to_status(), "exit_code": result.exit_code,
                "reason": result.reason or Reason.LOST.value, "message": result.message or None,
                "conclude": _conclude, "outputs": self._outputs(attempt_id, replica, result)}

    def _outputs(self, attempt_id: str, replica: int, result: LaunchResult) -> Outputs | None:
        if not result.outputs:
            return None
        items = [o.model_dump() for o in result.outputs]
        job_id, _, number = attempt_id.rpartition("-")  # attempt ids are "<job id>-<number>" (Store.admit)
        if not (job_id and number.isascii() and number.isdigit()):
            raise AttemptNotFound(f"no such attempt: {attempt_id}", attempt_id=attempt_id)
        return Outputs(self.artifacts.outputs_url(job_id, int(number), replica), items,
                       f"replica-{replica}/" if replica else "")

    def _after_replica(self, done: tuple[AttemptInfo, bool], replica: int, reason: str) -> AttemptInfo:
        """Wake who waits; when a replica failed and others still run, stop them."""
        attempt, ended = done
        if ended:
            job = self.store.get_job(attempt.job_id)
            # a job that has ended stays as it is: its long polls answer with this, without a read
            ended_for_good = job.status.is_terminal()
            self.notifier.notify(attempt.job_id, job.model_dump_json() if ended_for_good else None)
            # after: the scheduler's cycle would hold the GIL while the waiters are answered
            (self.freed if ended_for_good else self.wake)()  # a retry is a job waiting again
            log.info("attempt %s ended: %s; job %s", attempt.id, attempt.reason, attempt.status.value)
            return attempt
        self.notifier.notify(attempt.job_id)
        if Reason.of(reason) is not Reason.SUCCEEDED:
            if self.store.request_stop(attempt.id, f"replica {replica} ended: {reason}"):
                log.info("attempt %s: replica %d ended (%s); stopping the other replicas", attempt.id, replica, reason)
                attempt = self.store.get_attempt(attempt.id)
                self.stop(attempt)
        return attempt

    def fail(self, attempt: AttemptInfo, reason: Reason, message: str) -> None:
        """End every live replica of an attempt that could not run (e.g. its launch failed)."""
        for r in attempt.replicas:
            if not r.status.is_terminal():
                self.finish_replica(attempt, r.index, LaunchResult(reason=reason, message=message))

    def observe(self, observations: list[Observation], attempts: dict[str, AttemptInfo]) -> list[AttemptInfo]:
        """Apply what the engine saw; returns attempts that were never launched (to launch again)."""
        relaunch: dict[str, AttemptInfo] = {}
        for obs in observations:
            attempt = attempts[obs.attempt_id]
            if obs.state == "exited":  # without a result: as lost, the engine could not read one
                self.finish_replica(attempt, obs.replica, obs.result or LaunchResult(message=obs.detail or None))
            elif obs.state == "lost":
                self.finish_replica(attempt, obs.replica, LaunchResult(reason=Reason.LOST, message=obs.detail))
            elif obs.state == "not_launched":
                relaunch[attempt.id] = attempt
        return list(relaunch.values())


def _conclude(attempt: AttemptInfo, job_status: JobStatus, spec: JobSpec, tries: int) -> Ending:
    """How a gang whose replicas have all ended ends, and what becomes of its job (``tries``: see decide)."""
    exit_code, reason, message = _outcome(attempt)
    outcome = decide(spec.retry, tries=tries, exit_code=exit_code, reason=reason,
                     cancel_requested=job_status == JobStatus.CANCELLING, now=time.time())
    return Ending(outcome.attempt_status, exit_code, reason, message, outcome.job_status, outcome.job_reason,
                  outcome.not_before)


def _outcome(attempt: AttemptInfo) -> tuple[int | None, str, str | None]:
    """(exit code, reason, message) of a finished gang."""
    reps = attempt.replicas
    if all(r.status == AttemptStatus.SUCCEEDED for r in reps):
        return 0, Reason.SUCCEEDED.value, None
    if _stopped(attempt.stop_reason):  # a cancel or a preemption, not "replica N ended: …"
        return _first_by_end([r for r in reps if _stopped(r.reason)] or reps).exit_code, attempt.stop_reason, None
    # the root cause: the first replica that ended badly on its own, not one we stopped
    cause = _first_by_end([r for r in reps if r.status == AttemptStatus.FAILED] or reps)
    reason = cause.reason or Reason.LOST.value
    if _stopped(reason):  # said by its launcher, which the job may speak for: no stop was asked, so none is taken
        reason = Reason.LOST.value if cause.exit_code is None else f"Error(exit {cause.exit_code})"
    message = cause.message
    if len(reps) > 1:
        message = f"replica {cause.index} on {cause.node}: {reason}" + (f"; {cause.message}" if cause.message else "")
    return cause.exit_code, reason, message


def _stopped(reason: str | None) -> bool:
    """Ended on request (cancel or preemption), not by what the job did."""
    kind = Reason.of(reason)
    return kind is not None and kind.to_status() == AttemptStatus.CANCELLED


def _first_by_end(reps: list[ReplicaInfo]) -> ReplicaInfo:
    return min(reps, key=lambda r: (r.ended_at or float("inf"), r.index))
