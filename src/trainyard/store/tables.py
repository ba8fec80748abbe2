"""SQLAlchemy tables. The schema itself is owned by the Alembic migrations;
these declarations must match them (a test compares the two)."""

from __future__ import annotations

from sqlalchemy import (JSON, BigInteger, Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint,
                        false, text)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Job(Base):
    __tablename__ = "jobs"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, unique=True)  # submit order, also the listing cursor
    name: Mapped[str] = mapped_column(String(63))
    status: Mapped[str] = mapped_column(String(16))
    queue: Mapped[str] = mapped_column(String(63))
    priority: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict] = mapped_column(JSON)
    snapshot: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    not_before: Mapped[float | None] = mapped_column(Float)
    reason: Mapped[str | None] = mapped_column(Text)
    position: Mapped[int | None] = mapped_column(Integer)  # jobs ahead in its queue, while pending
    owner: Mapped[str | None] = mapped_column(String(63))  # None: the server's own identity
    team: Mapped[str | None] = mapped_column(String(63))
    status_by: Mapped[str | None] = mapped_column(String(32))  # who made the last status change (see Event)
    # pending and waiting for its spec's ``after`` jobs to end: not in the scheduler's line (migration 0018)
    blocked: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # how many times its labels were changed since submit (``trainyard label``): a remembered spec of an older
    # count is read again (trainyard.store.cache; migration 0024)
    labels_rev: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # (column, seq): a listing filtered or sorted by that column is one index scan (migration 0008)
    __table_args__ = (Index("ix_jobs_status_queue", "status", "queue", "created_at"),
                      *(Index(f"ix_jobs_{c}_seq", c, "seq") for c in ("name", "status", "queue", "team", "owner")),
                      Index("ix_jobs_created_at", "created_at"), Index("ix_jobs_blocked", "status", sqlite_where=text("blocked = 1"),
                            postgresql_where=text("blocked")),
                      Index("ix_jobs_snapshot", "snapshot"))  # the jobs of a snapshot: who may use it (0025)


class SnapshotOwner(Base):
    """A user who uploaded a code snapshot (migration 0025): with the jobs that ran it, who may use it."""

    __tablename__ = "snapshot_owners"
    digest: Mapped[str] = mapped_column(String(100), primary_key=True)
    user: Mapped[str] = mapped_column(String(63), primary_key=True)
    created_at: Mapped[float] = mapped_column(Float)



class JobLabel(Base):
    """A job's label (its spec's ``labels``), one row each, for filters that would otherwise read every spec
    (migration 0022). Written with the job, rewritten with the spec's labels when they change, deleted with it."""

    __tablename__ = "job_labels"
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), primary_key=True)
    key: Mapped[str] = mapped_column(String(317), primary_key=True)  # a 253-character prefix, "/", a name
    value: Mapped[str] = mapped_column(String(63))
    __table_args__ = (Index("ix_job_labels_key_value", "key", "value"),)

class Queue(Base):
    """A queue created through the API or loaded from the server's queue file."""

    __tablename__ = "queues"
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    team: Mapped[str] = mapped_column(String(63))
    priority: Mapped[int] = mapped_column(Integer)
    cpu: Mapped[float | None] = mapped_column(Float)
    memory: Mapped[int | None] = mapped_column(BigInteger)
    gpus: Mapped[dict | None] = mapped_column(JSON)
    max_running: Mapped[int | None] = mapped_column(Integer)
    borrowing: Mapped[bool] = mapped_column(Boolean)
    source: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    idle_gpu_action: Mapped[str | None] = mapped_column(String(8))  # flag (None) or cancel
    max_priority: Mapped[int | None] = mapped_column(Integer)  # a non-admin's jobs' ceiling; None: normal


