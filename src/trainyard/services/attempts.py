"""What launchers and engines say about attempts and their replicas, applied to the store.

An attempt is a gang of replicas. It ends when every replica has ended: all
succeeded → Succeeded; otherwise the first replica that failed on its own is
the cause. When one replica fails, the others are told to stop at once (no
waiting for an NCCL or gloo timeout), so the gang can be retried whole.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from trainyard.artifacts.store import ArtifactStore
from trainyard.engines.base import Observation
from trainyard.errors import AttemptNotFound
from trainyard.auth.tokens import token_hash
from trainyard.services.notify import Notifier
from trainyard.services.reports import parse_report
from trainyard.services.retry import decide
from trainyard.spec.records import AttemptInfo, ReplicaInfo
from trainyard.status import AttemptStatus, JobStatus, Reason
from trainyard.spec.job import JobSpec
from trainyard.store import Ending, Outputs, Store

log = logging.getLogger("trainyard.attempts")
STOPPED = (Reason.CANCELLED, Reason.PREEMPTED)


class AttemptService:
    def __init__(self, store: Store, artifacts: ArtifactStore, notifier: Notifier, wake: Callable[[], None],
                 stop: Callable[[AttemptInfo], None]) -> None:
        self.store = store
        self.artifacts = artifacts
        self.notifier = notifier
        self.wake = wake
        self.stop = stop  # asks the engine to stop every replica of an attempt

    def report(self, attempt_id: str, replica: int, body: dict[str, Any], token: str | None) -> dict[str, Any]:
        """One launcher report (see :mod:`trainyard.launch`); answers whether to stop.

        ``token`` is the attempt's credential as the launcher sent it; without the
        right one, or once the attempt has ended, nothing at all is changed (the
        store checks both in the report's own transaction). The last report of a
        replica (with its result and outputs) is applied in the same transaction
        as its log bytes, and ends the attempt if it was the last.
        """
        report = parse_report(body)
        end = self._end_args(attempt_id, replica, report.result) if report.result is not None else None
        job_id, stop_reason, done = self.store.report(
            attempt_id, replica, token_hash=token_hash(token) if token else None, running=report.running,
            log=report.log, metrics=report.metrics, end=end,
        )
        if done is not None:
            stop_reason = self._after_replica(done, replica, end["reason"]).stop_reason
        else:
            self.notifier.notify(job_id)
        return {"cancel": stop_reason is not None}

    def finish_replica(self, attempt: AttemptInfo, replica: int, result: dict[str, Any]) -> AttemptInfo | None:
        """Apply one replica's final result once; ends the attempt when it was the last."""
        end = self._end_args(attempt.id, replica, result)
        done = self.store.finish_replica(attempt.id, replica, **end)
        return None if done is None else self._after_replica(done, replica, end["reason"])

    def _end_args(self, attempt_id: str, replica: int, result: dict[str, Any]) -> dict[str, Any]:
        """``finish_replica``'s keyword arguments for a replica's result (outputs recorded with its end)."""
        reason = str(result.get("reason") or Reason.LOST)
        status = (AttemptStatus.SUCCEEDED if reason == Reason.SUCCEEDED
                  else AttemptStatus.CANCELLED if reason in STOPPED else AttemptStatus.FAILED)
        return {"status": status, "exit_code": result.get("exit_code"), "reason": reason,
                "message": result.get("message") or None, "conclude": _conclude,
                "outputs": self._outputs(attempt_id, replica, result)}

    def _outputs(self, attempt_id: str, replica: int, result: dict[str, Any]) -> Outputs | None:
        items = result.get("outputs")
        if not items or not isinstance(items, list):
            return None
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
            self.notifier.notify(attempt.job_id, job.model_dump_json() if job.status.is_terminal() else None)
            self.wake()  # after: the scheduler's cycle would hold the GIL while the waiters are answered
            log.info("attempt %s ended: %s; job %s", attempt.id, attempt.reason, attempt.status.value)
            return attempt
        self.notifier.notify(attempt.job_id)
        if reason != Reason.SUCCEEDED:
            if self.store.request_stop(attempt.id, f"replica {replica} ended: {reason}"):
                log.info("attempt %s: replica %d ended (%s); stopping the other replicas", attempt.id, replica, reason)
                attempt = self.store.get_attempt(attempt.id)
                self.stop(attempt)
        return attempt

    def fail(self, attempt: AttemptInfo, reason: str, message: str) -> None:
        """End every live replica of an attempt that could not run (e.g. its launch failed)."""
        for r in attempt.replicas:
            if not r.status.is_terminal():
                self.finish_replica(attempt, r.index, {"exit_code": None, "reason": reason, "message": message})

    def observe(self, observations: list[Observation], attempts: dict[str, AttemptInfo]) -> list[AttemptInfo]:
        """Apply what the engine saw; returns attempts that were never launched (to launch again)."""
        relaunch: dict[str, AttemptInfo] = {}
        for obs in observations:
            attempt = attempts[obs.attempt_id]
            if obs.state == "exited":
                self.finish_replica(attempt, obs.replica, obs.result)
            elif obs.state == "lost":
                self.finish_replica(attempt, obs.replica, {"exit_code": None, "reason": Reason.LOST,
                                                           "message": obs.detail})
            elif obs.state == "not_launched":
                relaunch[attempt.id] = attempt
        return list(relaunch.values())


def _conclude(attempt: AttemptInfo, job_status: JobStatus, spec: JobSpec) -> Ending:
    """How a gang whose replicas have all ended ends, and what becomes of its job."""
    exit_code, reason, message = _outcome(attempt)
    outcome = decide(spec.retry, attempt_number=attempt.number, exit_code=exit_code, reason=reason,
                     cancel_requested=job_status == JobStatus.CANCELLING, now=time.time())
    return Ending(outcome.attempt_status, exit_code, reason, message, outcome.job_status, outcome.job_reason,
                  outcome.not_before)


def _outcome(attempt: AttemptInfo) -> tuple[int | None, str, str | None]:
    """(exit code, reason, message) of a finished gang."""
    reps = attempt.replicas
    if all(r.status == AttemptStatus.SUCCEEDED for r in reps):
        return 0, Reason.SUCCEEDED, None
    if attempt.stop_reason in STOPPED:
        return _first_by_end([r for r in reps if r.reason in STOPPED] or reps).exit_code, attempt.stop_reason, None
    # the root cause: the first replica that ended badly on its own, not one we stopped
    cause = _first_by_end([r for r in reps if r.status == AttemptStatus.FAILED] or reps)
    message = cause.message
    if len(reps) > 1:
        message = f"replica {cause.index} on {cause.node}: {cause.reason}" + (f"; {cause.message}" if cause.message else "")
    return cause.exit_code, cause.reason or Reason.LOST, message


def _first_by_end(reps: list[ReplicaInfo]) -> ReplicaInfo:
    return min(reps, key=lambda r: (r.ended_at or float("inf"), r.index))
