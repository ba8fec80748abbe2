"""A job's inputs that name trainyard's own artifact store. The launcher fetches them with the store's credentials,
which no job holds (a job run as an OS account gets none), so the server checks them as it checks a download:
an input there must be the outputs of a job the caller may see. Snapshots and other teams' outputs are not."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

from trainyard.artifact_paths import under_url
from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.errors import InvalidSpec, JobNotFound, NotFound

if TYPE_CHECKING:
    from trainyard.services.jobs import JobService
    from trainyard.spec.job import JobSpec

_OUTPUTS = re.compile(r"jobs/([A-Za-z0-9][A-Za-z0-9._-]*)/\d+/outputs(?:/|$)")
_RUN = re.compile(r"pipelines/([A-Za-z0-9][A-Za-z0-9._-]*)/")


def check_for(jobs: "JobService", inputs: dict[str, str], caller: Caller, where: str = "inputs") -> None:
    """:func:`check` for ``caller``, with what ``jobs`` knows of the store and of who sees which job and run."""
    if not inputs or caller is LOCAL_ADMIN:
        return

    def sees(key: str) -> bool:
        if (m := _OUTPUTS.match(key)) is not None:
            try:
                jobs.get(m.group(1), caller)
            except JobNotFound:
                return False
            return True
        if (m := _RUN.match(key)) is not None:  # a step's fan-in: a rerun of a step job names it
            from trainyard.store.pipelines import PipelineStore

            try:
                run = PipelineStore(jobs.store).get_run(m.group(1))
            except NotFound:
                return False
            return caller.sees(run.team, run.owner)
        return key.startswith("values/")  # a pipeline's value inputs, stored by their content's digest

    check(inputs, jobs.artifacts.url, sees, where)


def resolved(jobs: "JobService", spec: "JobSpec", caller: Caller) -> "JobSpec":
    """``spec`` with each ``job://ID[/PATH]`` input as the store URL of that job's outputs (its succeeded attempt's),
    which the launcher fetches; InvalidSpec naming ``inputs.NAME`` for a job the caller may not see, one that has
    not succeeded, a bad path, or ``artifact://`` and ``pipeline://`` (a service's and a pipeline's own refs)."""
    from trainyard.services.service_jobs import resolve_ref, succeeded_attempt

    if not any(v.startswith(REFS) for v in spec.inputs.values()):
        return spec

    def outputs(name: str, job_id: str) -> str:
        try:
            job = jobs.get(job_id, caller)
        except JobNotFound:
            raise _bad(name, f"no such job: {job_id}") from None
        number = succeeded_attempt(job.status, [(a.number, a.status.value) for a in job.attempts], job_id, name)
        return jobs.artifacts.outputs_url(job_id, number)

    def no_artifact(name: str) -> str:
        raise _bad(name, f"{spec.inputs[name][:200]!r}: a job takes job://ID[/PATH] (a job's outputs); "
                         "artifact:// and pipeline:// are a service's and a pipeline's inputs")

    inputs = {}
    for name, value in spec.inputs.items():
        if value.startswith("pipeline://"):
            no_artifact(name)
        inputs[name] = resolve_ref(name, value, lambda j, n=name: outputs(n, j), lambda _, n=name: no_artifact(n))
    return spec.model_copy(update={"inputs": inputs})


REFS = ("job://", "artifact://", "pipeline://")


def _bad(name: str, message: str) -> InvalidSpec:
    return InvalidSpec(errors=[{"field": f"inputs.{name}", "line": None, "where": f"inputs.{name}",
                                "message": message}])


def check(inputs: dict[str, str], store_url: str, sees: Callable[[str], bool], where: str = "inputs") -> None:
    """InvalidSpec naming ``WHERE.NAME`` for an input under ``store_url`` whose key ``sees`` refuses."""
    for name, url in inputs.items():
        key = under_url(url, store_url)
        if key is not None and not sees(key):
            field = f"{where}.{name}"
            raise InvalidSpec(errors=[{"field": field, "line": None, "where": field, "message": (
                f"{url[:200]!r} is in trainyard's artifact store: an input there must be the outputs of a job you "
                "may see (jobs/ID/ATTEMPT/outputs/…), or of a pipeline run you may see")}])
