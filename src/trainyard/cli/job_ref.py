"""A job (or pipeline run) named on the command line by its id or by its name, as ``docker logs NAME`` takes a
container's.

Names are not unique here (a job is rerun, a script submits the same name daily): a name stands for the newest
job of that name the caller may see, and the command says which when there are more. An argument shaped as an id
is one, without a request.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

JOB_ID = re.compile(r"j-[0-9a-f]{10}")


def named_id(source: Any, ref: str) -> str:
    """The id ``ref`` names, asked of ``source`` (:func:`trainyard.cli.reading.read`'s) when it is a name."""
    if JOB_ID.fullmatch(ref):
        return ref
    from trainyard.errors import JobNotFound

    found = source.jobs(name=ref, limit=2)["items"]
    if not found:
        raise JobNotFound(f"no such job: {ref} (neither a job id nor the name of a job you may see)")
    if len(found) > 1:
        _say_newest(ref, found[0]["id"], "job", f"trainyard ls --name {shlex.quote(ref)}")
    return found[0]["id"]


def job_id_of(ref: str) -> str:
    """:func:`named_id` for a command that goes on with the full SDK."""
    if JOB_ID.fullmatch(ref):
        return ref
    from trainyard.cli.reading import read

    return read(lambda source: named_id(source, ref))


RUN_ID = re.compile(r"p-[0-9a-f]{10}")


def run_id_of(pipelines: Any, ref: str) -> str:
    """A pipeline run's id from its id or its name (the newest run of that name), as :func:`named_id` for jobs;
    ``pipelines`` is the SDK's :class:`trainyard.sdk.pipelines.Pipelines`."""
    if RUN_ID.fullmatch(ref):
        return ref
    from trainyard.errors import PipelineRunNotFound

    found = pipelines.list(name=ref, limit=2).items
    if not found:
        raise PipelineRunNotFound(f"no such pipeline run: {ref} (neither a run id nor the name of a run you may see)",
                                  run_id=ref)
    if len(found) > 1:
        _say_newest(ref, found[0].id, "run", f"trainyard pipeline ls --name {shlex.quote(ref)}")
    return found[0].id


def _say_newest(ref: str, chosen: str, kind: str, lists: str) -> None:
    from trainyard.cli.output import err_console

    err_console.print(f"{ref}: the newest {kind} of that name, {chosen} (`{lists}` lists them)", markup=False,
                      highlight=False)
