"""The job specs of a Dask cluster: one scheduler job, one job per worker.

They are ordinary jobs in the cluster's queue, so quotas, fair share, placement
and reasons apply to them as to any job. The commands are Dask's own CLIs,
run by ``python`` from the job's environment (the server's interpreter, or the
virtualenv built from the cluster's ``pip`` list, which then gets ``distributed``
at this server's version so client, scheduler and workers speak the same protocol).
They speak it over mutual TLS with the cluster's own certificates (:mod:`trainyard.services.dask_tls`).
"""

from __future__ import annotations

import math
import re
import shlex

from pathlib import Path

from trainyard import envvars
from trainyard.services import dask_tls
from trainyard.spec.cluster import ClusterSpec
from trainyard.spec.job import Env, JobSpec, Retry
from trainyard.spec.labels import with_own
from trainyard.spec.submitted import STORED

DASHBOARD_PREFIX = "/api/v1/clusters/{id}/dashboard"
# the scheduler's dashboard over mutual TLS, with the certificates its prologue writes (dask_dashboard_tls)
DASHBOARD_TLS = " ".join(f"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__{k}={dask_tls.FOLDER}/{f}"
                         for k, f in (("CA_FILE", "ca.pem"), ("CERT", "cert.pem"), ("KEY", "key.pem")))
# a worker the scheduler cannot reach for this long exits: no worker outlives a lost scheduler for long
WORKER_DEATH_TIMEOUT = "60s"


def dask_version() -> str | None:
    try:
        import distributed
    except ImportError:
        return None
    return distributed.__version__


def _env(spec: ClusterSpec) -> Env | None:
    if not spec.pip:
        return None
    named = {re.split(r"[<>=!~\[; ]", p, maxsplit=1)[0].lower() for p in spec.pip}
    extra = [] if named & {"distributed", "dask"} else [f"distributed=={dask_version()}"]
    return Env.model_validate({"pip": [*spec.pip, *extra]}, context=STORED)  # checked with the cluster's spec


def scheduler_job(cluster_id: str, spec: ClusterSpec) -> JobSpec:
    """The Dask scheduler: host and ports are given at launch (see ClusterService.launch_env), its TLS identity
    by its launcher (as its secrets). Its dashboard takes mutual TLS too (the server proxies it)."""
    h, p, d = (f'"${v}"' for v in (envvars.DASK_HOST, envvars.DASK_PORT, envvars.DASK_DASHBOARD_PORT))
    preload = (Path(__file__).parent / "dask_dashboard_tls.py").read_text()
    command = (dask_tls.shell_prologue() + f"export {DASHBOARD_TLS} && "
               "exec python -m distributed.cli.dask_scheduler --protocol tls "
               f"{' '.join(dask_tls.cli_args())} --host {h} --port {p} --preload {shlex.quote(preload)} "
               f"--dashboard-address {h}:{d} --dashboard-prefix {DASHBOARD_PREFIX.format(id=cluster_id)}")
    return JobSpec(
        name=f"{spec.name}-scheduler", command=command, env=_env(spec), queue=spec.queue,
        resources=spec.scheduler_resources(), retry=Retry(max=0),
        env_vars={envvars.DASK_CLUSTER: cluster_id, envvars.DASK_ROLE: "scheduler"},
        labels=with_own({}, dask_cluster=cluster_id, dask_role="scheduler"),
        # its state (tasks, results) dies with it: stopping it would fail the whole cluster
        preemptible=False,
    )


def worker_job(cluster_id: str, spec: ClusterSpec, address: str) -> JobSpec:
    """One Dask worker (no nanny: the job is the worker, so a lost worker is a job that ended). It listens with
    the scheduler's protocol: TLS, unless the cluster was made before clusters had it (a ``tcp://`` address)."""
    tls = address.startswith("tls://")
    args = ["exec", "python", "-m", "distributed.cli.dask_worker", address, *(dask_tls.cli_args() if tls else ()),
            "--no-nanny",
            "--nthreads", str(max(1, math.ceil(spec.worker_cpu))), "--death-timeout", WORKER_DEATH_TIMEOUT]
    if spec.worker_memory:
        args += ["--memory-limit", str(spec.worker_memory)]
    if spec.worker_gpu:
        args += ["--resources", f"GPU={spec.worker_gpu}"]
    command = ((dask_tls.shell_prologue() if tls else "") + " ".join(shlex.quote(a) for a in args)
               + f' --name "${envvars.JOB_ID}"')
    return JobSpec(
        name=f"{spec.name}-worker", command=command, env=_env(spec), queue=spec.queue,
        resources=spec.worker_resources(), retry=Retry(max=0),  # a lost worker is replaced by a new job
        env_vars={envvars.DASK_CLUSTER: cluster_id, envvars.DASK_ROLE: "worker"}, secrets=spec.secrets,
        labels=with_own({}, dask_cluster=cluster_id, dask_role="worker"),
    )
