"""The job spec of one service replica, and the references a service's inputs may use.

A replica is an ordinary job: the service's command, resources, queue and
environment, with the port given at launch (``$TRAINYARD_SERVICE_PORT``,
``$PORT``, and ``{{port}}`` in the command) and no retry of its own: the
service loop replaces a replica that ended, with backoff.

Inputs may name what trainyard already holds: ``job://JOB_ID[/PATH]`` (the
outputs of the job's succeeded attempt, or one file or folder in them) and
``artifact://ID_OR_DIGEST[/PATH]`` (a pipeline step's artifact). They are
resolved to artifact-store URLs when the service is applied.
"""

from __future__ import annotations

import shlex
from typing import Callable

from trainyard import envvars
from trainyard.artifact_paths import check_artifact_path
from trainyard.errors import InvalidSpec
from trainyard.spec.job import JobSpec, Retry
from trainyard.spec.labels import with_own
from trainyard.spec.params import substitute
from trainyard.spec.service import ServiceSpec
from trainyard.spec.submitted import STORED
from trainyard.status import JobStatus
from trainyard.templates import PORT_REF

PORT_WORD = '"${%s}"' % envvars.SERVICE_PORT


def with_port(command: str | list[str], params: dict) -> str | list[str]:
    """``command`` with ``{{port}}`` made the replica's port, read from its environment when it starts."""
    if isinstance(command, str):
        return PORT_REF.sub(PORT_WORD, command)
    if not any(PORT_REF.search(p) for p in command):
        return command
    # a list runs without a shell: make it one, each word quoted and the port left to the shell
    words = [PORT_WORD.join(shlex.quote(piece) if piece else "" for piece in PORT_REF.split(substitute(p, params)))
             for p in command]
    return "exec " + " ".join(w or "''" for w in words)


def replica_job(service_id: str, spec: ServiceSpec, version: int = 0) -> JobSpec:
    job = spec.job_spec()
    data = job.model_dump()
    data["command"] = with_port(job.command, job.params)
    data["retry"] = Retry(max=0).model_dump()
    data["env_vars"] = {**job.env_vars, envvars.SERVICE: service_id, envvars.SERVICE_VERSION: str(version)}
    data["labels"] = with_own(job.labels, service=spec.name, service_version=str(version))
    return JobSpec.model_validate(data, context=STORED)  # the service's spec was checked when it was applied


def resolve_ref(name: str, value: str, job_outputs: Callable[[str], str], artifact_url: Callable[[str], str]) -> str:
    """``job://`` and ``artifact://`` as artifact-store URLs; any other input as it is.

    ``job_outputs(job_id)`` and ``artifact_url(key)`` raise the lookup's own not-found error."""
    for scheme, lookup in (("job://", job_outputs), ("artifact://", artifact_url)):
        if value.startswith(scheme):
            key, _, path = value.removeprefix(scheme).partition("/")
            if not key:
                raise _bad(name, f"{value!r}: write {scheme}ID or {scheme}ID/PATH")
            base = lookup(key)
            if not path:
                return base
            try:
                check_artifact_path(path.rstrip("/"))
            except ValueError as e:
                raise _bad(name, f"{value!r}: the path {e}") from None
            return base.rstrip("/") + "/" + path.rstrip("/")
    return value


def succeeded_attempt(job_status: JobStatus, attempts: list[tuple[int, str]], job_id: str, name: str) -> int:
    """The number of the job's attempt that succeeded (whose outputs a service may use)."""
    if job_status != JobStatus.SUCCEEDED:
        raise _bad(name, f"job {job_id} is {job_status.value}: only a succeeded job's outputs can be served")
    return max(n for n, status in attempts if status == JobStatus.SUCCEEDED.value)


def _bad(name: str, message: str) -> InvalidSpec:
    field = f"inputs.{name}"
    return InvalidSpec(errors=[{"field": field, "line": None, "where": field, "message": message}])
