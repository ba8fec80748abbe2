"""Services over HTTP: ``Client().services.apply("svc.yaml")``, list, get, scale, delete, logs, wait.

A service spec is a job spec with a ``service:`` block; ``serve_spec`` builds the one
``trainyard serve`` runs: the built-in model server over a job's outputs or an artifact.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from trainyard.sdk import paging
from trainyard import errors
from trainyard.sdk.http import Http
from trainyard.sdk.prepare import prepare
from trainyard.spec.lines import validation_errors
from trainyard.spec.loader import read_model
from trainyard.spec.records import LogChunk
from trainyard.spec.serve import MODEL_SERVER, model_ref, serve_spec
from trainyard.spec.service import ScaleRequest, ServiceInfo, ServiceSpec

__all__ = ["MODEL_SERVER", "Services", "load_service", "model_ref", "serve_spec", "service_spec"]


def load_service(path: str | Path) -> ServiceSpec:
    """A service spec file; errors name the field and the line."""
    return read_model(ServiceSpec, path)


def service_spec(data: dict[str, Any]) -> ServiceSpec:
    try:
        return ServiceSpec.model_validate(data)
    except ValidationError as e:
        raise errors.InvalidSpec(errors=validation_errors(e, {}, "<service>", ServiceSpec)) from None


class Services:
    def __init__(self, http: Http, logs: Callable[..., Iterator[LogChunk]] | None = None) -> None:
        self.http = http
        self._logs = logs

    def apply(self, spec: ServiceSpec | dict[str, Any] | str | Path, base_dir: str | Path | None = None) -> ServiceInfo:
        """Create the service, or roll out a changed spec as its next version."""
        if isinstance(spec, (str, Path)):
            base_dir = base_dir or Path(spec).resolve().parent
            spec = load_service(spec)
        elif isinstance(spec, dict):
            spec = service_spec(spec)
        job, blob, digest = prepare(spec.job_spec(), Path(base_dir or Path.cwd()))
        spec = ServiceSpec.model_validate({**job.model_dump(), "kind": spec.kind,
                                           "service": spec.service.model_dump(), "preemptible": spec.preemptible})
        if digest is not None:
            self.http.upload_snapshot(blob, digest)
        body = {"spec": spec.model_dump(mode="json"), "snapshot": digest}
        return ServiceInfo.model_validate_json(self.http.request("POST", "/api/v1/services", json=body).content)

    def list(self, include_ended: bool = False, limit: int | None = None) -> list[ServiceInfo]:
        """Services, newest first: all of them, or the first ``limit`` (read a page at a time)."""
        return paging.every(self.http, "/api/v1/services", ServiceInfo, limit=limit, all=include_ended)

    def page(self, limit: int = paging.LIST_LIMIT, cursor: str | None = None,
             include_ended: bool = False) -> paging.Page[ServiceInfo]:
        """One page of services, newest first; its ``next_cursor`` as ``cursor`` gives the next."""
        return paging.page(self.http, "/api/v1/services", ServiceInfo, limit=limit, cursor=cursor, all=include_ended)

    def get(self, key: str) -> ServiceInfo:
        return ServiceInfo.model_validate_json(self.http.request("GET", f"/api/v1/services/{key}").content)

    def scale(self, key: str, replicas: int | None = None, *, minimum: int | None = None,
              maximum: int | None = None, target_concurrency: float | None = None,
              scale_down_after: float | str | None = None) -> ServiceInfo:
        """A fixed number of replicas, or autoscaling settings; those not given stay as they are."""
        body = {k: v for k, v in (("replicas", replicas), ("min", minimum), ("max", maximum),
                                  ("target_concurrency", target_concurrency),
                                  ("scale_down_after", scale_down_after)) if v is not None}
        try:  # here too: a NaN or an infinity is no JSON, and would fail to encode rather than be refused by name
            ScaleRequest.model_validate(body)
        except ValidationError as e:
            raise errors.InvalidSpec(errors=[{**err, "where": err["field"]}
                                             for err in validation_errors(e, {}, "")]) from None
        return ServiceInfo.model_validate_json(
            self.http.request("POST", f"/api/v1/services/{key}/scale", json=body).content)

    def delete(self, key: str) -> ServiceInfo:
        return ServiceInfo.model_validate_json(self.http.request("DELETE", f"/api/v1/services/{key}").content)

    def replica_job(self, key: str, replica: int | str = 0) -> str:
        """The job id of a replica: by its index in ``get(key).replicas`` or its job id."""
        reps = self.get(key).replicas
        if isinstance(replica, str) and not replica.isdigit():
            if replica not in {r.job_id for r in reps}:
                raise errors.NotFound(f"service {key} has no replica job {replica}", replica=replica)
            return replica
        i = int(replica)
        if not 0 <= i < len(reps):
            raise errors.NotFound(f"service {key} has {len(reps)} replicas; no replica {i}", replica=i)
        return reps[i].job_id

    def logs(self, key: str, replica: int | str = 0, *, follow: bool = False) -> Iterator[LogChunk]:
        """A replica's log: its job's (see ``Client.logs``)."""
        if self._logs is None:
            raise errors.TrainyardError("this Services was made without a client: use Client().services")
        return self._logs(self.replica_job(key, replica), follow=follow)

    def wait_ready(self, key: str, replicas: int = 1, timeout: float = 60.0, every: float = 0.2) -> ServiceInfo:
        """The service once at least ``replicas`` of its replicas are ready; WaitTimeout after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.get(key)
            if info.ready >= replicas:
                return info
            if time.monotonic() >= deadline:
                raise errors.WaitTimeout(f"service {key}: {info.reason} after {timeout}s", service=key)
            time.sleep(every)
