"""What launchers and engines say about attempts, applied to the store."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from trainyard.artifacts.store import ArtifactStore
from trainyard.engines.base import Observation
from trainyard.services.notify import Notifier
from trainyard.services.retry import decide
from trainyard.spec.records import AttemptInfo
from trainyard.status import Reason
from trainyard.store import Store

log = logging.getLogger("trainyard.attempts")


class AttemptService:
    def __init__(self, store: Store, artifacts: ArtifactStore, notifier: Notifier, wake: Callable[[], None]) -> None:
        self.store = store
        self.artifacts = artifacts
        self.notifier = notifier
        self.wake = wake

    def report(self, attempt_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """One launcher report (see :mod:`trainyard.launch`); answers whether to stop."""
        attempt = self.store.contact(attempt_id, running=body.get("phase") in ("running", "exited"))
        if log_part := body.get("log"):
            self.store.append_log(attempt_id, int(log_part["offset"]), str(log_part["data"]))
        if metrics := body.get("metrics"):
            self.store.add_metrics(attempt_id, int(metrics["offset"]), list(metrics["lines"]))
        if body.get("phase") == "exited" and body.get("result") is not None:
            self.finish(attempt, body["result"])
        else:
            self.notifier.notify(attempt.job_id)
        return {"cancel": attempt.cancel_requested}

    def finish(self, attempt: AttemptInfo, result: dict[str, Any]) -> bool:
        """Apply an attempt's final result once; a repeat is ignored."""
        reason = str(result.get("reason") or Reason.LOST)
        exit_code = result.get("exit_code")
        job = self.store.get_job(attempt.job_id)
        outcome = decide(job.spec.retry, attempt_number=attempt.number, exit_code=exit_code, reason=reason,
                         cancel_requested=attempt.cancel_requested, now=time.time())
        if result.get("outputs"):
            self.store.add_artifacts(attempt.job_id, attempt.number,
                                     self.artifacts.outputs_url(attempt.job_id, attempt.number), result["outputs"])
        done = self.store.finish_attempt(
            attempt.id, outcome.attempt_status, exit_code=exit_code, reason=reason,
            message=result.get("message") or None, job_status=outcome.job_status,
            job_reason=outcome.job_reason, not_before=outcome.not_before,
        )
        if done:
            log.info("attempt %s ended: %s; job %s", attempt.id, reason, outcome.job_status.value)
            self.notifier.notify(attempt.job_id)
            self.wake()
        return done

    def observe(self, observations: list[Observation], attempts: dict[str, AttemptInfo]) -> list[AttemptInfo]:
        """Apply what the engine saw; returns attempts that were never launched (to launch again)."""
        relaunch = []
        for obs in observations:
            attempt = attempts[obs.attempt_id]
            if obs.state == "exited":
                self.finish(attempt, obs.result)
            elif obs.state == "lost":
                self.finish(attempt, {"exit_code": None, "reason": Reason.LOST, "message": obs.detail})
            elif obs.state == "not_launched":
                relaunch.append(attempt)
        return relaunch
