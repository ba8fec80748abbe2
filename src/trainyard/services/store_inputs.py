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


def check(inputs: dict[str, str], store_url: str, sees: Callable[[str], bool], where: str = "inputs") -> None:
    """InvalidSpec naming ``WHERE.NAME`` for an input under ``store_url`` whose key ``sees`` refuses."""
    for name, url in inputs.items():
        key = under_url(url, store_url)
        if key is not None and not sees(key):
            field = f"{where}.{name}"
            raise InvalidSpec(errors=[{"field": field, "line": None, "where": field, "message": (
                f"{url[:200]!r} is in trainyard's artifact store: an input there must be the outputs of a job you "
                "may see (jobs/ID/ATTEMPT/outputs/…), or of a pipeline run you may see")}])
