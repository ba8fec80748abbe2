"""Settings: where things live (home, database, artifacts, server), and every environment variable
trainyard itself reads. The variables' names are in :mod:`trainyard.envvars`; code that runs inside
jobs (the launcher, :mod:`trainyard.sdk.injob`) reads the job's variables there, without this module.

Timing, in one table. Each value lives next to the code it paces, and is listed here with why
(``tests/unit/test_settings.py`` checks that the named constants still have these values):

=================================================  =========  =================================================
where                                              seconds    what it paces, and why that value
=================================================  =========  =================================================
``SchedulerLoop(reconcile_every=…)``               1.0        scheduler cycles without a wake-up: notices lost
                                                              launchers and passed retry backoffs
``trainyard.store.lease.LEASE_PERIOD``             1.0        a follower's tries for the leader lease, and the
                                                              leader's checks that it still holds it
``trainyard.services.notify.FOLLOWER_POLL``        1.0        a follower's long polls re-read the database (the
                                                              leader's notifications do not reach it); the
                                                              leader's end watch and pipeline run waits too
``PipelineService(sweep_every=…)``                 5.0        the pipeline runner's sweep for what a restart missed
``wait`` routes, ``timeout`` query                 30 (≤300)  long polls of jobs and pipeline runs; the SDK asks
                                                              in chunks of 60 and retries
``Client(timeout=…)``                              30.0       one SDK request
``trainyard.launch.reporter.TICK``                 0.15       launcher: new log bytes and metric lines
``trainyard.launch.reporter.HEARTBEAT``            3.0        launcher: a report at least this often
``trainyard.launch.setup_beat.SETUP_BEAT``        10.0       launcher: a report this often while it sets up (an
                                                              image pull, an env build), none before the first
``ServerSettings.start_deadline``                  300        a starting replica silent this long since its launch
                                                              or its last report is killed and LostContact: its
                                                              launcher cannot reach the server, or died early
``trainyard.launch.reporter.FIRST_DELAY``          0.1        launcher: a short command's logs come with its first report
``trainyard.launch.reporter.BACKOFF_MIN``          0.1        launcher: retry after a failed report, doubling ...
``trainyard.launch.reporter.BACKOFF_MAX``          2.0        ... up to this: the server's restart is noticed fast
``trainyard.launch.reporter.REQUEST_TIMEOUT``      30.0       launcher: one report
``trainyard.launch.launcher.MEMORY_TICK``          0.1        launcher: memory sampling near the limit ...
``trainyard.launch.launcher.CALM_TICK``            0.5        ... and under half of it (walking the tree costs CPU)
``trainyard.launch.launcher.IDLE_TICK``            1.0        launcher: reaping orphans when there is no limit
``trainyard.launch.group.KILL_AFTER``              5.0        a process group's grace after SIGTERM
``ServerSettings.sample_every``                    5.0        launcher: a resource sample (CPU, memory, GPUs) of
                                                              the job's tree; cheap enough to leave on
``trainyard.launch.sampling.FIRST_AFTER``          1.0        ... the first one after the start, off its path
``ServerSettings.idle_gpu_period``                 1800       GPUs under ``idle_gpu_threshold`` this long: flagged
``trainyard.launch.cgroup.STALE_AFTER``            60.0       an empty cgroup this old lost its launcher
``ServerSettings.retention.every``                 600        the leader's sweep for ended attempts' folders,
                                                              ended jobs' checkpoints and ended jobs past retention
``trainyard.engines.ray.engine.NODES_TTL``         0.5        a ``ray.nodes()`` answer is reused (asked every cycle)
``trainyard.engines.ray.reconcile.ORPHAN_SWEEP_EVERY`` 10.0   looks for placement groups no live attempt owns
``trainyard.engines.ray.reconcile.CANCEL_SLACK``   15.0       past a cancel's grace period, actors still running die
``trainyard.engines.ray.placing.SAY_AFTER``        10.0       a placement group Ray has not placed this long: its
                                                              job's reason says why (Ray places in ms when it can)
=================================================  =========  =================================================

The launcher's values stay in the launcher: it must start fast and import nothing of the server side.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from trainyard import envvars
from trainyard.config_sections import Prices, RetentionSettings, SchedulerSettings, WebhookSettings  # noqa: F401
from trainyard.locations import ADDRESS_FILE, client_token, home, server_url  # noqa: F401  (re-exported)


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite database (a URL, or a bare path as ``--db`` takes it), where servers of
    several homes sharing it meet; None for PostgreSQL and for a database in memory."""
    if "://" not in url:
        return Path(os.path.abspath(os.path.expanduser(url)))
    from sqlalchemy.engine import make_url  # asked by the server's side only: no client pays the import

    parsed = make_url(url)
    name = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or name in ("", ":memory:") or parsed.query.get("mode") == "memory":
        return None
    return Path(os.path.abspath(name.removeprefix("file:")))  # file:…: a URI filename (?uri=true)


