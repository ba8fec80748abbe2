"""A handle on one job (``Client.submit`` and ``Client.job`` return one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainyard import errors
from trainyard.spec.records import ArtifactInfo, JobInfo, MetricPoint

if TYPE_CHECKING:
    from trainyard.sdk.client import Client


class Job:
    """A handle on one job. ``status`` asks the server each time it is read."""

    def __init__(self, client: "Client", info: JobInfo) -> None:
        self.client = client
        self.id = info.id
        self.info = info

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.info.name} {self.info.status.value}>"

    def refresh(self) -> JobInfo:
        self.info = self.client.get(self.id)
        return self.info

    @property
    def status(self) -> str:
        return self.refresh().status.value

    def wait(self, timeout: float | None = None, *, check: bool = False) -> JobInfo:
        """Block until the job ends; with ``check``, raise :class:`~trainyard.errors.JobFailed` unless it succeeded."""
        self.info = self.client.wait(self.id, timeout)
        if check and self.info.status.value != "succeeded":
            raise errors.JobFailed(f"job {self.id} {self.info.status.value}: {self.info.reason}", job_id=self.id)
        return self.info

    def logs(self, *, follow: bool = False, attempt: int | None = None,
             replica: int | None = None, tail: int | None = None) -> str | Iterator[str]:
        """All logs as one string (``tail``: its last lines); with ``follow``, an iterator of text as it comes.

        For a job of several replicas, pass ``replica`` for one replica's log;
        without it, chunks of all replicas come interleaved as they arrived.
        """
        chunks = (c.data for c in self.client.logs(self.id, follow=follow, attempt=attempt, replica=replica,
                                                   tail=tail))
        return chunks if follow else "".join(chunks)

    def metrics(self, system: bool = False) -> list[MetricPoint]:
        return self.client.metrics(self.id, system)

    def outputs(self, attempt: int | None = None) -> list[ArtifactInfo]:
        """Its final attempt's outputs, or attempt ``attempt``'s (see :meth:`Client.outputs`)."""
        return self.client.outputs(self.id, attempt)

    def download(self, to: str | Path | None = None, attempt: int | None = None) -> Path:
        return self.client.download(self.id, to, attempt)

    def label(self, labels: dict[str, str | None], **kw: Any) -> dict[str, str]:
        """Set or remove (``None``) its labels (see :meth:`Client.label`); its labels after."""
        return self.client.label(self.id, labels, **kw)

    def stacks(self, **kw: Any) -> list:
        """Where the running command is: each replica's Python stacks (see :meth:`Client.stacks`)."""
        return self.client.stacks(self.id, **kw)

    def exec(self, argv: list[str], **kw: Any):  # noqa: ANN201
        """Run a command beside the running one (see :meth:`Client.exec`)."""
        return self.client.exec(self.id, argv, **kw)

    def cancel(self) -> JobInfo:
        self.info = self.client.cancel(self.id)
        return self.info

    def delete(self) -> None:
        """The ended job with its records and files (:meth:`Client.delete`)."""
        self.client.delete(self.id)

