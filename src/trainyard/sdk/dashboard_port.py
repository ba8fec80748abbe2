"""A cluster's Dask dashboard on a port of this machine, through the trainyard server (`trainyard cluster dashboard`,
``DaskCluster.dashboard_forward``).

On a server with users a dashboard's pages come sandboxed (the scheduler is its owner's job: in the UI's origin
its pages would act as whoever opened them), and a sandboxed page draws no live plots. A local port is an origin
of its own, which reaches nothing of the UI's: there the pages need no sandbox. Each request to it goes on to the
server with this user's token, which the pages never see, and the plots' WebSocket is relayed.

The port listens on loopback only, and takes a browser only with the random key in the address it prints (as
Jupyter does): the first visit turns the key into a cookie, so another account on this machine that finds the
port gets nothing.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import socket
import ssl
from typing import TYPE_CHECKING, Any, AsyncIterator

from trainyard.errors import Conflict, InvalidSpec

if TYPE_CHECKING:
    from trainyard.sdk.http import Http
    from trainyard.spec.cluster import ClusterInfo

COOKIE = "trainyard_dashboard_{port}"  # a browser sends a host's cookies to all its ports: one name per port
# of one hop (RFC 9110 §7.6.1), or this port's and the UI's own: not passed on either way
HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding",
       "upgrade", "host", "authorization", "content-length", "cookie"}
NOT_RETURNED = HOP | {"set-cookie", "content-security-policy", "content-encoding"}


def forward_for(http: Http, info: ClusterInfo, port: int = 0) -> DashboardForward:
    """A port for the dashboard of the cluster ``info`` says, through the server ``http`` talks to."""
    from trainyard.sdk.http import verify_for

    if not info.dashboard:
        raise Conflict(f"cluster {info.id} has no dashboard now ({info.status.value})", cluster_id=info.id)
    # the scheduler's --dashboard-prefix: every path of its pages starts with it
    prefix = f"/api/v1/clusters/{info.id}/dashboard"
    return DashboardForward(http.server, http.token, prefix, info.dashboard, verify_for(http.server), port)


class DashboardForward:
    """``serve()`` answers on ``url`` until stopped; ``prefix`` is the dashboard's path on the server
    (``/api/v1/clusters/ID/dashboard``) and ``first`` its first page."""

    def __init__(self, server: str, token: str | None, prefix: str, first: str, verify: ssl.SSLContext | bool,
                 port: int = 0) -> None:
        self.server, self.token, self.prefix, self.first = server.rstrip("/"), token, prefix.rstrip("/") + "/", first
        self.verify = verify
        self.key = secrets.token_urlsafe(24)
        if not 0 <= port <= 65535:
            raise InvalidSpec.flag("--port", f"{port} is not a port (0: any free one)")
        try:
            self.sock = socket.create_server(("127.0.0.1", port))
        except OSError as e:
            why = os.strerror(e.errno or 0)
            raise InvalidSpec.flag("--port", f"cannot listen on 127.0.0.1:{port}: {why}") from None
        port = self.sock.getsockname()[1]
        self.url, self.cookie = f"http://127.0.0.1:{port}/?key={self.key}", COOKIE.format(port=port)
        self._server: Any = None

    def _signed(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"} if self.token else {}

    def _let_in(self, cookies: dict[str, str]) -> bool:
        return hmac.compare_digest(cookies.get(self.cookie, ""), self.key)

    def _mine(self, path: str) -> bool:
        """A path of the dashboard's, and no other: not one that climbs out of it (``..``, decoded)."""
        return path.startswith(self.prefix) and not any(part in (".", "..") for part in path.split("/"))

    def app(self) -> Any:
        import httpx
        from starlette.applications import Starlette
        from starlette.background import BackgroundTask
        from starlette.requests import Request
        from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
        from starlette.routing import Route, WebSocketRoute
        from starlette.websockets import WebSocket

        client = httpx.AsyncClient(base_url=self.server, verify=self.verify, timeout=30.0)

        async def page(request: Request) -> Response:
            path = request.url.path
            if path == "/" and hmac.compare_digest(request.query_params.get("key", ""), self.key):
                answer = RedirectResponse(self.first, status_code=303)
                answer.set_cookie(self.cookie, self.key, httponly=True, samesite="strict")
                return answer
            if not self._let_in(request.cookies):
                return PlainTextResponse("open the address `trainyard cluster dashboard` printed (it holds a key)",
                                         status_code=403)
            if path == "/":
                return RedirectResponse(self.first, status_code=303)
            if not self._mine(path):
                return PlainTextResponse("not part of the dashboard", status_code=404)
            headers = {k: v for k, v in request.headers.items() if k not in HOP} | self._signed()
            url = httpx.URL(path=path, query=request.url.query.encode())
            try:
                upstream = await client.send(client.build_request(request.method, url, headers=headers), stream=True)
            except httpx.TransportError as e:
                return PlainTextResponse(f"the trainyard server at {self.server} did not answer: {e}", status_code=502)
            kept = {k: v for k, v in upstream.headers.items() if k not in NOT_RETURNED}
            return StreamingResponse(upstream.aiter_bytes(), status_code=upstream.status_code, headers=kept,
                                     background=BackgroundTask(upstream.aclose))

        async def plots(websocket: WebSocket) -> None:
            from websockets.asyncio.client import connect
            from websockets.exceptions import InvalidHandshake

            from trainyard.ws_relay import relay

            if not self._let_in(websocket.cookies) or not self._mine(websocket.url.path):
                return await websocket.close(1008)
            query = websocket.scope.get("query_string", b"").decode("latin-1")
            target = self.server.replace("http", "ws", 1) + websocket.url.path + ("?" + query if query else "")
            tls = self.verify if isinstance(self.verify, ssl.SSLContext) and target.startswith("wss:") else None
            try:
                far = await connect(target, ssl=tls, additional_headers=self._signed(), compression=None,
                                    subprotocols=websocket.scope.get("subprotocols") or None, proxy=None,
                                    user_agent_header=None, open_timeout=30, max_size=16 << 20)
            except (OSError, InvalidHandshake, TimeoutError):
                return await websocket.close(1011)
            try:
                await websocket.accept(subprotocol=far.subprotocol)
                await relay(websocket.receive, websocket.send, far)
            finally:
                await far.close()

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            yield
            await client.aclose()

        return Starlette(routes=[Route("/{path:path}", page, methods=["GET", "HEAD"]),
                                 WebSocketRoute("/{path:path}", plots)], lifespan=lifespan)

    def serve(self) -> None:
        """Answers until Ctrl-C (or :meth:`stop` from another thread)."""
        import uvicorn

        self._server = uvicorn.Server(uvicorn.Config(self.app(), log_level="warning", lifespan="on", ws="auto"))
        self._server.run(sockets=[self.sock])

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
