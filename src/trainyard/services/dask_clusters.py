"""Dask clusters on request: create, look up, scale, adapt, delete.

A cluster is a thin layer over jobs (see :mod:`trainyard.services.dask_jobs`);
what keeps its workers at the wanted number, asks Dask for its adaptive target
and ends idle or orphaned clusters is the leader's loop in
:mod:`trainyard.services.dask_loop`. Requests only write what is wanted and wake it.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from trainyard import envvars
from trainyard.auth.permissions import LOCAL_ADMIN, Action, Caller, visible
from trainyard.engines.base import Engine
from trainyard.errors import Conflict, Forbidden, JobNotFound, Unschedulable, Unsupported
from trainyard.services import dask_jobs, dask_tls
from trainyard.services.secret_box import SecretBox
from trainyard.services.jobs import JobService
from trainyard.spec.paging import Page, Paging
from trainyard.spec.cluster import AdaptRequest, ClusterInfo, ClusterSpec, ClusterStatus, ClusterTLS, ClusterWorker
from trainyard.spec.labels import own_label
from trainyard.spec.records import AttemptInfo, JobInfo
from trainyard.status import JobStatus
from trainyard.store import Store
from trainyard.store.clusters import ClusterRow, ClusterStore, new_cluster_id

log = logging.getLogger(__name__)


class DaskClusterService:
    def __init__(self, store: Store, jobs: JobService, engine: Engine, box: SecretBox,
                 wake: Callable[[], None] = lambda: None) -> None:
        self.clusters = ClusterStore(store)
        self.box = box  # seals each cluster's TLS identity in the database
        self.store = store
        self.jobs = jobs
        self.engine = engine
        self.wake = wake  # the cluster loop (bound by the platform)
        self.worker_addresses: dict[str, dict[str, str]] = {}  # cluster -> worker job -> Dask address (last probe)
        self.securities: dict[str, Any] = {}  # cluster -> the loop's client credentials (opened once)
        # the Unix account an owner's workers run as, if any (bound by the platform to IdentityService.run_as)
        self.runs_as: Callable[[str | None], dict | None] = lambda owner: None

    # -- requests -------------------------------------------------------------

    def create(self, spec: ClusterSpec, caller: Caller = LOCAL_ADMIN) -> ClusterInfo:
        """Check everything first (Dask here, queue, room for one worker and the scheduler), then store
        the cluster and submit its scheduler job; workers follow once the scheduler is placed. The
        cluster and its jobs belong to the caller, in the team its queue gives them."""
        if dask_jobs.dask_version() is None:
            raise Unsupported("this server has no Dask: install trainyard[dask] where the server runs")
        team = self.jobs.team_for(caller, spec.queue)
        self.jobs.check_secrets(spec.secrets, team)
        if spec.owner_job is not None:
            owner = self.jobs.get(spec.owner_job, caller)  # raises JobNotFound: the field names the job
            if owner.status.is_terminal():
                raise Conflict(f"owner_job {spec.owner_job} has already ended", owner_job=spec.owner_job)
        for what, job in (("scheduler", dask_jobs.scheduler_job("c-check", spec)),
                          ("worker", dask_jobs.worker_job("c-check", spec, "tcp://check:1"))):
            self.engine.validate(job)
            self.jobs.check_priority(caller, job)  # normal: above a queue's max_priority of low, refused here
            self.jobs.check_exec(job, team)
            if (problem := self.jobs.placement_problem(job)) is not None:
                raise Unschedulable(f"{what}_{problem[0].removeprefix('resources.')}: {problem[1]}",
                                    field=f"{what}_{problem[0].removeprefix('resources.')}")
        cluster_id = new_cluster_id()
        # its own CA and certificates: its Dask accepts no peer without one (any job on the node reaches its port)
        sealed = self.box.seal(dask_tls.dumps(dask_tls.make(cluster_id)))
        cluster_id = self.clusters.create(spec, owner=caller.user, team=team, tls=sealed, cluster_id=cluster_id)
        job = self.jobs.submit(dask_jobs.scheduler_job(cluster_id, spec), on_behalf=(caller.user, team))
        self.jobs.audit.record(caller, "cluster.create", cluster_id, name=spec.name, queue=spec.queue, team=team)
        self.clusters.set(cluster_id, scheduler_job=job.id)
        self.wake()
        return self.get(cluster_id)

    def scale(self, key: str, workers: int, caller: Caller = LOCAL_ADMIN) -> ClusterInfo:
        """A fixed number of workers (adaptive scaling, if on, is turned off)."""
        row = self._live(key, caller)
        self.clusters.set(row["id"], workers=workers, adapt_min=None, adapt_max=None)
        self.jobs.audit.record(caller, "cluster.scale", row["id"], workers=workers)
        self.wake()
        return self.get(row["id"])

    def adapt(self, key: str, req: AdaptRequest, caller: Caller = LOCAL_ADMIN) -> ClusterInfo:
        """Let Dask's adaptive target decide, within ``[minimum, maximum]``."""
        row = self._live(key, caller)
        workers = max(req.minimum, min(row["workers"], req.maximum))
        self.clusters.set(row["id"], workers=workers, adapt_min=req.minimum, adapt_max=req.maximum)
        self.jobs.audit.record(caller, "cluster.adapt", row["id"], minimum=req.minimum, maximum=req.maximum)
        self.wake()
        return self.get(row["id"])

    def delete(self, key: str, caller: Caller = LOCAL_ADMIN, reason: str = "deleted") -> ClusterInfo:
        """Stop every job of the cluster; it is ``stopped`` once none runs any more."""
        row = self._changeable(key, caller)
        self.jobs.audit.record(caller, "cluster.delete", row["id"])
        if not row["status"].is_terminal():
            self.clusters.move(row["id"], ClusterStatus.STOPPING, reason=reason)
            self.wake()
        return self.get(row["id"])

    def _changeable(self, key: str, caller: Caller) -> ClusterRow:
        """The cluster, if the caller may change it (as they may cancel its jobs)."""
        row = self.clusters.find(key, visible(caller))
        if not caller.may(Action.CANCEL_OWN, row["team"], row["owner"]):
            raise Forbidden(f"you may change only your own clusters; {row['id']} is {row['owner']}'s",
                            cluster_id=row["id"])
        return row

    def _live(self, key: str, caller: Caller) -> ClusterRow:
        row = self._changeable(key, caller)
        if row["status"] not in (ClusterStatus.PENDING, ClusterStatus.RUNNING):
            raise Conflict(f"cluster {row['id']} is {row['status'].value}", cluster_id=row["id"])
        return row

    # -- looking up -------------------------------------------------------------

    def get(self, key: str, caller: Caller = LOCAL_ADMIN) -> ClusterInfo:
        return self.info(self.clusters.find(key, visible(caller)))

    def page(self, include_ended: bool = False, caller: Caller = LOCAL_ADMIN,
             paging: Paging = Paging()) -> Page[ClusterInfo]:
        """One page of what the caller may see, newest first, and the cursor of the next."""
        rows, cursor = self.clusters.page(include_ended, visible(caller), paging)
        status = self.store.job_statuses([j for r in rows for j in r["worker_jobs"]])  # one query for the page
        items = [self.info(r, workers=False, running=sum(status.get(j) == JobStatus.RUNNING
                                                         for j in r["worker_jobs"])) for r in rows]
        return Page[ClusterInfo](items=items, next_cursor=cursor)

    def info(self, row: ClusterRow, workers: bool = True, running: int = 0) -> ClusterInfo:
        """The cluster with its worker jobs, or (``workers`` False, for lists) with ``running``, their count."""
        seen = self.worker_addresses.get(row["id"], {})
        scheduler_node = None
        worker_jobs: list[ClusterWorker] = []
        if workers:
            if row["scheduler_job"] and (scheduler := self._job(row["scheduler_job"])) is not None:
                scheduler_node = _node(scheduler)
            for job_id in row["worker_jobs"]:
                if (j := self._job(job_id)) is None:  # an ended cluster's job, deleted since (trainyard rm, retention)
                    worker_jobs.append(ClusterWorker(job_id=job_id, status="deleted"))
                    continue
                worker_jobs.append(ClusterWorker(job_id=j.id, status=j.status.value, node=_node(j),
                                                 reason=j.reason, address=seen.get(j.id)))
        fields: dict[str, Any] = {k: row[k] for k in ("id", "name", "status", "reason", "queue", "spec", "workers",
                                                      "adapt_min", "adapt_max", "scheduler_job", "address",
                                                      "owner_job", "owner", "team", "created_at", "updated_at", "ended_at")}
        dashboard = dask_jobs.DASHBOARD_PREFIX.format(id=row["id"]) + "/status" if row["dashboard"] else None
        if workers:
            running = sum(w.status == JobStatus.RUNNING.value for w in worker_jobs)
        return ClusterInfo(**fields, scheduler_node=scheduler_node, dashboard=dashboard, worker_jobs=worker_jobs,
                           workers_running=running)

    def _job(self, job_id: str) -> JobInfo | None:
        try:
            return self.store.get_job(job_id)
        except JobNotFound:
            return None

    def dashboard_target(self, cluster_id: str, caller: Caller = LOCAL_ADMIN) -> tuple[str, Any]:
        """``https://HOST:PORT`` of a live cluster's Dask dashboard and the server's client TLS context for it, for
        the server's proxy (``http://`` and None for a cluster whose scheduler was made before dashboards had it)."""
        row = self.clusters.find(cluster_id, visible(caller))
        if row["status"].is_terminal() or not row["dashboard"]:
            raise Conflict(f"cluster {cluster_id} has no dashboard now ({row['status'].value})", cluster_id=cluster_id)
        if not row["dashboard"].startswith("https://"):
            return "http://" + row["dashboard"], None
        return row["dashboard"], self.security(row).get_connection_args("client")["ssl_context"]

    # -- its TLS identity -----------------------------------------------------------

    def keys(self, row: ClusterRow) -> dask_tls.ClusterKeys | None:
        """The cluster's CA and certificates; None for one made before clusters had them (plain TCP)."""
        if not row.get("tls"):
            return None
        return dask_tls.loads(self.box.open(row["tls"], f"the TLS identity of cluster {row['id']}"))

    def security(self, row: ClusterRow) -> Any:
        """The server's own client credentials for the cluster (a ``distributed.security.Security``), None where it
        speaks plain TCP."""
        if row["id"] not in self.securities:
            keys = self.keys(row)
            self.securities[row["id"]] = keys.client().security() if keys is not None else None
        return self.securities[row["id"]]

    def client_tls(self, key: str, caller: Caller = LOCAL_ADMIN) -> ClusterTLS:
        """A client's credentials for the cluster's scheduler: a client runs code on its workers, so they are for
        those who may act on the cluster (its owner, the team's maintainers, admins; not its viewers), and where
        its workers run as the owner's Unix account, for the owner and admins alone. Each read is audited."""
        row = self.clusters.find(key, visible(caller))
        if not caller.may(Action.CANCEL_OWN, row["team"], row["owner"]):
            raise Forbidden(f"a client of cluster {row['id']} runs code on its workers: only {row['owner']}, the "
                            "team's maintainers or an admin may connect", cluster_id=row["id"])
        if not caller.admin and caller.user != row["owner"] and (account := self.runs_as(row["owner"])):
            raise Forbidden(f"cluster {row['id']}'s workers run as {row['owner']}'s Unix account {account['name']}: "
                            f"only {row['owner']} or an admin may connect", cluster_id=row["id"])
        keys = self.keys(row)
        if keys is None:
            raise Conflict(f"cluster {row['id']} was made without TLS: its scheduler takes plain TCP",
                           cluster_id=row["id"])
        self.jobs.audit.record(caller, "cluster.tls", row["id"])
        return keys.client()

    def tls_env(self, job_id: str) -> dict[str, str]:
        """The PEMs a cluster's scheduler or worker job is given with its secrets (launch.secrets), {} for other
        jobs: only trainyard's labels make a job the cluster's, and no user's job may carry them."""
        job = self._job(job_id)
        if job is None or (cluster_id := _cluster_of(job)) is None:
            return {}
        keys = self.keys(self.clusters.get(cluster_id))
        return keys.node_env() if keys is not None else {}

    def tls_vars(self, job: JobInfo) -> list[str]:
        """The variables :meth:`tls_env` will give this job, so its launcher asks for them (as secrets)."""
        return [dask_tls.CA_VAR, dask_tls.CERT_VAR, dask_tls.KEY_VAR] if _cluster_of(job) else []

    # -- launching its scheduler -------------------------------------------------

    def launch_env(self, job: JobInfo, attempt: AttemptInfo) -> dict[str, str]:
        """What a cluster's scheduler job is told when launched: where to listen (its node's address
        and ports free there, chosen now). Recorded first, so workers know where to go; {} for other jobs."""
        env = job.spec.env_vars
        if env.get(envvars.DASK_ROLE) != "scheduler" or envvars.DASK_CLUSTER not in env:
            return {}
        cluster_id = env[envvars.DASK_CLUSTER]
        labels = job.spec.labels
        # the cluster's own scheduler, as it was submitted: trainyard's labels, which no user's job may carry. A job
        # naming a cluster in its own env_vars must not become its scheduler, which its workers and clients then reach
        if labels.get(own_label("dask_cluster")) != cluster_id or labels.get(own_label("dask_role")) != "scheduler":
            log.warning("job %s names cluster %s in its environment but is not its scheduler: ignored", job.id,
                        cluster_id)
            return {}
        host, port = self.engine.rendezvous(attempt)
        _, dashboard = self.engine.rendezvous(attempt)
        # tls: the scheduler's command was made with it (dask_jobs); tcp only for a cluster made before that
        row = self.clusters.get(cluster_id)
        scheme = "tls" if row.get("tls") else "tcp"
        # its dashboard over TLS where its command says so (dask_jobs.DASHBOARD_TLS), not for one made before that
        web = "https://" if dask_jobs.DASHBOARD_TLS in job.spec.command else ""
        self.clusters.set(cluster_id, address=f"{scheme}://{host}:{port}", dashboard=f"{web}{host}:{dashboard}")
        self.wake()
        return {envvars.DASK_HOST: host, envvars.DASK_PORT: str(port), envvars.DASK_DASHBOARD_PORT: str(dashboard)}


def _cluster_of(job: JobInfo) -> str | None:
    """The cluster whose scheduler or worker the job is, by the labels only trainyard sets."""
    labels = job.spec.labels
    if labels.get(own_label("dask_role")) not in ("scheduler", "worker"):
        return None
    return labels.get(own_label("dask_cluster")) or None


def _node(job: JobInfo) -> str | None:
    live = [a for a in job.attempts if not a.status.is_terminal()] or job.attempts
    if not live:
        return None
    nodes = dict.fromkeys(r.node for r in live[-1].replicas)
    return ",".join(nodes) or live[-1].node