def take_server_token() -> str | None:
    """``$TRAINYARD_SERVER_TOKEN``, removed from the environment as it is read, so nothing the
    server starts (launchers, jobs) inherits it."""
    return os.environ.pop(envvars.SERVER_TOKEN, None) or None


def serve_lane() -> bool:
    """Whether small ``/serve/`` requests take the short way (api/serve_lane.py): unless ``$TRAINYARD_SERVE_LANE``
    is off."""
    return os.environ.get(envvars.SERVE_LANE, "on").strip().lower() not in ("off", "0", "false", "no")


def ray_address() -> str | None:
    """``$RAY_ADDRESS``, Ray's own variable: the cluster when the settings name none."""
    return os.environ.get(envvars.RAY_ADDRESS) or None


def snapshot_limits() -> tuple[str, str]:
    """``($TRAINYARD_SNAPSHOT_WARN, $TRAINYARD_SNAPSHOT_MAX)``: the size over which a code snapshot
    lists its largest files, and the size over which it is refused (quantities such as ``50Mi``)."""
    return os.environ.get(envvars.SNAPSHOT_WARN) or "50Mi", os.environ.get(envvars.SNAPSHOT_MAX) or "512Mi"


OUTPUTS_MAX = 100 << 30  # bytes of one replica's outputs: a name or a sparse file costs a job nothing, a copy does
# processes and threads one replica's tree may hold: room for data loader workers and their threads, while a fork
# bomb stops far short of the node's pid_max (at most PID_MAX_LIMIT on 64-bit Linux, the most pids.max takes)
PIDS_MAX = 4096
PID_MAX_LIMIT = 1 << 22
LOG_KEEP = 64 << 20  # bytes of a replica's log the server keeps: a job that prints without end cannot fill its database
METRICS_KEEP = 4000  # points of each metric of a replica the server keeps, evenly spaced, and the newest


# a declared node's bounds: the spec's own for cpus and memory (config sits below spec: kept equal by
# tests/unit/test_server_flags.py); each GPU is an id in every node listing and CUDA_VISIBLE_DEVICES, and no
# machine holds more than a few dozen
MAX_CPUS = 1_000_000
MAX_MEMORY = 2**60
MAX_GPUS = 1024
# where a Ray node declares what --cpus, --memory, --gpus and --gpu-type would (README, "Ray engine")
RAY_DECLARES = {"cpus": "ray start --num-cpus N", "memory": "ray start --memory BYTES",
                "gpus": "ray start --num-gpus N", "gpu_type": "ray start --resources '{\"gpu_type:A100\": N}'"}
# the spec's rule for a GPU type (a Kubernetes label value): one no job can name would never be scheduled
GPU_TYPE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")


