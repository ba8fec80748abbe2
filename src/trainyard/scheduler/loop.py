"""The scheduler loop: observe attempts, admit what fits, launch, record reasons.

Thin on purpose: decisions come from :class:`~trainyard.scheduler.admission.Admission`;
this applies them through the store (compare-and-set) and the engine. It runs
on a submission, a finished attempt or a cancel (``wake``), and at least once
a second to notice lost launchers and retries whose backoff has passed.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from trainyard.engines.base import Engine
from trainyard.launch.config import LaunchConfig
from trainyard.scheduler.admission import Admission
from trainyard.services.attempts import AttemptService
from trainyard.spec.records import AttemptInfo, JobInfo, NodeInfo
from trainyard.store import Store

log = logging.getLogger("trainyard.scheduler")
ConfigFor = Callable[[JobInfo, AttemptInfo], list[LaunchConfig]]


class SchedulerLoop:
    def __init__(
        self, store: Store, engine: Engine, admission: Admission, attempts: AttemptService,
        config_for: ConfigFor, nodes: Callable[[], list[NodeInfo]], *, reconcile_every: float = 1.0,
    ) -> None:
        self.store = store
        self.engine = engine
        self.admission = admission
        self.attempts = attempts
        self.config_for = config_for
        self.nodes = nodes
        self.reconcile_every = reconcile_every
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._signalled: set[str] = set()  # attempts already told to stop by this process
        self._last_reconcile = 0.0
        self._next_due: float | None = None

    def wake(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="trainyard-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            timeout = self.reconcile_every
            if self._next_due is not None:
                timeout = max(0.0, min(timeout, self._next_due - time.time()))
            self._wake.wait(timeout)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.tick()
            except Exception:  # the loop must outlive any one bad cycle
                log.exception("scheduler cycle failed")
                time.sleep(0.2)

    def tick(self) -> None:
        now = time.time()
        if now - self._last_reconcile >= self.reconcile_every:
            self._last_reconcile = now
            self.reconcile()
        self.admit(now)

    def reconcile(self) -> None:
        active = self.store.active_attempts()
        by_id = {a.id: a for a in active}
        self._signalled &= by_id.keys()  # forget attempts that have ended
        for a in active:
            if a.stop_reason:
                self.stop_attempt(a)
        for a in self.attempts.observe(self.engine.reconcile(active), by_id):
            self._launch(self.store.get_job(a.job_id), a)

    def stop_attempt(self, attempt: AttemptInfo) -> None:
        """Tell the engine to stop every replica of ``attempt`` (once per attempt from this process)."""
        if attempt.id not in self._signalled:
            self._signalled.add(attempt.id)
            self.engine.cancel(attempt)

    def admit(self, now: float) -> None:
        pending = self.store.pending_jobs()
        if not pending:  # most wake-ups after an attempt ends: no need to add up node usage
            self._next_due = None
            return
        plan = self.admission.plan(pending, self.nodes(), now)
        jobs = {j.id: j for j in pending}
        for p in plan.placements:
            attempt = self.store.admit(p.job_id, p.replicas)
            if attempt is not None:
                self._launch(jobs[p.job_id], attempt)
        self.store.set_reasons(plan.reasons)
        due = [j.not_before for j in pending if j.not_before and j.not_before > now]
        self._next_due = min(due) if due else None

    def _launch(self, job: JobInfo, attempt: AttemptInfo) -> None:
        try:
            handle = self.engine.launch(attempt, job.spec, self.config_for(job, attempt))
        except Exception as e:  # a launch that cannot start ends the attempt, with why
            log.exception("launch of %s failed", attempt.id)
            self.attempts.fail(attempt, "SetupFailed", f"launch failed: {e}")
            return
        self.store.set_handle(attempt.id, handle)
