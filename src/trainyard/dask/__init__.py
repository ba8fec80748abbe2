"""Dask clusters from Python, run as trainyard jobs::

    from trainyard.dask import new_cluster

    with new_cluster(workers=2, worker_memory="2Gi") as cluster:
        client = cluster.get_client()          # a distributed.Client
        print(client.submit(sum, [1, 2]).result())
        cluster.scale(4)
        cluster.adapt(minimum=1, maximum=10)
    # closed: every worker and the scheduler have stopped

Inside a trainyard job (or notebook job) the cluster is tied to that job and ends
with it even if ``close()`` is never called. Its scheduler and workers speak mutual
TLS with certificates of their own: ``get_client()`` (or ``security()``, for a
``distributed.Client`` made by hand) fetches the client's from the server.
"""

from __future__ import annotations

import os
import time
from typing import Any

from trainyard import envvars
from trainyard.errors import TrainyardError
from trainyard.sdk.clusters import Clusters, cluster_spec
from trainyard.spec.cluster import ClusterInfo, ClusterStatus

__all__ = ["DaskCluster", "new_cluster"]


class DaskCluster:
    """A handle on one cluster: its Dask client, scaling, and closing."""

    def __init__(self, clusters: Clusters, info: ClusterInfo, owns_client: Any = None) -> None:
        self._clusters = clusters
        self.info = info
        self._owned = owns_client  # the trainyard Client made for this cluster, closed with it
        self._dask_clients: list[Any] = []

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def scheduler_address(self) -> str | None:
        return self.info.address

    @property
    def dashboard_link(self) -> str | None:
        return self._clusters.http.server + self.info.dashboard if self.info.dashboard else None

    def dashboard_forward(self, port: int = 0, start: bool = True):  # noqa: ANN201
        """The dashboard on a port of this machine, through the trainyard server, live plots included
        (:mod:`trainyard.sdk.dashboard_port`); its ``url`` holds the key that opens it. Started in a thread unless
        ``start`` is False (then ``serve()`` answers in the foreground); ``stop()`` ends it."""
        import threading

        from trainyard.sdk.dashboard_port import forward_for

        forward = forward_for(self._clusters.http, self.info, port)
        if start:
            threading.Thread(target=forward.serve, name="trainyard-dashboard", daemon=True).start()
        return forward

    def refresh(self) -> ClusterInfo:
        self.info = self._clusters.get(self.id)
        return self.info

    def security(self):  # noqa: ANN201
        """The ``distributed.security.Security`` this cluster's scheduler asks of a client (None where the
        cluster, made before clusters had TLS, speaks plain TCP). Kept in memory: never written to a file."""
        if not (self.info.address or "").startswith("tls://"):
            return None
        return self._clusters.tls(self.id).security()

    def get_client(self, **kwargs: Any):  # noqa: ANN201
        """A ``distributed.Client`` connected to this cluster's scheduler."""
        from distributed import Client

        client = Client(self.info.address, **{"timeout": "60s", "security": self.security(), **kwargs})
        self._dask_clients.append(client)
        return client

    def scale(self, n: int) -> ClusterInfo:
        """Exactly ``n`` workers (turns adaptive scaling off)."""
        self.info = self._clusters.scale(self.id, n)
        return self.info

    def adapt(self, minimum: int = 0, maximum: int = 10) -> ClusterInfo:
        """As many workers as Dask's adaptive target asks for, within ``[minimum, maximum]``."""
        self.info = self._clusters.adapt(self.id, minimum, maximum)
        return self.info

    def wait_for_workers(self, n: int, timeout: float = 120.0) -> None:
        """Block until ``n`` workers have joined the Dask scheduler."""
        client = self._dask_clients[0] if self._dask_clients else self.get_client()
        client.wait_for_workers(n, timeout=timeout)

    def close(self, timeout: float = 60.0) -> ClusterInfo:
        """Close the Dask clients made here, delete the cluster and wait until none of its jobs runs."""
        for c in self._dask_clients:
            try:
                c.close()
            except Exception:  # a client of a scheduler already gone: nothing left to close
                pass
        self._dask_clients.clear()
        self.info = self._clusters.delete(self.id)
        self.info = self._clusters.wait(self.id, until=(), timeout=timeout)
        if self._owned is not None:
            self._owned.close()
        return self.info

    def __enter__(self) -> "DaskCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DaskCluster({self.id!r}, {self.info.status.value}, workers={self.info.workers})"


def new_cluster(workers: int = 2, *, worker_cpu: float | str = 1, worker_memory: str | int | None = None,
                worker_gpu: int = 0, worker_gpu_type: str | None = None, pip: list[str] | None = None,
                queue: str | None = None, idle_timeout: str | float | None = "30m", name: str | None = None,
                minimum: int | None = None, maximum: int | None = None, client: Any = None,
                wait: float | None = 300.0, secrets: list[str] | dict[str, str] | None = None,
                scheduler_memory: str | int | None = None) -> DaskCluster:
    """Start a Dask cluster as trainyard jobs and wait (``wait`` seconds) until its scheduler runs.

    ``minimum``/``maximum``: start adaptive. ``client``: a :class:`trainyard.Client` (default: one for
    ``TRAINYARD_SERVER`` or the local server). ``secrets``: the team's secrets in each worker's environment,
    as a job's. ``scheduler_memory``: the scheduler's (a queue with a memory quota needs it). Inside a job, the
    cluster ends with that job.
    """
    owned = None
    if client is None:
        from trainyard.sdk.client import Client

        client = owned = Client()
    spec = cluster_spec(workers=workers, worker_cpu=worker_cpu, worker_memory=worker_memory, worker_gpu=worker_gpu,
                        worker_gpu_type=worker_gpu_type, pip=pip, queue=queue, name=name,
                        scheduler_memory=scheduler_memory,
                        idle_timeout=0 if idle_timeout is None else idle_timeout,
                        owner_job=os.environ.get(envvars.JOB_ID) or None, adapt_min=minimum, adapt_max=maximum,
                        secrets=secrets or {})
    clusters = Clusters(client.http)
    info = clusters.create(spec)
    cluster = DaskCluster(clusters, info, owns_client=owned)
    if wait:
        deadline = time.monotonic() + wait
        info = clusters.wait(info.id, timeout=wait)
        while info.status == ClusterStatus.RUNNING and not info.address and time.monotonic() < deadline:
            time.sleep(0.1)
            info = clusters.get(info.id)
        cluster.info = info
        if info.status.is_terminal():
            raise TrainyardError(f"cluster {info.id} {info.status.value}: {info.reason}", cluster_id=info.id)
    return cluster
