"""/api/v1/clusters: thin; the rules live in services/dask_clusters. Also the Dask dashboard,
proxied so that a user needs nothing but the trainyard server (HTTP pages and JSON; the
dashboard's live plots use websockets, which this proxy does not carry)."""

from __future__ import annotations

import httpx
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.api.paging import PagingDep
from trainyard.spec.paging import Page
from trainyard.api.serve_origin import SANDBOX
from trainyard.errors import DashboardUnavailable
from trainyard.services.notify import off_loop
from trainyard.spec.cluster import AdaptRequest, ClusterInfo, ClusterSpec, ClusterTLS, ScaleRequest

NOT_RETURNED = {"set-cookie", "service-worker-allowed"}
router = APIRouter(prefix="/api/v1/clusters", tags=["clusters"])
# headers that belong to one hop (RFC 9110 §7.6.1), and the caller's trainyard token, are not passed on
HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
       "transfer-encoding", "upgrade", "host", "authorization", "content-length", "cookie"}


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


@router.api_route("/{cluster_id}/dashboard/{path:path}", methods=["GET", "HEAD"], include_in_schema=False)
async def dashboard(cluster_id: str, path: str, request: Request, p: PlatformDep, caller: CallerDep) -> Response:
    """The cluster's Dask dashboard, served under this same path (the scheduler was started with it as
    its ``--dashboard-prefix``, so its links come back here)."""
    target, tls = await off_loop(p.dask.dashboard_target, cluster_id, caller)
    client = httpx.AsyncClient(base_url=target, timeout=30.0, verify=tls if tls is not None else True)
    url = httpx.URL(path=request.url.path, query=request.url.query.encode())
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP]
    try:
        upstream = await client.send(client.build_request(request.method, url, headers=headers), stream=True)
    except httpx.TransportError as e:
        await client.aclose()
        raise DashboardUnavailable(f"the dashboard of cluster {cluster_id} does not answer: {e}") from None
    kept = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP | NOT_RETURNED}
    # the scheduler runs as its owner's job: its pages get an origin of their own, as a service's (api/serve_origin.py)
    kept["content-security-policy"] = SANDBOX[1].decode()

    async def close() -> None:
        await upstream.aclose()
        await client.aclose()

    return StreamingResponse(upstream.aiter_raw(), status_code=upstream.status_code, headers=kept,
                             background=BackgroundTask(close))
