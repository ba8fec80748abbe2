"""Jobs, their metrics, resource use and logs read as the API's JSON, without httpx or the spec models.

For ``trainyard ls``, ``show`` and ``logs``: commands that live a few hundred milliseconds, most of it
importing httpx and building the pydantic models of :class:`~trainyard.sdk.client.Client` (about
100 ms before the first byte is sent), to print a table that only reads a few fields. Here a read is
one GET over the SDK's own kept plain connection (:mod:`trainyard.sdk.plain_http`) and ``json.loads``.

Only where the full SDK would do nothing more: a server already known and running
(:func:`~trainyard.sdk.known.known_server`), reached over plain HTTP on this machine
(:func:`~trainyard.sdk.plain_http.plain_http_for`). A request the connection declines or that cannot
be sent, an answer other than 200 or an error with a ``code``, or JSON that does not parse raises
:class:`~trainyard.sdk.known.NotQuick`: the caller reads again through the full SDK, which follows a
moved leader, starts a local server, and names any failure as it always did. Every read is a GET, so
doing it twice is doing it once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

from trainyard import errors
from trainyard.sdk.known import NotQuick, known_server
from trainyard.sdk.plain_http import PlainConnection, plain_http_for

TIMEOUT = 30.0  # the SDK's default: a slow server gets as long here as it does there
_PLAIN_ID = re.compile(r"[A-Za-z0-9._~-]+")  # what goes into a path as it is, whoever sends it


def _id(job_id: str) -> str:
    """``job_id`` as the full SDK puts it in a path; any other id is left to httpx, to send as it always did."""
    if not _PLAIN_ID.fullmatch(job_id):
        raise NotQuick("an id that httpx would quote")
    return job_id


class Reads:
    """GETs to the known server, answered as the API's JSON (see the module's doc)."""

    def __init__(self) -> None:
        url, token = known_server()
        if not plain_http_for(url):
            raise NotQuick("not plain HTTP on this machine: httpx's (TLS, proxies, a round trip over a network)")
        self.server = url
        self._conn = PlainConnection(url, TIMEOUT)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    def close(self) -> None:
        self._conn.close()

    def get(self, path: str, query: dict[str, Any] | None = None) -> Any:
        """The JSON of a 200 answer; the typed error of an answer with a ``code``; else :class:`NotQuick`."""
        target = path + (f"?{urlencode(query, doseq=True)}" if query else "")
        answer = self._conn.call("GET", target, None, self._headers, idempotent=True)
        if answer is None:
            raise NotQuick("not sent here: the full SDK sends it")
        status, body = answer
        try:
            data = json.loads(body)
        except ValueError:
            raise NotQuick(f"an answer that is not JSON (HTTP {status})") from None
        if status >= 400 and isinstance(data, dict) and "code" in data:
            raise errors.from_dict(data)  # as the full SDK raises it (trainyard.sdk.http.error_for)
        if status != 200:
            raise NotQuick(f"HTTP {status}: the full SDK says what it means")
        return data

    def job(self, job_id: str) -> dict[str, Any]:
        return self.get(f"/api/v1/jobs/{_id(job_id)}")

    def jobs(self, *, status: list[str] | None = None, name: str | None = None, queue: str | None = None,
             limit: int = 50, cursor: str | None = None, since: float | None = None,
             until: float | None = None, labels: dict[str, str] | str | list[str] | None = None,
             sort: str | None = None, offset: int | None = None) -> dict[str, Any]:
        """One page of jobs (``items``, ``next_cursor``, ``more``), with :meth:`Client.jobs`'s filters."""
        query = {"status": status or [], "name": name, "queue": queue, "limit": limit, "cursor": cursor,
                 "since": since, "until": until, "label": label_query(labels), "sort": sort, "offset": offset}
        return self.get("/api/v1/jobs", {k: v for k, v in query.items() if v not in (None, [])})

    def metrics(self, job_id: str) -> list[dict[str, Any]]:
        """What the job logged (its system/… samples are :meth:`usage`'s)."""
        return self.get(f"/api/v1/jobs/{_id(job_id)}/metrics", {"system": "false"})

    def usage(self, job_id: str) -> list[dict[str, Any]]:
        return self.get(f"/api/v1/jobs/{_id(job_id)}/usage")

    def logs(self, job_id: str, *, follow: bool = False, attempt: int | None = None,
             replica: int | None = None, tail: int | None = None) -> Iterator[SimpleNamespace]:
        """Log chunks (``attempt``, ``replica``, ``data``) in order, page after page, as they are now;
        following them (server-sent events, reconnecting after a restart) is the full SDK's.

        Once the first page is read, a page this connection cannot get is a lost server: the chunks
        before it have been handed on, and reading them all again elsewhere would repeat them."""
        if follow or tail is not None:
            raise NotQuick("following a log, or its tail, is the full SDK's")
        path = f"/api/v1/jobs/{_id(job_id)}/logs"
        query = log_query(attempt, replica)

        def page(after: int) -> dict[str, Any]:
            try:
                return self.get(path, {**query, "after": after})
            except NotQuick as e:
                if after == 0:  # nothing handed on yet: the full SDK reads it all
                    raise
                raise errors.ServerUnavailable(f"cannot reach the trainyard server at {self.server}: {e}") from None

        return (SimpleNamespace(**c) for c in log_pages(page))


def label_query(labels: dict[str, str] | str | list[str] | None) -> list[str]:
    """A listing's ``labels`` filter as the API's repeated ``label``: a dict's pairs each ``key=value``; a
    selector (``"stage!=dev,gpu in (a100,h100)"``), or a list of them, as it is."""
    if isinstance(labels, dict):
        return [f"{k}={v}" for k, v in labels.items()]
    return [labels] if isinstance(labels, str) else list(labels or ())


def log_query(attempt: int | None, replica: int | None) -> dict[str, int]:
    return {k: v for k, v in (("attempt", attempt), ("replica", replica)) if v is not None}


def log_pages(page: Callable[[int], dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """A job's log chunks as they are now: ``page(after)`` from 0, each next from the last one's
    ``cursor``, until a page brings none (the full SDK's :meth:`Client.logs` reads them so too)."""
    after = 0
    while True:
        chunks = (got := page(after))["chunks"]
        yield from chunks
        if not chunks:
            return
        after = got["cursor"]