class Attempt(Base):
    __tablename__ = "attempts"
    id: Mapped[str] = mapped_column(String(48), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), index=True)
    node: Mapped[str | None] = mapped_column(String(255))
    gpus: Mapped[list] = mapped_column(JSON, default=list)
    handle: Mapped[dict] = mapped_column(JSON, default=dict)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)
    last_contact_at: Mapped[float | None] = mapped_column(Float)
    stop_reason: Mapped[str | None] = mapped_column(String(255))  # set once the attempt must stop, and why
    preempted_by: Mapped[str | None] = mapped_column(String(40))  # the job this attempt made room for
    borrowed: Mapped[bool | None] = mapped_column(Boolean)  # admitted beyond its queue's quota
    # sha256 hex of the attempt's launcher credential (see services.credentials); never the token itself
    token_hash: Mapped[str | None] = mapped_column(String(64))
    queue: Mapped[str | None] = mapped_column(String(63))  # the job's, so /metrics groups attempts without a join
    wait: Mapped[float | None] = mapped_column(Float)  # seconds from submission to admission; first attempts only
    __table_args__ = (UniqueConstraint("job_id", "number", name="uq_attempts_job_number"),
                      Index("ix_attempts_queue_wait", "queue", "wait"),
                      Index("ix_attempts_queue_outcome", "queue", "reason", "status", "preempted_by"),
                      Index("ix_attempts_ended_at", "ended_at"))  # the retention sweeps (migration 0017)


class Replica(Base):
    """One process group of an attempt (replica 0 is the master); one launcher each."""

    __tablename__ = "replicas"
    attempt_id: Mapped[str] = mapped_column(ForeignKey("attempts.id"), primary_key=True)
    index: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    node: Mapped[str] = mapped_column(String(255))
    gpus: Mapped[list] = mapped_column(JSON, default=list)
    status: Mapped[str] = mapped_column(String(16))
    exit_code: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[float | None] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)
    last_contact_at: Mapped[float | None] = mapped_column(Float)
    log_size: Mapped[int] = mapped_column(BigInteger, default=0)      # bytes of output.log received
    metrics_offset: Mapped[int] = mapped_column(BigInteger, default=0)  # bytes of metrics.jsonl received


class LogChunk(Base):
    __tablename__ = "log_chunks"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(40))
    attempt_id: Mapped[str] = mapped_column(String(48))
    attempt: Mapped[int] = mapped_column(Integer)
    replica: Mapped[int] = mapped_column(Integer)
    offset: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[str] = mapped_column(Text)
    # followers read a log by id (after=cursor): an id never given twice, on SQLite too (migration 0028)
    __table_args__ = (Index("ix_log_chunks_job_id_id", "job_id", "id"), {"sqlite_autoincrement": True})


class Metric(Base):
    __tablename__ = "metrics"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(40))
    attempt: Mapped[int] = mapped_column(Integer)
    replica: Mapped[int] = mapped_column(Integer)
    step: Mapped[int | None] = mapped_column(BigInteger)  # a step may count tokens: past 2^31
    name: Mapped[str] = mapped_column(String(255))
    value: Mapped[float] = mapped_column(Float)
    ts: Mapped[float] = mapped_column(Float)
    seq: Mapped[int | None] = mapped_column(BigInteger)  # the point's number in its series (None: stored before 0011)
    # a job's points (its prefix), and one series' points by number (what thinning deletes)
    __table_args__ = (Index("ix_metrics_series", "job_id", "attempt", "replica", "name", "seq"),)


class MetricSeries(Base):
    """How many points of one metric of one replica came, and which are stored (see store.metric_series)."""

    __tablename__ = "metric_series"
    attempt_id: Mapped[str] = mapped_column(String(48), primary_key=True)
    replica: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    received: Mapped[int] = mapped_column(BigInteger)
    stride: Mapped[int] = mapped_column(BigInteger)


class Artifact(Base):
    __tablename__ = "artifacts"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(40), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger)
    digest: Mapped[str] = mapped_column(String(80))
    url: Mapped[str] = mapped_column(Text)


class PipelineRun(Base):
    """One run of a pipeline file with its params; its steps are rows of ``pipeline_steps``."""

    __tablename__ = "pipeline_runs"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, unique=True)  # creation order, also the listing cursor
    name: Mapped[str] = mapped_column(String(63), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    spec: Mapped[dict] = mapped_column(JSON)       # the pipeline as submitted
    params: Mapped[dict] = mapped_column(JSON)     # in effect, overrides applied
    workdirs: Mapped[dict] = mapped_column(JSON)   # workdir as written -> code snapshot digest
    source: Mapped[str | None] = mapped_column(Text)
    warnings: Mapped[list] = mapped_column(JSON, default=list)
    retries: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)
    status_by: Mapped[str | None] = mapped_column(String(32))
    owner: Mapped[str | None] = mapped_column(String(63), index=True)
    team: Mapped[str | None] = mapped_column(String(63), index=True)


