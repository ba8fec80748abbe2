"""Dask clusters over HTTP: ``Client().clusters.create(ClusterSpec(...))``, scale, adapt, delete.

The friendly face is :func:`trainyard.dask.new_cluster`; this is what it and the CLI call.
"""

from __future__ import annotations

import time

from pydantic import ValidationError

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

    def list(self, include_ended: bool = False) -> list[ClusterInfo]:
        resp = self.http.request("GET", "/api/v1/clusters", params={"all": include_ended})
        return [ClusterInfo.model_validate(c) for c in resp.json()]

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