class ServerSettings(BaseModel):
    model_config = {"allow_inf_nan": False}  # a NaN passes every bound: `nan < 0` and `nan > 100` are both false
    _leader: tuple[tuple, Path] | None = PrivateAttr(None)  # leader_file, with what it was made from
    home: Path = Field(default_factory=home)
    db: str | None = Field(None, description="database URL; default SQLite in the home folder")
    artifacts: str | None = Field(None, description="fsspec URL; default file:// in the home folder")
    s3_endpoint_url: str | None = Field(None, description="S3-compatible endpoint (MinIO, Ceph) for s3:// artifacts; "
                                        "credentials come from the standard AWS variables and config")
    host: str = "127.0.0.1"
    port: int = 0  # 0: the port used last time if free, else any free port
    engine: Literal["local", "ray"] = "local"
    container_runtime: Literal["auto", "podman", "docker", "none"] = Field(
        "auto", description="what runs `image:` jobs on the local engine; none: host execution only")
    ray_address: str | None = Field(None, description="the Ray cluster (engine ray): host:port of its head, or ray://…")
    ray_namespace: str = "trainyard"
    cpus: float | None = None
    memory: int | None = None
    gpus: int | None = None
    gpu_type: str | None = None
    token: str | None = Field(None, description="bearer token clients must send (kept only as its hash)",
                              exclude=True, repr=False)
    token_sha256: str | None = Field(None, description="SHA-256 of the token clients must send; "
                                     "`trainyard server` uses the home's own token when none is given")
    auth: bool = Field(False, description="users, teams and their API tokens (trainyard server --auth); without it "
                       "only the server's own token gets in")
    tls_cert: Path | None = Field(None, description="serve HTTPS with this certificate (PEM)")
    tls_key: Path | None = Field(None, description="… and this private key (PEM)")
    forwarded_allow_ips: str | None = Field(None, description="proxies whose X-Forwarded-For/-Proto are trusted "
                                            "(comma-separated addresses, or *); none: no proxy header is read")
    front: Literal["none", "nginx"] = Field("none", description="nginx: nginx takes the port and sends small "
                                            "/serve/ requests straight to ready replicas, the rest to this server")
    queues_file: Path | None = Field(None, description="YAML file of queues, loaded at start (replaces earlier file queues)")
    sample_every: float = Field(5.0, ge=0, description="seconds between a launcher's resource samples; 0: off")
    start_deadline: float = Field(300.0, ge=1, le=86400, description="seconds a replica may stay starting without a "
                                  "word from its launcher, counted from its launch: past it the launcher is killed "
                                  "and the attempt ends LostContact (retried as lost_contact). A launcher that sets "
                                  "up for longer (an image pull, an env build) reports every 10 s meanwhile, and "
                                  "each report counts the bound anew; keep it well above that")
    idle_gpu_threshold: float = Field(5.0, ge=0, le=100, description="GPU utilisation (%) under which a GPU is idle")
    idle_gpu_period: float = Field(1800.0, gt=0, description="seconds a job's GPUs stay idle before it is flagged")
    log_keep: int = Field(LOG_KEEP, ge=0, description="bytes of each replica's log the server keeps: its first half "
                          "and its last half (0: all of it)")
    outputs_max: int = Field(OUTPUTS_MAX, ge=0, description="bytes of outputs one replica of an attempt may "
                             "upload, sizes as stored (a sparse file counts whole); past it none are and the "
                             "attempt fails (OutputsTooLarge). 0: no bound")
    pids_max: int | None = Field(None, ge=0, le=PID_MAX_LIMIT, strict=True, description="processes and threads "
                                 "one replica's whole tree may hold at once, in a pids cgroup (host jobs; podman's "
                                 "and docker's --pids-limit in an image); a fork past it fails (EAGAIN). 0: no bound; "
                                 f"unset: {PIDS_MAX} on a server with --auth, none on a one-user one")

    @property
    def replica_pids(self) -> int | None:
        """The pids bound each replica gets: a shared server's jobs may not take the node's pids from one
        another; one user's own jobs go unbounded unless asked, since joining the group costs each job's start
        ~10 ms (a cgroup move waits out an RCU grace period)."""
        if self.pids_max is None:
            return PIDS_MAX if self.auth else None
        return self.pids_max or None
    cpu_limit: bool = Field(False, strict=True, description="cap each replica of a host job at its resources.cpu "
                            "cores (a CFS quota in its cpu cgroup, a Kubernetes limit) on top of the weight it always "
                            "gets there (a Kubernetes request: its share under contention, idle cores free to use). "
                            "Off: a job may burst into cores nobody else wants; on: never, and a job joins its cpu "
                            "cgroup even where it joins no other (a move: ~10 ms of its start unless its launcher "
                            "joined it ahead)")
    metrics_keep: int = Field(METRICS_KEEP, ge=0, le=10_000_000, description="points of each metric of a replica "
                              "the server keeps: between half and all of this many, evenly spaced, and the newest "
                              "(0: every point)")
    prices: Prices = Field(default_factory=Prices, description="for `trainyard usage` in money")
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings, description="the planner's options")
    component_catalog: list[str] = Field(
        default_factory=list, description="folders and URLs where pipeline steps find Kubeflow components by name")
    secrets_key_file: Path | None = Field(None, description="the key secrets are sealed with (made, 0600, on first "
                                          "need); default secrets.key in the home. Servers sharing a database "
                                          "must share it")
    webhooks: dict[str, WebhookSettings] = Field(default_factory=dict, description="name -> where job events "
                                                 "are POSTed (users subscribe them by name: trainyard notify)")
    retention: RetentionSettings = Field(default_factory=RetentionSettings, description="how long ended "
                                         "attempts' folders, ended jobs' checkpoints and ended jobs are kept")

    @field_validator("port")
    @classmethod
    def _port(cls, v: int) -> int:
        if not 0 <= v <= 65535:  # bind() would raise OverflowError
            raise ValueError(f"{v}: a TCP port is 1–65535 (0: the last port if free, else any)")
        return v

    @field_validator("cpus", "memory", "gpus", "gpu_type")
    @classmethod
    def _local_only(cls, v: object, info: ValidationInfo) -> object:
        # the Ray engine reads each node's resources from the cluster every cycle: a declared capacity would have
        # been dropped without a word, and a job sized to it left pending
        if v is not None and info.data.get("engine") == "ray":
            raise ValueError(f"not with --engine ray: Ray's nodes declare their own ({RAY_DECLARES[info.field_name]}"
                             "); leave it out")
        return v

    @field_validator("cpus")
    @classmethod
    def _cpus(cls, v: float | None) -> float | None:
        if v is not None and not 0 < v <= MAX_CPUS:
            raise ValueError(f"{v:g}: declare more than 0 cores, at most {MAX_CPUS}")
        return v

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: int | None) -> int | None:
        if v is not None and not 0 < v <= MAX_MEMORY:
            raise ValueError(f"{v} bytes: declare more than 0, at most 1024Pi")
        return v

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, v: int | None) -> int | None:
        if v is not None and not 0 <= v <= MAX_GPUS:
            raise ValueError(f"{v}: declare 0 to {MAX_GPUS} GPUs (0: none, whatever is detected)")
        return v

    @field_validator("gpu_type")
    @classmethod
    def _gpu_type(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and not GPU_TYPE.fullmatch(v):
            raise ValueError(f"{v[:80]!r}: a GPU type is 1 to 63 letters, digits, '-', '_' or '.', starting and "
                             "ending with a letter or digit (e.g. A100, H100, RTX-4090, T4)")
        if v is not None and info.data.get("gpus") == 0:  # the node would have no GPUs, and so no type: dropped
            raise ValueError(f"{v}: --gpus 0 declares no GPUs, so none is of this type; declare how many (--gpus N) "
                             "or leave --gpu-type out")
        return v

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _proxies(cls, v: str | None) -> str | None:
        for proxy in (p.strip() for p in (v or "").split(",") if p.strip()):
            if proxy != "*":
                try:  # written into nginx's configuration too (server --front nginx)
                    ipaddress.ip_network(proxy, strict=False)
                except ValueError:
                    raise ValueError(f"{proxy!r}: name each proxy by its address or network (10.0.0.0/8), "
                                     "or * for any") from None
        return v

    @field_validator("webhooks")
    @classmethod
    def _webhook_names(cls, v: dict[str, WebhookSettings]) -> dict[str, WebhookSettings]:
        for name in v:  # spec.names' rule (config sits below spec): users name them in requests and URLs
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", name):
                raise ValueError(f"webhook name {name!r}: use letters, digits, '.', '_' or '-' (at most 63, "
                                 "starting with a letter or digit)")
        return v

    @model_validator(mode="after")
    def _hash_token(self) -> "ServerSettings":
        if self.token is not None:
            from trainyard.auth.tokens import token_hash

            self.token_sha256, self.token = token_hash(self.token), None
        return self

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.home / 'trainyard.db'}"

    @property
    def artifacts_url(self) -> str:
        return self.artifacts or (self.home / "artifacts").as_uri()

    @property
    def storage_options(self) -> dict[str, dict]:
        """Filesystem options per protocol, handed to the artifact store and to every launcher."""
        return {"s3": {"endpoint_url": self.s3_endpoint_url}} if self.s3_endpoint_url else {}

    @property
    def secrets_key(self) -> Path:
        return self.secrets_key_file or self.home / "secrets.key"

    @property
    def address_file(self) -> Path:
        return self.home / ADDRESS_FILE

    @property
    def leader_file(self) -> Path:
        """Where launchers look for the server again: beside a SQLite file, which servers of other homes
        may share (``--db``), the address of whichever of them leads now; else the home's."""
        # every launch names it: parsing the URL each time was ~3 % of the server's CPU in a burst
        key = (self.db, self.home)
        if self._leader is None or self._leader[0] != key:
            path = sqlite_file(self.db_url)
            found = path.with_name(f"{path.name}.{ADDRESS_FILE}") if path is not None else self.address_file
            self._leader = (key, found)
        return self._leader[1]