class PipelineStep(Base):
    """One step instance of a run (a foreach step has one per item); runs as one job at a time."""

    __tablename__ = "pipeline_steps"
    run_id: Mapped[str] = mapped_column(ForeignKey("pipeline_runs.id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(127), primary_key=True)
    step: Mapped[str] = mapped_column(String(127))
    position: Mapped[int] = mapped_column(Integer)  # needs come first
    index: Mapped[int | None] = mapped_column(Integer)
    item: Mapped[dict | None] = mapped_column(JSON)  # {"value": item} of a foreach step
    status: Mapped[str] = mapped_column(String(16), index=True)
    job: Mapped[dict] = mapped_column(JSON)        # job spec fields, inputs filled in at submit time
    needs: Mapped[list] = mapped_column(JSON)
    inputs: Mapped[dict] = mapped_column(JSON)
    outputs: Mapped[list] = mapped_column(JSON)
    cache: Mapped[bool] = mapped_column(Boolean)
    workdir: Mapped[str] = mapped_column(String(255))
    job_id: Mapped[str | None] = mapped_column(String(40), index=True)
    jobs: Mapped[list] = mapped_column(JSON, default=list)  # earlier jobs of this step (before a retry)
    cache_key: Mapped[str | None] = mapped_column(String(80), index=True)
    cached_from: Mapped[str | None] = mapped_column(String(40))  # the job whose outputs a cached step reuses
    artifacts: Mapped[dict] = mapped_column(JSON, default=dict)  # output name -> artifact id
    reason: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[float | None] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)


class PipelineArtifact(Base):
    """A named output of a step, by content hash, with its lineage (job, inputs, code)."""

    __tablename__ = "pipeline_artifacts"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    digest: Mapped[str] = mapped_column(String(80), index=True)
    run_id: Mapped[str] = mapped_column(String(40), index=True)
    step: Mapped[str] = mapped_column(String(127))
    job_id: Mapped[str] = mapped_column(String(40), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    output: Mapped[str] = mapped_column(String(63))
    url: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger)
    files: Mapped[int] = mapped_column(Integer)
    inputs: Mapped[dict] = mapped_column(JSON)  # input name -> {"digest", "artifacts", "url"}
    code: Mapped[str | None] = mapped_column(String(100))  # snapshot digest of the step's workdir
    cache_key: Mapped[str | None] = mapped_column(String(80))
    created_at: Mapped[float] = mapped_column(Float)


class DaskCluster(Base):
    """An on-demand Dask cluster: its scheduler and workers are ordinary jobs named here."""

    __tablename__ = "dask_clusters"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, unique=True)  # creation order, also the listing order
    name: Mapped[str] = mapped_column(String(63), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    queue: Mapped[str] = mapped_column(String(63))
    spec: Mapped[dict] = mapped_column(JSON)           # the ClusterSpec as created
    workers: Mapped[int] = mapped_column(Integer)      # wanted now: fixed, or the adaptive target
    adapt_min: Mapped[int | None] = mapped_column(Integer)
    adapt_max: Mapped[int | None] = mapped_column(Integer)  # set: adaptive within [adapt_min, adapt_max]
    scheduler_job: Mapped[str | None] = mapped_column(String(40))
    worker_jobs: Mapped[list] = mapped_column(JSON, default=list)  # live worker jobs (ended ones are dropped)
    address: Mapped[str | None] = mapped_column(Text)    # tls://HOST:PORT of the Dask scheduler
    dashboard: Mapped[str | None] = mapped_column(Text)  # HOST:PORT of its dashboard, proxied by the server
    tls: Mapped[str | None] = mapped_column(Text)  # its CA and certificates, sealed (services/dask_tls.py)
    owner_job: Mapped[str | None] = mapped_column(String(40), index=True)
    owner: Mapped[str | None] = mapped_column(String(63), index=True)  # who created it; its jobs are theirs
    team: Mapped[str | None] = mapped_column(String(63), index=True)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)


