"""Where `ls`, `show` and `logs` read from: the plain reads where they can go, else the full SDK.

Both hand the commands the API's JSON, which :mod:`trainyard.cli.render` prints: the plain reads
(:class:`trainyard.sdk.reads.Reads`) as the server sent it, the full SDK as its models dumped back to
JSON. A read the plain way declines (:class:`~trainyard.sdk.known.NotQuick`: no server known yet, not
plain HTTP on this machine, an answer it leaves to the SDK to name) is read again through the SDK;
the commands print nothing before their reads are done, except `logs`, whose plain reads decline
only before its first chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from trainyard.sdk.known import NotQuick

T = TypeVar("T")


def read(what: Callable[[Any], T], *, plain: bool = True) -> T:
    """``what(source)``, ``source`` the plain reads where ``plain`` and they go, else :class:`SdkReads`."""
    if plain:
        from trainyard.sdk.reads import Reads

        try:
            reads = Reads()
        except NotQuick:
            pass
        else:
            try:
                return what(reads)
            except NotQuick:
                pass
            finally:
                reads.close()
    from trainyard.cli.common import client

    return what(SdkReads(client()))


class SdkReads:
    """The reads of :class:`trainyard.sdk.reads.Reads` through a full SDK client, answered as JSON the same way."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def job(self, job_id: str) -> dict[str, Any]:
        return self.client.get(job_id).model_dump(mode="json")

    def jobs(self, **filters: Any) -> dict[str, Any]:
        page = self.client.jobs(**filters)
        return {"items": [j.model_dump(mode="json") for j in page.items], "next_cursor": page.next_cursor,
                "more": page.more}

    def metrics(self, job_id: str) -> list[dict[str, Any]]:
        return [p.model_dump(mode="json") for p in self.client.metrics(job_id)]

    def usage(self, job_id: str) -> list[dict[str, Any]]:
        return [u.model_dump(mode="json") for u in self.client.monitoring.job_usage(job_id)]

    def logs(self, job_id: str, *, follow: bool = False, attempt: int | None = None,
             replica: int | None = None, tail: int | None = None) -> Iterator[Any]:
        return self.client.logs(job_id, follow=follow, attempt=attempt, replica=replica, tail=tail)
