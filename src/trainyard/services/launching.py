"""From a stored job and a new attempt to what each replica's launcher is told."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from trainyard.artifacts.store import ArtifactStore
from trainyard import envvars
from trainyard.config import ServerSettings
from trainyard.launch.config import LaunchConfig
from trainyard.spec.job import MAX_GRACE
from trainyard.spec.records import AttemptInfo, JobInfo


def distributed_env(job: JobInfo, attempt: AttemptInfo, replica: int, master: tuple[str, int]) -> dict[str, str]:
    """What torchrun (or a Kubeflow PyTorchJob) would set for the processes of one replica.

    ``RANK`` and ``LOCAL_RANK`` are per process: set here for one process per
    replica, and by :mod:`trainyard.launch.group` when there are more.
    """
    spec = job.spec
    procs = spec.procs_per_replica
    env = {
        "MASTER_ADDR": master[0], "MASTER_PORT": str(master[1]),
        "WORLD_SIZE": str(spec.replicas * procs), "NODE_RANK": str(replica), "GROUP_RANK": str(replica),
        "LOCAL_WORLD_SIZE": str(procs), "RANK": str(replica * procs), "LOCAL_RANK": "0",
        # unique per attempt, so two jobs (or two attempts of one) never meet at a rendezvous
        "TORCHELASTIC_RUN_ID": attempt.id, envvars.RENDEZVOUS_ID: attempt.id,
        envvars.REPLICA: str(replica),
    }
    return env


def launch_configs(
    job: JobInfo, attempt: AttemptInfo, *, token: str, settings: ServerSettings, artifacts: ArtifactStore,
    server_url: str, master: tuple[str, int] | None = None, run_as: dict | None = None,
) -> list[LaunchConfig]:
    """What each replica's launcher is told. ``token`` is the attempt's own credential
    (see :mod:`trainyard.auth.tokens`), never the server's token."""
    spec = job.spec
    base_env = {**spec.env_vars, envvars.PARAMS: json.dumps(spec.params)}
    if not (spec.env and spec.env.pip):
        # no env asked: `python` in the command is the server's interpreter, as documented
        base_env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    command = spec.argv()
    if spec.distributed and spec.procs_per_replica > 1:
        # in an image: the image's python3, with trainyard mounted read-only (launch.container)
        python = "python3" if spec.image else sys.executable
        command = [python, "-m", "trainyard.launch.group", str(spec.procs_per_replica), "--", *command]
    # a job's own virtualenv where it has none from `env`: `pip install` in it stays there (launch.scratchenv);
    # "fresh" is for an image run on the host because no container runtime is here
    venv = None
    if not (spec.env and spec.env.pip):
        venv = "fresh" if spec.image and spec.image_fallback == "fresh-venv" else "overlay"
    configs = []
    for r in attempt.replicas:
        env = dict(base_env)
        if spec.distributed and master is not None:
            env.update(distributed_env(job, attempt, r.index, master))
        configs.append(LaunchConfig(
            job_id=job.id,
            attempt_id=attempt.id,
            attempt=attempt.number,
            replica=r.index,
            server=server_url,
            server_ca=str(settings.tls_cert) if settings.tls_cert else None,
            run_as=run_as,
            address_file=str(settings.leader_file),
            token=token,
            command=list(command),
            env=env,
            snapshot=artifacts.snapshot_url(job.snapshot) if job.snapshot else None,
            python_env={"pip": list(spec.env.pip)} if spec.env and spec.env.pip else None,
            inputs=dict(spec.inputs),
            outputs=list(spec.outputs),
            output_url=artifacts.outputs_url(job.id, attempt.number, r.index),
            outputs_max=settings.outputs_max or None,
            pids_max=settings.replica_pids,
            cpu=spec.resources.cpu,
            cpu_limit=settings.cpu_limit,
            replicas=spec.replicas,
            memory_limit=spec.resources.memory,
            timeout=spec.timeout,
            grace_period=min(spec.grace_period, MAX_GRACE),  # a spec stored before the bound has its own
            gpus=list(r.gpus),
            venv=venv,
            sample_every=settings.sample_every,
            secrets=sorted(spec.secrets) or None,  # names only: the launcher reads the values (launch.secrets)
            # a local store has the database's log chunks beside it; a remote one keeps the whole log too
            log_url=artifacts.log_url(job.id, attempt.number, r.index) if artifacts.remote else None,
            storage=settings.storage_options or None,
            # on an object store, the checkpoint dir follows the job to whatever node runs its next attempt
            checkpoint_url=artifacts.checkpoint_url(job.id) if artifacts.remote else None,
            store_url=artifacts.url,  # what is under it the server vetted; other inputs are fetched as the job
            # by a child with the job's environment: always for an account; for the server's own account only when
            # the job brings variables of its own (its credentials may be among them), else the launcher's are its
            inputs_as_job=bool(spec.env_vars or spec.secrets),
        ))
    return configs
