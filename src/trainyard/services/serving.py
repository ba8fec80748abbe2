"""Services: apply (create or roll out a new version), look up, scale, delete; where traffic goes.

A service is a thin layer over jobs (one per replica, see
:mod:`trainyard.services.service_jobs`). What keeps the replicas at the wanted
number, probes their readiness, rolls out new versions and scales on traffic
is the leader's loop in :mod:`trainyard.services.service_loop`; requests only
write what is wanted and wake it. The proxy (``/serve/NAME``) asks
:meth:`ServingService.route` where to send a request.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import ValidationError

from trainyard import envvars
from trainyard.artifacts.store import ArtifactStore
from trainyard.auth.permissions import LOCAL_ADMIN, Action, Caller, visible
from trainyard.engines.base import Engine
from trainyard.errors import Conflict, Forbidden, InvalidSpec, ServiceNotFound, Unschedulable
from trainyard.services import service_jobs, store_inputs
from trainyard.services.jobs import JobService
from trainyard.services.service_tokens import HEADER, ServiceTokens
from trainyard.services.service_traffic import Traffic
from trainyard.spec.paging import Page, Paging
from trainyard.spec.labels import own_label
from trainyard.spec.records import AttemptInfo, JobInfo
from trainyard.spec.service import ScaleRequest, ServiceInfo, ServiceReplica, ServiceSpec, ServiceStatus
from trainyard.store import Store
from trainyard.store.services import ReplicaRow, ServiceRow, ServiceStore

log = logging.getLogger(__name__)

ROUTE_TTL = 0.5  # seconds a route is reused before the database is read again (the loop also clears it)
DEMAND_EVERY = 0.5  # seconds between two writes of a service's latest request (what autoscaling reads)


@dataclass(slots=True)
class Route:
    """Where ``/serve/NAME`` goes now."""

    service_id: str
    name: str
    owner: str | None
    team: str | None
    cold_start_timeout: float
    endpoints: list[tuple[str, str]]  # (replica job id, http://HOST:PORT) of ready replicas
    fetched: float
    tokens: dict[str, bytes]  # replica job id -> its attempt's token (services/service_tokens.py), if it has one

    def signed(self, job_id: str, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """``headers`` (without any X-Trainyard-Service-Token: the proxy drops the caller's) for the replica
        ``job_id``, with its token: what tells it the request came through this server."""
        token = self.tokens.get(job_id)
        return headers if token is None else [*headers, (HEADER, token)]


class ServingService:
    def __init__(self, store: Store, jobs: JobService, engine: Engine, artifacts: ArtifactStore,
                 find_artifact: Callable[[str, Caller], Any], tokens: ServiceTokens,
                 wake: Callable[[], None] = lambda: None) -> None:
        self.services = ServiceStore(store)
        self.tokens = tokens
        self.store = store
        self.jobs = jobs
        self.engine = engine
        self.artifacts = artifacts
        self.find_artifact = find_artifact
        self.wake = wake  # the service loop (bound by the platform)
        self.traffic = Traffic()
        self.sandboxed = False  # a service's pages run in an origin of their own (api/serve_origin.py): with --auth
        # the Unix account an owner's replicas run as, if any (bound by the platform to IdentityService.run_as)
        self.runs_as: Callable[[str | None], dict | None] = lambda owner: None
        self._routes: dict[str, Route] = {}
        self._demanded: dict[str, float] = {}
        self.outstanding: dict[str, int] = {}  # replica job -> requests this server's proxy has on it now
        # requests the nginx front has under way to the replica at HOST:PORT (front/nginx.py), if one is in front
        self.front_in_flight: Callable[[str], int] = lambda address: 0
        # told of each token let in to a service on the Python way (the nginx front's grants: front/grants.py)
        self.granted: Callable[[str, str], None] = lambda token, name: None
        self.front_unknown = 0  # lines of the nginx front's access log naming no live service (front_request)

    # -- requests -------------------------------------------------------------

    def apply(self, spec: ServiceSpec, snapshot: str | None = None, caller: Caller = LOCAL_ADMIN, *,
              on_behalf: tuple[str | None, str | None] | None = None) -> ServiceInfo:
        """Create the service, or roll out ``spec`` as a new version of the live one of that name
        (nothing happens when neither spec nor code changed). Everything is checked first.

        ``on_behalf``: (owner, team) of a pipeline ``serve`` step, whose run was checked when it was
        created (``caller`` then stands for the run: what it may see); it updates only the owner's service."""
        owner, team, spec = self.check(spec, caller, on_behalf=on_behalf)
        if snapshot is not None and not self.artifacts.has_snapshot(snapshot):
            raise _invalid("workdir", f"snapshot {snapshot} was not uploaded")
        existing = self.services.live_named(spec.name)
        if existing is not None:
            return self._update(existing, spec, snapshot, caller, on_behalf)
        service_id = self.services.create(spec, snapshot, _initial(spec), owner=owner, team=team)
        self.jobs.audit.record(caller, "service.create", service_id, name=spec.name, queue=spec.queue, team=team)
        self._changed()
        return self.get(service_id, caller)

    def check(self, spec: ServiceSpec, caller: Caller = LOCAL_ADMIN, *,
              on_behalf: tuple[str | None, str | None] | None = None) -> tuple[str | None, str | None, ServiceSpec]:
        """Everything :meth:`apply` checks before storing: (owner, team, the spec with its inputs resolved)."""
        if on_behalf is None:
            owner, team = caller.user, self.jobs.team_for(caller, spec.queue)
            self.jobs.check_priority(caller, spec)
        else:
            owner, team = on_behalf
            self.jobs.check_owner(owner, team, spec)  # a run's serve step: may its owner still submit it?
        store_inputs.check_for(self.jobs, spec.inputs, caller)  # before job:// and artifact:// become store URLs
        spec = self._resolved(spec, caller)
        job = service_jobs.replica_job("s-check", spec)
        self.jobs.check_secrets(job.secrets, team)
        self.jobs.check_exec(job, team)
        self.engine.validate(job)
        if (problem := self.jobs.placement_problem(job)) is not None:
            raise Unschedulable(f"{problem[0]}: {problem[1]}", field=problem[0])
        most = spec.service.replicas if spec.fixed else spec.service.autoscale.max  # type: ignore[union-attr]
        if spec.service.port is not None and (most or 0) > 1 and self.engine.name == "local":
            raise _invalid("service.port", f"port {spec.service.port} is fixed, so only one replica can listen on "
                                           "it on this host; leave port out to give each replica a free one")
        existing = self.services.live_named(spec.name)
        if existing is not None and on_behalf is None and not caller.sees(existing["team"], existing["owner"]):
            raise Conflict(f"the name {spec.name!r} is taken by another team's service", service=spec.name)
        if existing is not None and on_behalf is not None and existing["owner"] != owner:
            raise Conflict(f"the name {spec.name!r} is taken by {existing['owner']}'s service; a pipeline updates "
                           "only its owner's", service=spec.name)
        return owner, team, spec

    def _update(self, row: ServiceRow, spec: ServiceSpec, snapshot: str | None, caller: Caller,
                on_behalf: tuple[str | None, str | None] | None = None) -> ServiceInfo:
        if on_behalf is None:  # else checked already: the row is the run owner's
            self._check_may_change(row, caller)
            if not caller.admin and caller.user != row["owner"] and (account := self.runs_as(row["owner"])):
                # its replicas would run the new spec's code as the owner's account, with the owner's files
                raise Forbidden(f"service {row['name']}'s replicas run as {row['owner']}'s Unix account "
                                f"{account['name']}: only {row['owner']} or an admin may change its spec (you may "
                                "scale or delete it)", service_id=row["id"])
        if row["status"] != ServiceStatus.RUNNING:
            raise Conflict(f"service {row['id']} is {row['status'].value}; apply again once it stopped",
                           service_id=row["id"])
        if spec.model_dump(mode="json") == row["spec"].model_dump(mode="json") and snapshot == row["snapshot"]:
            return self.get(row["id"], caller)
        auto = spec.service.autoscale
        wanted = _initial(spec) if auto is None else max(auto.min, min(row["wanted"], auto.max))
        self.services.set(row["id"], spec=spec.model_dump(mode="json"), snapshot=snapshot, queue=spec.queue,
                          version=row["version"] + 1, wanted=wanted, reason=f"rolling out version {row['version'] + 1}")
        self.jobs.audit.record(caller, "service.update", row["id"], version=row["version"] + 1)
        self._changed()
        return self.get(row["id"], caller)

    def scale(self, key: str, req: ScaleRequest, caller: Caller = LOCAL_ADMIN) -> ServiceInfo:
        """A fixed number of replicas (autoscaling, if on, is turned off), or new autoscaling settings."""
        row = self._live(key, caller)
        spec = row["spec"]
        data = spec.model_dump(mode="json")
        if req.replicas is not None:
            data["service"]["autoscale"], data["service"]["replicas"] = None, req.replicas
            wanted = req.replicas
        else:
            auto = data["service"]["autoscale"] or {"min": 0, "max": max(1, row["wanted"])}
            auto.update(req.autoscale())
            data["service"]["autoscale"], data["service"]["replicas"] = auto, None
            wanted = max(auto["min"], min(row["wanted"], auto["max"]))
        try:
            new = ServiceSpec.model_validate(data)
        except ValidationError as e:  # the request's settings with the service's own (min over its max): said as
            # the request's, in pydantic's words without its dump of the whole model
            raise InvalidSpec.body("autoscale", "; ".join(err["msg"].removeprefix("Value error, ")
                                                         for err in e.errors())) from None
        # the replicas' job spec is the same: no new version, no rollout
        self.services.set(row["id"], spec=new.model_dump(mode="json"), wanted=wanted)
        self.jobs.audit.record(caller, "service.scale", row["id"], **req.model_dump(exclude_none=True))
        self._changed()
        return self.get(row["id"], caller)

    def delete(self, key: str, caller: Caller = LOCAL_ADMIN) -> ServiceInfo:
        """Stop every replica; the service is ``stopped`` once none runs any more."""
        row = self.services.find(key, visible(caller))
        self._check_may_change(row, caller)
        self.jobs.audit.record(caller, "service.delete", row["id"])
        if row["status"] == ServiceStatus.RUNNING:
            self.services.move(row["id"], ServiceStatus.STOPPING, reason="deleted")
            self._changed()
        return self.get(row["id"], caller)

    def _check_may_change(self, row: ServiceRow, caller: Caller) -> None:
        if not caller.may(Action.CANCEL_OWN, row["team"], row["owner"]):
            raise Forbidden(f"you may change only your own services; {row['id']} is {row['owner']}'s",
                            service_id=row["id"])

    def _live(self, key: str, caller: Caller) -> ServiceRow:
        row = self.services.find(key, visible(caller))
        self._check_may_change(row, caller)
        if row["status"] != ServiceStatus.RUNNING:
            raise Conflict(f"service {row['id']} is {row['status'].value}", service_id=row["id"])
        return row

    def _changed(self) -> None:
        self._routes.clear()
        self.wake()

    # -- inputs ---------------------------------------------------------------------

    def _resolved(self, spec: ServiceSpec, caller: Caller) -> ServiceSpec:
        """``spec`` with ``job://`` and ``artifact://`` inputs as artifact-store URLs."""
        if not any(v.startswith(("job://", "artifact://")) for v in spec.inputs.values()):
            return spec
        inputs = {name: service_jobs.resolve_ref(name, value, lambda j, n=name: self._job_outputs(j, n, caller),
                                                 lambda k: self.find_artifact(k, caller).url)
                  for name, value in spec.inputs.items()}
        return spec.model_copy(update={"inputs": inputs})

    def _job_outputs(self, job_id: str, name: str, caller: Caller) -> str:
        job = self.jobs.get(job_id, caller)
        number = service_jobs.succeeded_attempt(job.status, [(a.number, a.status.value) for a in job.attempts],
                                                job_id, name)
        return self.artifacts.outputs_url(job_id, number)

    # -- looking up -------------------------------------------------------------------

    def get(self, key: str, caller: Caller = LOCAL_ADMIN) -> ServiceInfo:
        row = self.services.find(key, visible(caller))
        return self.info(row, self.services.replicas([row["id"]])[row["id"]])

    def page(self, include_ended: bool = False, caller: Caller = LOCAL_ADMIN,
             paging: Paging = Paging()) -> Page[ServiceInfo]:
        """One page of what the caller may see, newest first, and the cursor of the next."""
        rows, cursor = self.services.page(include_ended, visible(caller), paging)
        replicas = self.services.replicas([r["id"] for r in rows])
        return Page[ServiceInfo](items=[self.info(r, replicas[r["id"]], details=False) for r in rows],
                                 next_cursor=cursor)

    def info(self, row: ServiceRow, replicas: list[ReplicaRow], details: bool = True) -> ServiceInfo:
        shown: list[ServiceReplica] = []
        for r in replicas:
            job = self.store.get_job(r["job_id"]) if details else None
            shown.append(ServiceReplica(job_id=r["job_id"], version=r["version"], ready=r["ready"],
                                        draining=r["draining_since"] is not None, address=r["address"],
                                        status=job.status.value if job else "-", node=_node(job) if job else None,
                                        reason=job.reason if job else None))
        fields = {k: row[k] for k in ("id", "name", "status", "reason", "queue", "owner", "team", "version", "spec",
                                      "wanted", "restarts", "created_at", "updated_at", "ended_at")}
        return ServiceInfo(**fields, ready=sum(r["ready"] and r["draining_since"] is None for r in replicas),
                           url=f"/serve/{row['name']}/", replicas=shown, traffic=self.traffic.snapshot(row["name"]))

    # -- the proxy's questions ------------------------------------------------------------

    def cached_route(self, name: str) -> Route | None:
        route = self._routes.get(name)
        return route if route is not None and time.monotonic() - route.fetched < ROUTE_TTL else None

    def route(self, name: str, caller: Caller = LOCAL_ADMIN) -> Route:
        """Where ``/serve/NAME`` goes: the live service's ready replicas (a blocking read: call off the loop).
        A service the caller may not see is not found."""
        route = self.cached_route(name)
        if route is None:
            row = self.services.live_named(name)
            if row is None or row["status"] != ServiceStatus.RUNNING:
                raise ServiceNotFound(f"no such service: {name}", service=name)
            live = [r for r in self.services.replicas([row["id"]])[row["id"]]
                    if r["ready"] and r["draining_since"] is None and r["address"]]
            tokens = {r["job_id"]: token.encode() for r in live if (token := self.tokens.token(r["token"]))}
            route = Route(row["id"], name, row["owner"], row["team"], row["spec"].service.cold_start_timeout,
                          [(r["job_id"], "http://" + r["address"]) for r in live], time.monotonic(), tokens)
            self._routes[name] = route
        if not caller.sees(route.team, route.owner):
            raise ServiceNotFound(f"no such service: {name}", service=name)
        return route

    def forget_route(self, name: str) -> None:
        self._routes.pop(name, None)

    def touch_due(self, route: Route) -> bool:
        """Whether this request should be written down as the service's latest (at most every DEMAND_EVERY)."""
        now = time.monotonic()
        if now - self._demanded.get(route.service_id, 0.0) < DEMAND_EVERY:
            return False
        self._demanded[route.service_id] = now
        return True

    def touch(self, route: Route) -> None:
        """A request arrived: the leader's loop (maybe in another server) keeps the service from idling down
        and, with no replica, starts one (a cold start). A blocking write: call off the loop."""
        self.services.set(route.service_id, demand_at=time.time())
        if not route.endpoints:  # a cold start: now, not at the next tick (with replicas, the tick is soon enough)
            self.wake()

    def front_request(self, name: str, status: int, seconds: float, ended_at: float) -> None:
        """A request the nginx front sent straight to a replica, told by its access log (front/access_log.py):
        counted as this server's proxy counts its own, and written down for the autoscaler as :meth:`touch` does.
        Blocking (a read when the route is not cached, a write when due): call from the access log's thread. A
        name of no live service (deleted meanwhile, or a forged line) only adds to ``front_unknown``: it gets no
        traffic entry, so that made-up names cannot grow memory."""
        try:
            route = self.route(name)
        except ServiceNotFound:
            self.front_unknown += 1
            return
        self.traffic.observed(name, status, seconds, ended_at)
        if self.touch_due(route):
            self.touch(route)

    # -- launching a replica ----------------------------------------------------------------

    def launch_env(self, job: JobInfo, attempt: AttemptInfo) -> dict[str, str]:
        """What a service replica is told when launched: the port to listen on (its own, free on its node,
        unless the spec fixes one), recorded as the replica's address first, with the attempt's token (sealed: its
        launcher reads it as a secret, :meth:`token_env`). {} for other jobs."""
        service_id = job.spec.env_vars.get(envvars.SERVICE)
        if service_id is None:
            return {}
        try:
            row = self.services.find(service_id)
        except ServiceNotFound:
            return {}
        # the service's own replica, as its loop made it: trainyard's label, which no user's job may carry. A job
        # naming the service in its own env_vars must not become a replica of it and take its traffic
        if job.spec.labels.get(own_label("service")) != row["name"] or service_id != row["id"]:
            log.warning("job %s names service %s in its environment but is not its replica: ignored", job.id,
                        service_id)
            return {}
        host, port = self.engine.rendezvous(attempt)
        port = row["spec"].service.port or port
        version = int(job.spec.env_vars.get(envvars.SERVICE_VERSION, "0"))
        token = self.tokens.for_launch(attempt.id, self.services.replica_token(job.id))
        self.services.add_replica(service_id, job.id, version, address=f"{host}:{port}", ready=False, token=token)
        self.wake()
        return {envvars.SERVICE_HOST: host, envvars.SERVICE_PORT: str(port), "PORT": str(port)}

    def token_env(self, job_id: str) -> dict[str, str]:
        """The token a replica's launcher reads with its secrets (launch.secrets), {} for other jobs: only a
        replica that :meth:`launch_env` recorded (trainyard's label, which no user's job may carry) has one."""
        token = self.tokens.token(self.services.replica_token(job_id))
        return {envvars.SERVICE_TOKEN: token} if token else {}


def _initial(spec: ServiceSpec) -> int:
    if spec.fixed:
        return spec.service.replicas or 0
    return spec.service.autoscale.min  # type: ignore[union-attr]


def _invalid(field: str, message: str) -> InvalidSpec:
    return InvalidSpec(errors=[{"field": field, "line": None, "where": field, "message": message}])


def _node(job: JobInfo) -> str | None:
    live = [a for a in job.attempts if not a.status.is_terminal()] or job.attempts
    if not live:
        return None
    nodes = dict.fromkeys(r.node for r in live[-1].replicas)
    return ",".join(nodes) or live[-1].node
