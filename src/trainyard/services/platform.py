"""Everything a server process holds, wired once: store, engine, services, scheduler."""

from __future__ import annotations

from typing import Callable

from trainyard.artifacts.store import ArtifactStore
from trainyard.config import ServerSettings, ray_address
from trainyard.engines.base import Engine
from trainyard.errors import TrainyardError
from trainyard.pipelines.catalog import Catalog
from trainyard.scheduler.loop import SchedulerLoop
from trainyard.services.attempts import AttemptService
from trainyard.services.jobs import JobService
from trainyard.services.launching import launch_configs
from trainyard.services.notify import Notifier
from trainyard.services.queues import QueueService
from trainyard.services.pipelines import PipelineService
from trainyard.store import Store
from trainyard.store.lease import Lease, make_lease

FOLLOWER_POLL = 1.0  # seconds: how often a follower's long polls look at the database again


def make_engine(settings: ServerSettings) -> Engine:
    if settings.engine == "local":
        from trainyard.engines.detect import local_node
        from trainyard.engines.local import LocalEngine

        node = local_node(cpus=settings.cpus, memory=settings.memory, gpus=settings.gpus, gpu_type=settings.gpu_type)
        return LocalEngine(settings.home, node)
    if settings.engine == "ray":
        from trainyard.engines.ray import RayEngine  # needs trainyard[ray]: imported only when asked for

        address = settings.ray_address or ray_address()
        if not address:
            raise TrainyardError("engine ray needs the cluster's address: --ray-address HOST:PORT (or RAY_ADDRESS)")
        return RayEngine(address, settings.home, namespace=settings.ray_namespace)
    raise ValueError(f"unknown engine {settings.engine!r}; this version has: local, ray")


class Platform:
    def __init__(self, settings: ServerSettings, engine: Engine | None = None, lease: Lease | None = None) -> None:
        settings.home.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        self.server_url = ""
        self.on_lead: Callable[[], None] = lambda: None  # the server announces itself where launchers look
        self.store = Store(settings.db_url)
        self.lease = lease or make_lease(settings.db_url)
        self.artifacts = ArtifactStore(settings.artifacts_url)
        self.notifier = Notifier()
        self.engine = engine or make_engine(settings)
        self.attempts = AttemptService(self.store, self.artifacts, self.notifier, wake=self._wake,
                                       stop=lambda attempt: self.loop.stop_attempt(attempt))
        self.jobs = JobService(self.store, self.engine, self.artifacts, self.notifier, wake=self._wake,
                               stop=lambda attempt: self.loop.stop_attempt(attempt))
        self.queues = QueueService(self.store, self.jobs)
        self.jobs.check_queue = self.queues.check
        if settings.queues_file is not None:
            self.queues.load_file(settings.queues_file)
        self.pipelines = PipelineService(self.store, self.jobs, self.artifacts, self.notifier,
                                         catalog=self._catalog)
        self.loop = SchedulerLoop(
            self.store, self.engine, self.attempts, config_for=self._configs,
            live=self.jobs.live, nodes=self.jobs.nodes, queues=self.queues.models,
        )
        self.jobs.created = self.loop.remember

    def _configs(self, job, attempt, token):  # noqa: ANN001, ANN202
        master = self.engine.rendezvous(attempt) if job.spec.distributed else None
        return launch_configs(job, attempt, token=token, settings=self.settings, artifacts=self.artifacts,
                              server_url=self.server_url, master=master)

    def _catalog(self):  # noqa: ANN202
        return Catalog.from_settings(self.settings)

    def _wake(self) -> None:
        self.loop.wake()

    @property
    def leader(self) -> bool:
        """Whether this server schedules; the others sharing its database serve the API only."""
        return self.lease.leader

    def start(self, server_url: str) -> None:
        self.server_url = server_url
        self.lease.start(on_gain=self._lead, on_loss=self._follow)

    def _lead(self) -> None:
        self.notifier.max_wait = None
        self.loop.start()
        self.loop.wake()
        self.pipelines.start()
        self.on_lead()

    def _follow(self) -> None:
        # the leader's changes reach this server's waiters only through the database
        self.notifier.max_wait = FOLLOWER_POLL
        self.pipelines.stop()
        self.loop.stop()

    def stop(self) -> None:
        if self.lease.leader:
            self._follow()
        self.lease.stop()
        self.engine.close()
        self.store.close()
