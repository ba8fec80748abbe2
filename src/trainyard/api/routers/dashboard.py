"""A cluster's Dask dashboard through the trainyard server, so that a user needs nothing but its address.

The scheduler was started with ``--dashboard-prefix /api/v1/clusters/ID/dashboard``, so its links come back
here. Pages and JSON go over HTTP; the live plots are a Bokeh app that pulls its document over a WebSocket
(``…/status/ws``, Bokeh's session token in its subprotocols), relayed message by message as a service's are
(api/serve_websocket.py). Both reach the scheduler with the server's client certificate for the cluster (mutual
TLS). A browser opens them with the sign-in cookie (api/serve_cookie.py). On a server with users the pages come
sandboxed, as a service's do (the scheduler is its owner's job), where Bokeh draws nothing: a browser opening one
there is told of ``trainyard cluster dashboard``, which serves it from a port of the user's machine
(sdk/dashboard_port.py).
"""

from __future__ import annotations

import html

import httpx
from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from starlette.background import BackgroundTask
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidHandshake

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.api.guard import CALLER_KEY
from trainyard.api.serve_origin import SANDBOX
from trainyard.api.serve_websocket import MAX_SIZE, OPEN_TIMEOUT, refuse
from trainyard.auth.permissions import LOCAL_ADMIN
from trainyard.errors import DashboardUnavailable, TrainyardError
from trainyard.services.notify import off_loop
from trainyard.ws_relay import relay

router = APIRouter(prefix="/api/v1/clusters", tags=["clusters"])
_LOCAL_PORT = """<!doctype html><meta charset="utf-8"><title>Dask dashboard · trainyard</title>
<body style="font:15px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto">
<h1 style="font-size:1.3rem">Open this dashboard on a port of your machine</h1>
<p>On a server with users a cluster's dashboard is its owner's job, so its pages would act as you here, and
sandboxed they draw no plots. Run</p><pre id="command">trainyard cluster dashboard ID</pre>
<p>which serves it, live plots included, at an address of your own (your token stays with the CLI).</p>
"""
NOT_RETURNED = {"set-cookie", "service-worker-allowed"}
# headers that belong to one hop (RFC 9110 §7.6.1), and the caller's trainyard token and cookies, are not passed on
HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
       "transfer-encoding", "upgrade", "host", "authorization", "content-length", "cookie"}


@router.api_route("/{cluster_id}/dashboard/{path:path}", methods=["GET", "HEAD"], include_in_schema=False)
async def dashboard(cluster_id: str, path: str, request: Request, p: PlatformDep, caller: CallerDep) -> Response:
    """The dashboard's pages and JSON, under this same path."""
    target, tls = await off_loop(p.dask.dashboard_target, cluster_id, caller)
    if p.serving.sandboxed and "authorization" not in request.headers and _opening_page(request):
        return HTMLResponse(_LOCAL_PORT.replace("ID", html.escape(cluster_id)), status_code=403)
    client = httpx.AsyncClient(base_url=target, timeout=30.0, verify=tls if tls is not None else True)
    url = httpx.URL(path=request.url.path, query=request.url.query.encode())
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP]
    try:
        upstream = await client.send(client.build_request(request.method, url, headers=headers), stream=True)
    except httpx.TransportError as e:
        await client.aclose()
        raise DashboardUnavailable(f"the dashboard of cluster {cluster_id} does not answer: {e}") from None
    kept = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP | NOT_RETURNED}
    if p.serving.sandboxed:  # several users: the scheduler's pages get an origin of their own (api/serve_origin.py)
        kept["content-security-policy"] = SANDBOX[1].decode()

    async def close() -> None:
        await upstream.aclose()
        await client.aclose()

    return StreamingResponse(upstream.aiter_raw(), status_code=upstream.status_code, headers=kept,
                             background=BackgroundTask(close))


@router.websocket("/{cluster_id}/dashboard/{path:path}")
async def dashboard_websocket(websocket: WebSocket, cluster_id: str, path: str) -> None:
    """The live plots' WebSocket, relayed to the scheduler's until either side closes."""
    scope, send = websocket.scope, websocket.send
    if (await websocket.receive())["type"] != "websocket.connect":  # gone before its upgrade was handled
        return
    try:
        target, tls = await off_loop(websocket.app.state.platform.dask.dashboard_target, cluster_id,
                                     scope.get(CALLER_KEY, LOCAL_ADMIN))
    except TrainyardError as e:
        return await refuse(scope, send, e)
    query = scope.get("query_string", b"").decode("latin-1")
    url = target.replace("https://", "wss://", 1).replace("http://", "ws://", 1) + websocket.url.path + \
        ("?" + query if query else "")
    try:
        scheduler = await connect(url, ssl=tls, subprotocols=scope.get("subprotocols") or None, compression=None,
                                  user_agent_header=None, proxy=None, open_timeout=OPEN_TIMEOUT, max_size=MAX_SIZE)
    except (OSError, InvalidHandshake, TimeoutError) as e:
        return await refuse(scope, send, DashboardUnavailable(f"the dashboard of cluster {cluster_id} did not accept "
                                                              f"the WebSocket: {e}"))
    try:
        await send({"type": "websocket.accept", "subprotocol": scheduler.subprotocol})
        await relay(websocket.receive, send, scheduler)
    finally:
        await scheduler.close()


def _opening_page(request: Request) -> bool:
    """A browser opening a page in its window, which a sandbox leaves without plots (Fetch Metadata; a browser
    without it, by what it accepts)."""
    dest = request.headers.get("sec-fetch-dest")
    return dest == "document" if dest is not None else "text/html" in request.headers.get("accept", "")
