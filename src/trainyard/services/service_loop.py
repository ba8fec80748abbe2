"""The leader's service loop: each tick, every live service is brought towards what is wanted.

Phases per service: 1 forget replica jobs that ended (one not asked to end is a
crash: the next start waits a backoff that doubles); 2 stopping (cancel every
replica, ``stopped`` once none runs); 3 autoscale (wanted follows concurrency,
up at once, down only after ``scale_down_after`` below); 4 probe readiness;
5 start replicas of the current version (one at a time while older ones still
serve) and drain the ones no longer wanted (older versions once enough new ones
are ready); 6 stop drained replicas once the proxy (and nginx, in front) has nothing in flight on them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import httpx

from trainyard.errors import Forbidden
from trainyard.services import service_jobs
from trainyard.services.serving import ServingService
from trainyard.services.ticker import Ticker
from trainyard.spec.service import ServiceStatus
from trainyard.status import JobStatus
from trainyard.store.services import IDLE_REASON, ReplicaJob, ReplicaRow, ServiceRow

log = logging.getLogger("trainyard.services")
TICK = 0.25  # seconds between looks at every live service (probes keep their own period)
# a replica launched and not yet ready is probed this often, not at its readiness period, for its first
# STARTING_FOR seconds (Knative probes a starting revision every 25 ms): the requests a cold start holds go on
# as soon as it answers, not up to a period later; the loop ticks this often while one is starting
STARTING_PROBE = 0.05
STARTING_FOR = 120.0
IDLE = 2.0  # seconds between looks when no service is live: an apply wakes the loop, this is for other servers'
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 60.0  # seconds before restarting a crashed replica; doubles per crash in a row
DRAIN_MIN = 1.0  # seconds a drained replica stays up: every server's cached route has dropped it by then
DRAIN_MAX = 30.0  # seconds a drained replica may finish what it has in flight before it is stopped


@dataclass
class Memory:
    """What the loop keeps between ticks for one service (lost on a restart: it only delays)."""

    crashes: int = 0
    next_start: float = 0.0
    below_since: float | None = None
    next_probe: dict[str, float] = field(default_factory=dict)  # replica job -> when to probe it next
    was_ready: set[str] = field(default_factory=set)  # replica jobs that have been ready (no longer starting)
    refused: str | None = None  # why its owner may not have a replica started now (asked again each start)


class ServiceLoop(Ticker):
    name = "trainyard-services"
    log = log

    def __init__(self, service: ServingService, tick: float = TICK, idle: float = IDLE) -> None:
        super().__init__()
        self.service = service
        self.services = service.services
        self.tick = tick
        self.idle = idle
        self._live = False
        self._starting = False  # a replica was starting at the last cycle: tick at STARTING_PROBE
        self._memory: dict[str, Memory] = {}
        # the last tick's read and the database's version then (SQLite's data_version: None on PostgreSQL, read
        # every tick): a tick that finds nothing committed since, by anyone, needs no read
        self._view: tuple[int | None, tuple] = (None, ())
        self._http = httpx.Client(timeout=1.0, trust_env=False)  # probes go to the replica, never a proxy

    def start(self) -> None:
        if self._http.is_closed:  # leading again after a while as a follower
            self._http = httpx.Client(timeout=1.0, trust_env=False)
        super().start()

    def stop(self) -> None:
        super().stop()
        self._http.close()

    def pause(self) -> float:
        if self._starting:
            return min(self.tick, STARTING_PROBE)
        return self.tick if self._live else max(self.tick, self.idle)

    def cycle(self) -> None:
        version = self.service.store.version  # before the read: a commit between the two is read again next tick
        if version is None or version != self._view[0]:
            self._view = (version, self.services.tick_view())
        rows, replicas, jobs = self._view[1]
        self._live = bool(rows)
        self._starting = False
        for gone in set(self._memory) - {r["id"] for r in rows}:
            self._memory.pop(gone, None)
        for row in rows:
            try:
                # one whose job the read did not find is left for the next tick (PostgreSQL reads each statement on
                # its own: a row may come or go between them)
                reps = [r for r in replicas[row["id"]] if r["job_id"] in jobs]
                self.reconcile(row, reps, jobs)
            except Exception:
                log.exception("service %s: reconcile failed", row["id"])

    # -- one service ------------------------------------------------------------------

    def reconcile(self, row: ServiceRow, reps: list[ReplicaRow], jobs: dict[str, ReplicaJob]) -> None:
        """Bring one service towards what is wanted; ``jobs``: the replicas' jobs, by id (every service's)."""
        sid, now = row["id"], time.time()
        mem = self._memory.setdefault(sid, Memory())
        # 1. ended replicas
        for r in [r for r in reps if jobs[r["job_id"]].status.is_terminal()]:
            self.services.drop_replica(r["job_id"])
            mem.next_probe.pop(r["job_id"], None)
            mem.was_ready.discard(r["job_id"])
            self._route_changed(row)
            if r["draining_since"] is None and row["status"] == ServiceStatus.RUNNING:
                mem.crashes += 1
                self.services.crashed(sid)
                mem.next_start = now + min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (mem.crashes - 1))
                job = jobs[r["job_id"]]
                log.warning("service %s: replica %s ended (%s: %s); restarting in %.0fs", sid, job.id,
                            job.status.value, job.reason, mem.next_start - now)
        reps = [r for r in reps if not jobs[r["job_id"]].status.is_terminal()]
        # 2. stopping
        if row["status"] == ServiceStatus.STOPPING:
            self._stop_jobs([jobs[r["job_id"]] for r in reps], f"service {row['name']} was deleted")
            if not reps:
                self.services.move(sid, ServiceStatus.STOPPED, reason="deleted; every replica ended")
            return
        # 3. autoscale
        wanted = self._autoscale(row, mem, reps, now)
        # 4. readiness
        for r in reps:
            self._probe(row, mem, r, jobs[r["job_id"]], now)
        # 5. start and drain
        self._resize(row, mem, reps, wanted, now)
        # 6. stop drained replicas
        for r in reps:
            if r["draining_since"] is not None and jobs[r["job_id"]].status != JobStatus.CANCELLING:
                waited = now - r["draining_since"]
                if waited >= DRAIN_MAX or (waited >= DRAIN_MIN and not self._busy(r)):
                    replaced = r["version"] != row["version"]
                    why = (f"replaced by version {row['version']} of service {row['name']}" if replaced
                           else f"service {row['name']} scaled down")
                    self.service.jobs.stop(r["job_id"], why, by="system")
        self._reason(row, reps, wanted, mem, now)

    def _busy(self, r: ReplicaRow) -> bool:
        """Whether this server's proxy, or the nginx in front of it, has requests under way to the replica."""
        return bool(self.service.outstanding.get(r["job_id"])
                    or (r["address"] and self.service.front_in_flight(r["address"])))

    def _autoscale(self, row: ServiceRow, mem: Memory, reps: list[ReplicaRow], now: float) -> int:
        auto = row["spec"].service.autoscale
        wanted = row["wanted"]
        if auto is None:
            return wanted
        in_flight = self.service.traffic.in_flight(row["name"])
        target = auto.wanted(in_flight)
        demand = row["demand_at"]  # the latest request any server's proxy wrote down
        if demand is not None and now - demand < auto.scale_down_after:
            target = max(target, 1)  # requests arrive (maybe at another server): keep one, or start one
        if target >= wanted:
            mem.below_since = None
            if target > wanted:
                wanted = target
                self.services.set(row["id"], wanted=wanted)
            return wanted
        mem.below_since = mem.below_since or now
        since = mem.below_since
        if target == auto.min:  # going down to min: only once idle, no request for scale_down_after
            since = max(since, self.service.traffic.last_request_at(row["name"]) or 0.0, demand or 0.0)
        if now - since >= auto.scale_down_after:
            wanted = target
            mem.below_since = None
            self.services.set(row["id"], wanted=wanted)
        return wanted

    def _probe(self, row: ServiceRow, mem: Memory, r: ReplicaRow, job: ReplicaJob, now: float) -> None:
        readiness = row["spec"].service.readiness
        ready = r["ready"]
        started = job.started if job.started is not None else now
        starting = (job.status in (JobStatus.STARTING, JobStatus.RUNNING) and not r["ready"]
                    and r["draining_since"] is None and r["job_id"] not in mem.was_ready
                    and started + readiness.initial_delay <= now < started + STARTING_FOR)
        self._starting = self._starting or starting
        if job.status != JobStatus.RUNNING or not r["address"] or r["draining_since"] is not None:
            ready = False
        else:
            if now < started + readiness.initial_delay or now < mem.next_probe.get(r["job_id"], 0.0):
                return
            mem.next_probe[r["job_id"]] = now + (min(readiness.period, STARTING_PROBE) if starting
                                                 else readiness.period)
            try:
                # with the replica's token: a replica that refuses requests without it answers its probe too
                resp = self._http.get(f"http://{r['address']}{readiness.path}", timeout=readiness.timeout,
                                      headers=self.service.tokens.headers(r.get("token")))
                ready = 200 <= resp.status_code < 300
            except httpx.HTTPError:
                ready = False
        if ready:
            mem.was_ready.add(r["job_id"])
        if ready != r["ready"]:
            self.services.set_replica(r["job_id"], ready=ready)
            r["ready"] = ready
            self._route_changed(row)
            if ready:
                mem.crashes = 0

    def _resize(self, row: ServiceRow, mem: Memory, reps: list[ReplicaRow], wanted: int, now: float) -> None:
        live = [r for r in reps if r["draining_since"] is None]
        current = [r for r in live if r["version"] == row["version"]]
        old = [r for r in live if r["version"] != row["version"]]
        ready_current = [r for r in current if r["ready"]]
        missing = wanted - len(current)
        if old and any(not r["ready"] for r in current):
            missing = 0  # a rollout goes replica by replica: the next one once this one is ready
        elif old:
            missing = min(missing, 1)
        if missing > 0 and now >= mem.next_start:
            spec, refused = row["spec"], None
            for _ in range(missing):
                try:
                    job = self.service.jobs.submit(service_jobs.replica_job(row["id"], spec, row["version"]),
                                                   row["snapshot"], on_behalf=(row["owner"], row["team"]))
                except Forbidden as e:  # its owner was disabled or lost the right: those running are left be
                    refused = e.message
                    break
                self.services.add_replica(row["id"], job.id, row["version"])
            if refused != mem.refused and refused is not None:
                log.warning("service %s: no replica started: %s", row["id"], refused)
            mem.refused = refused
        elif missing <= 0:
            mem.refused = None
        # older versions leave once enough of the current one is ready; not-ready ones first
        keep_old = max(0, wanted - len(ready_current))
        for r in sorted(old, key=lambda r: (r["ready"], r["created_at"]))[:max(0, len(old) - keep_old)]:
            self._drain(row, r, now)
        # fewer wanted: those not ready first, then the newest
        extra = len(current) - wanted
        for r in sorted(current, key=lambda r: (r["ready"], -r["created_at"]))[:max(0, extra)]:
            self._drain(row, r, now)

    def _drain(self, row: ServiceRow, r: ReplicaRow, now: float) -> None:
        self.services.set_replica(r["job_id"], draining_since=now, ready=False)
        r["draining_since"], r["ready"] = now, False
        self._route_changed(row)

    def _route_changed(self, row: ServiceRow) -> None:
        self.service.forget_route(row["name"])

    def _stop_jobs(self, jobs: list[ReplicaJob], why: str) -> None:
        for j in jobs:
            if not j.status.is_terminal() and j.status != JobStatus.CANCELLING:
                self.service.jobs.stop(j.id, why)

    def _reason(self, row: ServiceRow, reps: list[ReplicaRow], wanted: int, mem: Memory, now: float) -> None:
        ready = sum(r["ready"] and r["draining_since"] is None for r in reps)
        text = f"{ready} of {wanted} replicas ready" if wanted or reps else IDLE_REASON
        if any(r["version"] != row["version"] and r["draining_since"] is None for r in reps):
            text += f"; rolling out version {row['version']}"
        if mem.refused:
            text += f"; no replica is started: {mem.refused} (those running go on; delete it to stop them)"
        if mem.crashes and now < mem.next_start:
            text += f"; a replica crashed ({mem.crashes} in a row), restarting in {mem.next_start - now:.0f}s"
        if text != row["reason"]:
            self.services.set(row["id"], reason=text)