class Sweep(Base):
    """A hyperparameter search: its spec, and the trials it started (``sweep_trials``)."""

    __tablename__ = "sweeps"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, unique=True)  # creation order, also the listing order
    name: Mapped[str] = mapped_column(String(63), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    spec: Mapped[dict] = mapped_column(JSON)  # the SweepSpec as created
    snapshot: Mapped[str | None] = mapped_column(String(80))  # the trial job's code, uploaded once
    owner: Mapped[str | None] = mapped_column(String(63), index=True)  # who created it; its trials are theirs
    team: Mapped[str | None] = mapped_column(String(63), index=True)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)


class SweepTrial(Base):
    __tablename__ = "sweep_trials"
    sweep_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(String(40), index=True)
    params: Mapped[dict] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))
    value: Mapped[float | None] = mapped_column(Float)
    step: Mapped[int | None] = mapped_column(BigInteger)
    reported: Mapped[dict] = mapped_column(JSON, default=dict)  # step -> value the pruner was told
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)


class Event(Base):
    """One status change of a job or pipeline run. Written by database triggers (migration 0007)
    on every change of ``status``, never by Python: no write path can forget one."""

    __tablename__ = "events"
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))  # job or pipeline_run
    object_id: Mapped[str] = mapped_column(String(40))
    ts: Mapped[float] = mapped_column(Float)
    old_status: Mapped[str | None] = mapped_column(String(16))  # None: created
    new_status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(String(32))  # user, scheduler, launcher, system
    # the webhooks read the table by id (event_cursors): an id never given twice, on SQLite too (migration 0028)
    __table_args__ = (Index("ix_events_kind_object_id", "kind", "object_id", "id"), {"sqlite_autoincrement": True})


class ReplicaUsage(Base):
    """What a replica's process tree uses, from the launcher's samples: the latest, the peak, and
    the sums a mean needs; one row per replica, updated as samples arrive."""

    __tablename__ = "replica_usage"
    attempt_id: Mapped[str] = mapped_column(String(48), primary_key=True)
    replica: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    job_id: Mapped[str] = mapped_column(String(40), index=True)
    samples: Mapped[int] = mapped_column(Integer)
    cpu_percent: Mapped[float | None] = mapped_column(Float)  # of one core: 200 is two cores busy
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    gpu_util: Mapped[float | None] = mapped_column(Float)  # percent, mean over the replica's GPUs
    gpu_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    gpu_util_sum: Mapped[float] = mapped_column(Float)
    gpu_samples: Mapped[int] = mapped_column(Integer)
    gpu_low_since: Mapped[float | None] = mapped_column(Float)  # first sample of the current run under the threshold
    idle_flagged_at: Mapped[float | None] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class Service(Base):
    """A service: its replicas are ordinary jobs, listed in ``service_replicas``."""

    __tablename__ = "services"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, unique=True)  # creation order, also the listing order
    name: Mapped[str] = mapped_column(String(63), index=True)  # unique among live services: /serve/NAME
    status: Mapped[str] = mapped_column(String(16), index=True)
    queue: Mapped[str] = mapped_column(String(63))
    spec: Mapped[dict] = mapped_column(JSON)  # the ServiceSpec of the current version
    snapshot: Mapped[str | None] = mapped_column(String(100))
    version: Mapped[int] = mapped_column(Integer)  # bumped by each apply of a changed spec
    wanted: Mapped[int] = mapped_column(Integer)  # replicas wanted now (fixed, or the autoscaler's choice)
    restarts: Mapped[int] = mapped_column(Integer, server_default="0")  # crashed replicas replaced so far
    demand_at: Mapped[float | None] = mapped_column(Float)  # latest request, as any server's proxy wrote it
    owner: Mapped[str | None] = mapped_column(String(63), index=True)
    team: Mapped[str | None] = mapped_column(String(63), index=True)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)


class ServiceReplicaRow(Base):
    """One replica job of a service, and what the server's probes found (one row per job)."""

    __tablename__ = "service_replicas"
    job_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    service_id: Mapped[str] = mapped_column(String(40), index=True)
    version: Mapped[int] = mapped_column(Integer)
    address: Mapped[str | None] = mapped_column(Text)  # HOST:PORT, recorded at launch
    ready: Mapped[bool] = mapped_column(Boolean)
    draining_since: Mapped[float | None] = mapped_column(Float)  # out of traffic, to be stopped
    created_at: Mapped[float] = mapped_column(Float)
    token: Mapped[str | None] = mapped_column(Text)  # its attempt's service token, sealed (services/serving.py)
