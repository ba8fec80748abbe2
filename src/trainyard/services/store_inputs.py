"""A job's inputs that name trainyard's own artifact store. The launcher fetches them with the store's credentials,
which no job holds (a job run as an OS account gets none), so the server checks them as it checks a download:
an input there must be the outputs of a job the caller may see. Snapshots and other teams' outputs are not."""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Callable

from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.errors import InvalidSpec, JobNotFound

if TYPE_CHECKING:
    from trainyard.services.jobs import JobService

_OUTPUTS = re.compile(r"jobs/([A-Za-z0-9][A-Za-z0-9._-]*)/\d+/outputs(?:/|$)")
_ALIASES = {"s3a": "s3", "gcs": "gs", "abfss": "abfs", "local": "file"}


def check_for(jobs: "JobService", inputs: dict[str, str], caller: Caller, where: str = "inputs") -> None:
    """:func:`check` for ``caller``, with what ``jobs`` knows of the store and of who sees which job."""
    if not inputs or caller is LOCAL_ADMIN:
        return

    def sees(job_id: str) -> bool:
        try:
            jobs.get(job_id, caller)
        except JobNotFound:
            return False
        return True

    check(inputs, jobs.artifacts.url, sees, where)


def check(inputs: dict[str, str], store_url: str, sees_job: Callable[[str], bool], where: str = "inputs") -> None:
    """InvalidSpec naming ``WHERE.NAME`` for an input under ``store_url`` that is not a seen job's outputs."""
    base = _plain(store_url)
    for name, url in inputs.items():
        found = _plain(url)
        if found != base and not found.startswith(base + "/"):
            continue
        m = _OUTPUTS.match(found[len(base) + 1:])
        if m is None or not sees_job(m.group(1)):
            field = f"{where}.{name}"
            raise InvalidSpec(errors=[{"field": field, "line": None, "where": field, "message": (
                f"{url[:200]!r} is in trainyard's artifact store: an input there must be the outputs of a job you "
                "may see (jobs/ID/ATTEMPT/outputs/…)")}])


def _plain(url: str) -> str:
    """``url`` spelt one way: protocol aliases, ``file://`` as a path, no ``.``, ``..`` or doubled slashes; a path
    relative to the work dir is in no store ("")."""
    protocol, sep, rest = url.partition("://")
    if not sep:
        if not url.startswith("/"):
            return ""
        protocol, rest = "file", url
    protocol = _ALIASES.get(protocol.lower(), protocol.lower())
    return f"{protocol}://{posixpath.normpath('/' + rest).lstrip('/')}"
