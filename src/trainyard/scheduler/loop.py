"""The scheduler loop: observe attempts, plan, admit, preempt, launch, record reasons.

Thin on purpose: decisions come from :func:`trainyard.scheduler.plan.plan`, a
pure function; this applies them through the store (compare-and-set) and the
engine. It runs on a submission, a finished attempt or a cancel (``wake``),
and at least once a second to notice lost launchers and retries whose backoff
has passed. A job's end wakes it only when some job was left waiting (``freed``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Protocol

from trainyard.auth.tokens import new_attempt_token
from trainyard.engines.base import Engine, Launch, Observation
from trainyard.launch.config import LaunchConfig
from trainyard.launch.reporter import HEARTBEAT
from trainyard.scheduler import adapter
from trainyard.scheduler.model import Queue, Reservation
from trainyard.scheduler.plan import Options, plan
from trainyard.scheduler.stats import CycleStats
from trainyard.spec.records import AttemptInfo, JobInfo, NodeInfo
from trainyard.spec.job import JobSpec
from trainyard.status import AttemptStatus, JobStatus, Reason
from trainyard.store import Admission, Store, Waiting

log = logging.getLogger("trainyard.scheduler")
START_DEADLINE = 300.0  # ServerSettings.start_deadline's default: a starting replica's longest silence
ConfigFor = Callable[[JobInfo, AttemptInfo, str], list[LaunchConfig]]  # job, attempt, its launchers' token
Live = list[tuple[JobInfo, AttemptInfo]]


class Attempts(Protocol):
    """What the loop needs of :class:`trainyard.services.attempts.AttemptService`, which sits above the
    scheduler and is handed in: recording what the engine saw, and failing an attempt that never started."""

    def observe(self, observations: list[Observation], attempts: dict[str, AttemptInfo]) -> list[AttemptInfo]: ...

    def fail(self, attempt: AttemptInfo, reason: str, message: str) -> None: ...


class SchedulerLoop:
    def __init__(
        self, store: Store, engine: Engine, attempts: Attempts, config_for: ConfigFor,
        live: Callable[[list[AttemptInfo]], Live], nodes: Callable[[Live], list[NodeInfo]], queues: Callable[[], list[Queue]],
        *, reconcile_every: float = 1.0, options: Options | None = None, start_deadline: float = START_DEADLINE,
    ) -> None:
        self.store = store
        self.engine = engine
        self.attempts = attempts
        self.config_for = config_for
        self.live = live
        self.nodes = nodes
        self.queues = queues
        self.options = options or Options()
        self.reconcile_every = reconcile_every
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._signalled: set[str] = set()  # attempts already told to stop by this process
        self._last_reconcile = 0.0
        # a launcher reports at least every HEARTBEAT seconds; one silent for this long is hung or cut off
        self.silent_for = max(60.0, 10 * HEARTBEAT)
        # one setting up reports every launch.setup_beat.SETUP_BEAT seconds; one that never reached the server (a
        # wrong address, a cut network, dead before its first report) would stay starting until it gave up, 1 h on
        self.start_deadline = start_deadline
        self.since = time.time()  # launchers could not reach a server that was down: silence counts from here
        # (attempt id, replica) -> when the engine last said it had not placed it: no launcher ran before then
        self._unplaced: dict[tuple[str, int], float] = {}
        self._said: dict[str, str] = {}  # job id -> the starting reason this loop last wrote for it
        # (attempt id, replica) -> why, for replicas killed for their silence that the engine has yet to see gone
        self._killing: dict[tuple[str, int], str] = {}
        self._next_due: float | None = None
        # True only between a cycle that finished leaving no job waiting and the next cycle's start;
        # read and written under the lock, so freed() never needs a thought about thread order
        self._quiet = False
        self._quiet_lock = threading.Lock()
        self._specs: dict[str, tuple[JobSpec, str | None]] = {}  # pending job id -> (spec, snapshot)
        # pending job id -> its last reservation, whose nodes it keeps while they can take it
        # (trainyard.scheduler.backfill); a new leader starts without, and its holds are chosen afresh
        self._held: dict[str, Reservation] = {}
        self.stats = CycleStats()  # for /metrics

    def wake(self) -> None:
        self._wake.set()

    def freed(self) -> None:
        """A job ended (its attempt too, not retried): plan again unless the last cycle finished with
        no job waiting and none has started since.

        With none waiting the cycle would find nothing to do, and it took the GIL from the long polls
        that answer the end: the SDK's wait() returned ~1-2 ms later. A cycle under way may have read
        the line before the end was written, so it is woken again; a job submitted since wakes the
        loop itself (``wake``), and that cycle reads the line after this end was committed."""
        with self._quiet_lock:
            quiet = self._quiet
        if not quiet:
            self._wake.set()

    def start(self) -> None:
        self._stop.clear()  # a server that regains the lease starts its loop again
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
        with self._quiet_lock:  # before anything is read (see freed)
            self._quiet = False
        now = time.time()
        began = time.perf_counter()
        if now - self._last_reconcile >= self.reconcile_every:
            self._last_reconcile = now
            self.reconcile()
        left_waiting = self.admit(now)
        self.stats.cycle(time.perf_counter() - began)
        with self._quiet_lock:  # a cycle that raised stays not quiet: every end wakes the next one
            self._quiet = not left_waiting

    def reconcile(self) -> None:
        active = self.store.active_attempts()
        by_id = {a.id: a for a in active}
        self._signalled &= by_id.keys()  # forget attempts that have ended
        for a in active:
            if a.stop_reason:
                self.stop_attempt(a)
        observed = self._as_killed(self.engine.reconcile(active), by_id)
        now = time.time()
        self._placing(observed, by_id, now)
        for a in self.attempts.observe(observed + self._silenced(observed, by_id, now), by_id):
            # launched again after a restart: the first token's plaintext is gone, so a new one replaces it
            token = new_attempt_token()
            self.store.set_token_hash(a.id, token.hash)
            self._launch(self.store.get_job(a.job_id), a, token.secret)

    def _placing(self, observed: list[Observation], by_id: dict[str, AttemptInfo], now: float) -> None:
        """Replicas the engine has not placed yet (Ray: another user holds the node): their start deadline
        counts from their placement, not their launch, and their job says why it has not started, as the
        engine puts it; once placed (or ended), it says so no more."""
        self._unplaced = {k: at for k, at in self._unplaced.items() if k[0] in by_id}
        said: dict[str, str] = {}
        for o in observed:
            if o.state == "placing":
                self._unplaced[(o.attempt_id, o.replica)] = now
                if o.detail:
                    said.setdefault(by_id[o.attempt_id].job_id, o.detail)
        changed: dict[str, str | None] = {job_id: why for job_id, why in said.items() if self._said.get(job_id) != why}
        changed.update((job_id, None) for job_id in self._said.keys() - said.keys())
        if changed:
            self.store.set_starting_reasons(changed)
        self._said = said

    def _silenced(self, observed: list[Observation], by_id: dict[str, AttemptInfo], now: float) -> list[Observation]:
        """Replicas the engine sees alive whose launchers have not reported for too long: ``silent_for``
        seconds once running (a launcher that hangs, or is cut off, would never end them, not even at their
        timeout), ``start_deadline`` seconds while starting, counted from the launch (or the placement, where
        the engine had to wait for room) and from each report a launcher sends while it sets up (so a long
        image pull or env build that reports is left alone). Killed, and lost once nothing of them runs.
        Silence while this server was down is not theirs."""
        if now - self.since < min(self.silent_for, self.start_deadline):
            return []
        out = []
        for o in observed:
            if o.state != "alive":
                continue
            a = by_id[o.attempt_id]
            r = next(x for x in a.replicas if x.index == o.replica)
            running = r.status == AttemptStatus.RUNNING
            if not running and r.status != AttemptStatus.STARTING:
                continue
            last = r.last_contact_at or now
            started = 0.0 if running else self._unplaced.get((o.attempt_id, o.replica), 0.0)
            if now - max(last, self.since, started) < (self.silent_for if running else self.start_deadline):
                continue
            why = _silence(running, last > a.created_at, now - max(last, started))
            if self.engine.kill(a, o.replica):
                out.append(Observation(o.attempt_id, o.replica, "lost", detail=why))
            else:  # being killed (Ray's kill is a cancel): its end, when the engine sees it, is this
                self._killing.setdefault((o.attempt_id, o.replica), why)
        return out

    def _as_killed(self, observed: list[Observation], by_id: dict[str, AttemptInfo]) -> list[Observation]:
        """The end of a replica this loop killed for its silence reads lost, with why: an engine that can
        only cancel (Ray) sees it end Cancelled, which no retry policy retries, and nobody asked for it."""
        if not self._killing:
            return observed
        self._killing = {k: why for k, why in self._killing.items() if k[0] in by_id}
        out = []
        for o in observed:
            why = self._killing.get((o.attempt_id, o.replica))
            if why is not None and o.state in ("exited", "lost") and not by_id[o.attempt_id].stop_reason and (
                    o.result is None or o.result.kind in (Reason.CANCELLED, Reason.LOST)):
                o = Observation(o.attempt_id, o.replica, "lost", detail=why)
            out.append(o)
        return out

    def stop_attempt(self, attempt: AttemptInfo) -> None:
        """Tell the engine to stop every replica of ``attempt`` (once per attempt from this process)."""
        if attempt.id not in self._signalled:
            self._signalled.add(attempt.id)
            self.engine.cancel(attempt)

    def admit(self, now: float) -> bool:
        """One cycle's admissions; whether it left a job waiting."""
        pending, active = self.store.line()
        if not pending:  # most wake-ups after an attempt ends: no need to look at the cluster
            self._next_due = None
            self._held = {}
            self.stats.planned({})
            return False
        specs = self._specs_of(pending)
        live = self.live(active)
        nodes, waiting, running, queues = adapter.inputs([(w, specs[w.id][0]) for w in pending], live,
                                                         self.nodes(live), self.queues())
        if self._held:
            self._held = {w.id: self._held[w.id] for w in waiting if w.id in self._held}  # forget the rest
            for w in waiting:
                w.held = self._held.get(w.id)
        decided = plan(nodes, waiting, running, queues, now, self.options)
        self._held.update((r.job_id, r) for r in decided.reservations)
        self.stats.planned(decided.entries)
        jobs = {w.id: w for w in pending}
        # its hash is stored with the attempt: no report can come before it
        tokens = {job_id: new_attempt_token() for job_id in decided.admissions}
        # one transaction for the cycle's admissions and one for their handles: a burst of small jobs
        # took two writer turns each, and waited for the launchers' reports between them
        admitted = self.store.admit_many([
            Admission(job_id, [(p.node, list(p.gpu_ids)) for p in places], job_id in decided.borrowed,
                      tokens[job_id].hash, jobs[job_id].queue, jobs[job_id].created_at)
            for job_id, places in decided.admissions.items()])
        self.store.set_handles(self._start_all([(_admitted(jobs[job_id], *specs[job_id], now), attempt,
                                                  tokens[job_id].secret)
                                                 for job_id, attempt in zip(decided.admissions, admitted)
                                                 if attempt is not None]))
        attempts = {a.id: a for _, a in live}
        for p in decided.preemptions:
            if self.store.preempt(p.attempt_id, p.by):
                log.info("preempting %s for %s: %s", p.attempt_id, p.by, p.reason)
                self.stop_attempt(attempts[p.attempt_id])
        self.store.set_reasons(decided.reasons, decided.positions)
        due = [w.not_before for w in pending if w.not_before and w.not_before > now]
        self._next_due = min(due) if due else None
        return any(attempt is None for attempt in admitted) or len(admitted) < len(pending)

    def remember(self, job: JobInfo) -> None:
        """A job just submitted: its spec need not be read back when it is planned."""
        self._specs[job.id] = (job.spec, job.snapshot)

    def _specs_of(self, pending: list[Waiting]) -> dict[str, tuple[JobSpec, str | None]]:
        """Spec and snapshot of each pending job, read once per job: a long line costs one query per cycle."""
        missing = [w.id for w in pending if w.id not in self._specs]
        if missing:
            self._specs.update(self.store.specs(missing))
        if len(self._specs) > 2 * len(pending) + 1000:  # forget jobs that left the line
            self._specs = {w.id: self._specs[w.id] for w in pending}
        return self._specs

    def _launch(self, job: JobInfo, attempt: AttemptInfo, token: str) -> None:
        self.store.set_handles(self._start_all([(job, attempt, token)]))

    def _start_all(self, admitted: list[tuple[JobInfo, AttemptInfo, str]]) -> dict[str, dict]:
        """The engine's handle of each attempt it launched, by attempt id; an attempt whose launch
        failed is ended with why. Handed to the engine together (``launch_many``): the local engine
        starts a cycle's launchers in one round trip to its zygote."""
        launches: list[Launch] = []
        for job, attempt, token in admitted:
            try:
                launches.append(Launch(attempt, job.spec, self.config_for(job, attempt, token)))
            except Exception as e:
                self._failed(attempt, e)
        handles: dict[str, dict] = {}
        for launch, found in zip(launches, self.engine.launch_many(launches)):
            if isinstance(found, Exception):
                self._failed(launch.attempt, found)
            else:
                handles[launch.attempt.id] = found
        return handles

    def _failed(self, attempt: AttemptInfo, e: Exception) -> None:
        """A launch that cannot start ends the attempt, with why."""
        log.error("launch of %s failed", attempt.id, exc_info=e)
        self.attempts.fail(attempt, Reason.SETUP, f"launch failed: {e}")


def _admitted(w: Waiting, spec: JobSpec, snapshot: str | None, now: float) -> JobInfo:
    """The job just admitted, as the engine and launch configs need it, without reading it back."""
    return JobInfo.model_construct(id=w.id, name=spec.name, status=JobStatus.STARTING, queue=w.queue,
                                   priority=w.priority, spec=spec, snapshot=snapshot, created_at=w.created_at,
                                   updated_at=now, not_before=None, reason=None, position=None, owner=w.owner,
                                   attempts=[])


def _silence(running: bool, reported: bool, quiet: float) -> str:
    """Why a silent replica was ended, for people."""
    if running or reported:
        return f"its launcher sent no report for {quiet:.0f}s{'' if running else ' while setting up'} and was killed"
    return (f"its launcher never reached the server in the {quiet:.0f}s since its launch (the server's address "
            "unreachable from its node, or a launcher that died before its first report) and was killed")
