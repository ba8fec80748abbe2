"""Everything a server process holds, wired once: store, engine, services, scheduler.

Built in dependency order by passing each part what it needs. The one cycle (the
scheduler loop needs the services; services wake the loop and stop attempts
through it) goes through :class:`~trainyard.services.scheduling.Scheduler`, a
handle made first and bound to the loop once the loop exists.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import trainyard
from trainyard.artifacts.store import ArtifactStore
from trainyard import envvars
from trainyard.config import ServerSettings, ray_address
from trainyard.engines.base import Engine
from trainyard.errors import TrainyardError
from trainyard.launch.config import LaunchConfig
from trainyard.pipelines.catalog import Catalog
from trainyard.scheduler.cycle import Options
from trainyard.scheduler.loop import SchedulerLoop
from trainyard.services.accounting import Accounting
from trainyard.services.attempts import AttemptService
from trainyard.services.audit import AuditLog
from trainyard.services.cluster import Cluster
from trainyard.services.dask_clusters import DaskClusterService
from trainyard.services.dask_loop import DaskClusterLoop
from trainyard.services.dependencies import DependencyLoop
from trainyard.services.end_watch import EndWatch
from trainyard.services.identity import IdentityService
from trainyard.services.jobs import JobService
from trainyard.services.launching import launch_configs
from trainyard.services.metrics import TrainyardCollector
from trainyard.services.metrics import registry as metrics_registry
from trainyard.services.monitoring import MonitoringService
from trainyard.services.nodes import NodeService
from trainyard.services.notify import FOLLOWER_POLL, Notifier
from trainyard.services.pipelines import PipelineService
from trainyard.services.queues import QueueService
from trainyard.services.retention import RetentionCollector, RetentionLoop
from trainyard.services.scheduling import Scheduler
from trainyard.services.service_loop import ServiceLoop
from trainyard.services.service_tokens import ServiceTokens
from trainyard.services.service_traffic import TrafficCollector
from trainyard.services.serving import ServingService
from trainyard.services.snapshots import SnapshotService
from trainyard.store.snapshot_owners import SnapshotOwners
from trainyard.services.secret_box import SecretBox
from trainyard.services.secrets import SecretService
from trainyard.services.schedule_loop import ScheduleLoop
from trainyard.services.schedules import ScheduleService
from trainyard.services.sweep_loop import SweepLoop
from trainyard.services.webhook_loop import WebhookLoop
from trainyard.services.webhooks import WebhookService
from trainyard.services.replica_requests import ReplicaRequests
from trainyard.services.sweeps import SweepService
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, JobInfo
from trainyard.store import IdleRule, Store
from trainyard.store.lease import Lease, make_lease


def make_engine(settings: ServerSettings) -> Engine:
    if settings.engine == "local":
        from trainyard.engines.detect import local_node
        from trainyard.engines.local import LocalEngine

        node = local_node(cpus=settings.cpus, memory=settings.memory, gpus=settings.gpus, gpu_type=settings.gpu_type)
        return LocalEngine(settings.home, node, container_runtime=settings.container_runtime)
    if settings.engine == "ray":
        from trainyard.engines.ray import RayEngine  # needs trainyard[ray]: imported only when asked for

        address = settings.ray_address or ray_address()
        if not address:
            raise TrainyardError("engine ray needs the cluster's address: --ray-address HOST:PORT (or RAY_ADDRESS)")
        return RayEngine(address, settings.home, namespace=settings.ray_namespace)
    raise ValueError(f"unknown engine {settings.engine!r}; this version has: local, ray")


def make_catalog(settings: ServerSettings) -> Catalog:
    """The catalog where Kubeflow component steps find components by name."""
    return Catalog.from_settings(settings)


class Platform:
    def __init__(self, settings: ServerSettings, engine: Engine | None = None, lease: Lease | None = None) -> None:
        settings.home.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        self.server_url = ""  # known at start(), before the loop can launch anything that needs it
        self._on_lead: Callable[[], None] = lambda: None
        self.store = Store(settings.db_url)
        self.store.log_keep = settings.log_keep
        self.store.metrics_keep = settings.metrics_keep
        self.lease = lease or make_lease(settings.db_url)
        self.artifacts = ArtifactStore(settings.artifacts_url, settings.storage_options)
        self.notifier = Notifier()
        self.engine = engine or make_engine(settings)
        self.scheduler = Scheduler()
        self.cluster = Cluster(self.store, self.engine)
        self.snapshots = SnapshotService(self.artifacts, SnapshotOwners(self.store))
        self.audit = AuditLog(self.store)
        self.nodes = NodeService(self.cluster, self.scheduler, self.audit)
        self.queues = QueueService(self.store, self.cluster, self.scheduler, self.audit)
        if settings.queues_file is not None:
            self.queues.load_file(settings.queues_file)
        self.identity = IdentityService(self.store, self.audit, server_token_sha256=settings.token_sha256,
                                        users=settings.auth)
        self.secrets = SecretService(self.store, SecretBox(settings.secrets_key), self.audit)
        self.jobs = JobService(self.store, self.engine, self.artifacts, self.notifier, self.scheduler,
                               team_for=self.queues.team_for, audit=self.audit)
        self.jobs.check_secrets = self.secrets.check
        self.jobs.secret_sizes = self.secrets.sizes
        self.jobs.unmeasured = self.queues.unmeasured
        self.jobs.check_priority = self.queues.check_priority
        self.jobs.check_owner = self._owner_may
        self.attempts = AttemptService(self.store, self.artifacts, self.notifier, wake=self.scheduler.wake,
                                       stop=self.scheduler.stop_attempt, freed=self.scheduler.freed)
        self.replica_requests = ReplicaRequests(self.store, self.jobs, self.audit)
        local = self.engine.name == "local"  # jobs of other engines run as no account
        self.replica_requests.runs_as = lambda owner: self.identity.run_as(owner) if local else None
        self.attempts.requests = self.replica_requests
        self.pipelines = PipelineService(self.store, self.jobs, self.artifacts, self.notifier,
                                         catalog=functools.partial(make_catalog, settings),
                                         images=settings.container_runtime != "none")
        self.dask = DaskClusterService(self.store, self.jobs, self.engine, self.secrets.box)
        self.dask_loop = DaskClusterLoop(self.dask, self.notifier)
        self.end_watch = EndWatch(self.store, self.notifier)
        self.dask.wake = self.dask_loop.wake
        self.serving = ServingService(self.store, self.jobs, self.engine, self.artifacts,
                                      find_artifact=self.pipelines.find_artifact,
                                      tokens=ServiceTokens(self.secrets.box))
        # a cluster's jobs read their TLS identity as their secrets, a service replica its token
        self.secrets.more = lambda job_id: {**self.dask.tls_env(job_id), **self.serving.token_env(job_id)}
        self.serving.sandboxed = settings.auth  # several users: one's service must not act as another's UI
        self.serving.runs_as = self.dask.runs_as = self.replica_requests.runs_as
        self.service_loop = ServiceLoop(self.serving)
        self.serving.wake = self.service_loop.wake
        self.pipelines.serving = self.serving  # serve steps apply services
        self.sweeps = SweepService(self.store, self.jobs)
        self.sweep_loop = SweepLoop(self.sweeps, self.notifier)
        self.sweeps.wake = self.sweep_loop.wake
        self.schedules = ScheduleService(self.store, self.jobs, self.identity, self.pipelines)
        self.schedule_loop = ScheduleLoop(self.schedules)
        self.schedules.wake = self.schedule_loop.wake
        self.webhooks = WebhookService(self.store, settings.webhooks, self.identity, self.audit)
        self.webhook_loop = WebhookLoop(self.webhooks, lambda: self.server_url)
        self.retention = RetentionLoop(self.store, self.engine, self.artifacts, settings.retention, self.jobs.remover)
        self.dependency_loop = DependencyLoop(self.jobs.dependencies)
        self.loop = SchedulerLoop(
            self.store, self.engine, self.attempts, config_for=self._configs,
            live=self.cluster.live, nodes=self.cluster.nodes, queues=self.queues.models,
            options=Options(**settings.scheduler.model_dump()), start_deadline=settings.start_deadline,
        )
        self.scheduler.bind(self.loop)
        self.store.idle_rule = IdleRule(settings.idle_gpu_threshold, settings.idle_gpu_period)
        accounting = Accounting(self.store, settings.prices,
                                     gpu_types=lambda: {n.name: n.gpu_type for n in self.engine.nodes() if n.gpu_type})
        registry = metrics_registry(TrainyardCollector(self.store, self.cluster.nodes, self.loop.stats))
        registry.register(TrafficCollector(self.serving.traffic))
        registry.register(RetentionCollector(self.retention))
        self.monitoring = MonitoringService(self.store, accounting, registry, check_run=self.pipelines.get)

    def _owner_may(self, owner: str | None, team: str | None, spec: JobSpec) -> None:
        """A job made later in ``owner``'s name (a pipeline step, a sweep's trial, a replica, a Dask worker): they
        may still submit it, at its priority (its queue's ceiling may have come down since it was checked)."""
        who = self.identity.check_submitter(owner, team, spec.queue, team_for=self.queues.team_for)
        if who is not None:
            self.queues.check_priority(who, spec, owner=owner)

    def _configs(self, job: JobInfo, attempt: AttemptInfo, token: str) -> list[LaunchConfig]:
        # every attempt (a retry, a requeue, a job that waited long) is new work in its owner's name: one since
        # disabled, made a viewer or taken out of the queue's team starts none (a launch refused is not retried)
        self.identity.check_submitter(job.owner, None, job.queue, team_for=self.queues.team_for)
        master = self.engine.rendezvous(attempt) if job.spec.distributed else None
        run_as = self.identity.run_as(job.owner) if self.engine.name == "local" else None
        configs = launch_configs(job, attempt, token=token, settings=self.settings, artifacts=self.artifacts,
                                 server_url=self.server_url, master=master, run_as=run_as)
        # the in-job SDK (e.g. trainyard.dask.new_cluster) finds this server wherever the job runs, and the
        # leader's announced address (the file launchers re-read too) once this server is gone
        found = {envvars.SERVER: self.server_url, envvars.SERVER_FILE: str(self.settings.leader_file)}
        served = self.serving.launch_env(job, attempt)
        extra = {**(found if self.server_url else {}), **self.dask.launch_env(job, attempt), **served}
        # the launcher asks for the job's secrets only when it has some: a cluster's have these, a replica its token
        more = [*self.dask.tls_vars(job), *([envvars.SERVICE_TOKEN] if served else [])]
        for c in configs:
            if more:
                c.secrets = sorted({*(c.secrets or ()), *more})
            if envvars.SERVER in c.env:  # a server the job names itself is not followed to ours
                c.env = {envvars.SERVER_FILE: "", **c.env}
            c.env = {**extra, **c.env}
        return configs

    @property
    def leader(self) -> bool:
        """Whether this server schedules; the others sharing its database serve the API only."""
        return self.lease.leader

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "version": trainyard.__version__, "engine": self.engine.name,
                "role": "leader" if self.leader else "follower"}

    def start(self, server_url: str, on_lead: Callable[[], None] | None = None) -> None:
        """Serve at ``server_url``; schedule whenever this server holds the lease, then call ``on_lead``
        (the server announces itself where launchers look)."""
        self.server_url = server_url
        self._on_lead = on_lead or (lambda: None)
        self.notifier.look_again_every(FOLLOWER_POLL)  # a follower from the start hears no notify (_lead clears it)
        self.lease.start(on_gain=self._lead, on_loss=self._follow)

    def _lead(self) -> None:
        self.jobs.leading()
        self.notifier.look_again_every(None)
        self.end_watch.start()  # the ends another server writes (a follower's cancel) are heard through it
        self.loop.start()
        self.loop.wake()
        self.pipelines.start()
        self.dask_loop.start()
        self.service_loop.start()
        self.sweep_loop.start()
        self.schedule_loop.start()
        self.webhook_loop.start()
        self.retention.start()
        self.dependency_loop.start()
        self._on_lead()

    def _follow(self) -> None:
        # the leader's changes reach this server's waiters only through the database: those that began
        # while this server led (and slept unbounded) are woken to look again
        self.notifier.look_again_every(FOLLOWER_POLL)
        self.pipelines.stop()
        self.dask_loop.stop()
        self.service_loop.stop()
        self.sweep_loop.stop()
        self.schedule_loop.stop()
        self.webhook_loop.stop()
        self.retention.stop()
        self.dependency_loop.stop()
        self.loop.stop()
        self.end_watch.stop()

    def stop(self) -> None:
        if self.lease.leader:
            self._follow()
        self.lease.stop()
        self.engine.close()
        self.store.close()
