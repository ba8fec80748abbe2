"""/api/v1/clusters: thin; the rules live in services/dask_clusters (the dashboard's proxy in routers/dashboard)."""

from __future__ import annotations

from fastapi import APIRouter, Query

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.api.paging import PagingDep
from trainyard.spec.paging import Page
from trainyard.spec.cluster import AdaptRequest, ClusterInfo, ClusterSpec, ClusterTLS, ScaleRequest

router = APIRouter(prefix="/api/v1/clusters", tags=["clusters"])


@router.get("")
def list_clusters(p: PlatformDep, caller: CallerDep, paging: PagingDep,
                  all: bool = Query(False, description="with stopped and failed ones")) -> Page[ClusterInfo]:
    """A page of clusters, newest first."""
    return p.dask.page(include_ended=all, caller=caller, paging=paging)


@router.post("", status_code=201)
def create_cluster(spec: ClusterSpec, p: PlatformDep, caller: CallerDep) -> ClusterInfo:
    return p.dask.create(spec, caller)


@router.get("/{key}")
def get_cluster(key: str, p: PlatformDep, caller: CallerDep) -> ClusterInfo:
    return p.dask.get(key, caller)


@router.get("/{key}/tls")
def cluster_tls(key: str, p: PlatformDep, caller: CallerDep) -> ClusterTLS:
    """A client's credentials for the cluster's Dask scheduler (its CA, a certificate and its key), for those who
    may see the cluster: its scheduler and workers take no connection without them."""
    return p.dask.client_tls(key, caller)


@router.post("/{key}/scale")
def scale_cluster(key: str, body: ScaleRequest, p: PlatformDep, caller: CallerDep) -> ClusterInfo:
    return p.dask.scale(key, body.workers, caller)


@router.post("/{key}/adapt")
def adapt_cluster(key: str, body: AdaptRequest, p: PlatformDep, caller: CallerDep) -> ClusterInfo:
    return p.dask.adapt(key, body, caller)


@router.delete("/{key}")
def delete_cluster(key: str, p: PlatformDep, caller: CallerDep) -> ClusterInfo:
    return p.dask.delete(key, caller)
