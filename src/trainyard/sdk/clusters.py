"""Dask clusters over HTTP: ``Client().clusters.create(ClusterSpec(...))``, scale, adapt, delete.

The friendly face is :func:`trainyard.dask.new_cluster`; this is what it and the CLI call.
"""

from __future__ import annotations

import time

from pydantic import ValidationError

from trainyard.sdk import paging
from trainyard import errors
from trainyard.sdk.http import Http
from trainyard.spec.cluster import ClusterInfo, ClusterSpec, ClusterStatus, ClusterTLS
from trainyard.spec.lines import validation_errors


def cluster_spec(**fields: object) -> ClusterSpec:
    """A ClusterSpec from keyword fields, bad ones reported as InvalidSpec naming each field."""
    try:
        return ClusterSpec.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as e:
        raise errors.InvalidSpec(errors=validation_errors(e, {}, "<cluster>")) from None


class Clusters:
    def __init__(self, http: Http) -> None:
        self.http = http

    def create(self, spec: ClusterSpec) -> ClusterInfo:
        resp = self.http.request("POST", "/api/v1/clusters", json=spec.model_dump(mode="json"))
        return ClusterInfo.model_validate_json(resp.content)

    def list(self, include_ended: bool = False, limit: int | None = None) -> list[ClusterInfo]:
        """Clusters, newest first: all of them, or the first ``limit`` (read a page at a time)."""
        return paging.every(self.http, "/api/v1/clusters", ClusterInfo, limit=limit, all=include_ended)

    def page(self, limit: int = paging.LIST_LIMIT, cursor: str | None = None,
             include_ended: bool = False) -> paging.Page[ClusterInfo]:
        """One page of clusters, newest first; its ``next_cursor`` as ``cursor`` gives the next."""
        return paging.page(self.http, "/api/v1/clusters", ClusterInfo, limit=limit, cursor=cursor, all=include_ended)

    def get(self, key: str) -> ClusterInfo:
        return ClusterInfo.model_validate_json(self.http.request("GET", f"/api/v1/clusters/{key}").content)

    def tls(self, key: str) -> ClusterTLS:
        """A client's credentials for the cluster's scheduler (``.security()`` for ``distributed.Client``)."""
        return ClusterTLS.model_validate_json(self.http.request("GET", f"/api/v1/clusters/{key}/tls").content)

    def scale(self, key: str, workers: int) -> ClusterInfo:
        resp = self.http.request("POST", f"/api/v1/clusters/{key}/scale", json={"workers": workers})
        return ClusterInfo.model_validate_json(resp.content)

    def adapt(self, key: str, minimum: int, maximum: int) -> ClusterInfo:
        resp = self.http.request("POST", f"/api/v1/clusters/{key}/adapt", json={"minimum": minimum, "maximum": maximum})
        return ClusterInfo.model_validate_json(resp.content)

    def delete(self, key: str) -> ClusterInfo:
        return ClusterInfo.model_validate_json(self.http.request("DELETE", f"/api/v1/clusters/{key}").content)

    def wait(self, key: str, *, until: tuple[ClusterStatus, ...] = (ClusterStatus.RUNNING,),
             timeout: float | None = None, every: float = 0.25) -> ClusterInfo:
        """The cluster once its status is one of ``until`` (or it ended); WaitTimeout after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            info = self.get(key)
            if info.status in until or info.status.is_terminal():
                return info
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.WaitTimeout(f"cluster {key} is still {info.status.value} ({info.reason}) "
                                         f"after {timeout}s", cluster_id=key)
            time.sleep(every)
