"""WebSockets through ``/serve/NAME/...``: the caller's upgrade is answered once a ready replica accepted its own.

uvicorn speaks the protocol with the caller and the ``websockets`` library with the replica; messages are
relayed both ways as they come (ASGI hands over whole messages, so one message, at most uvicorn's
``ws_max_size``, is what this server holds at a time) until either side closes, and the close code and
reason pass on to the other side. Who may open one is decided as for HTTP (the Guard, then the service's
team); a cold start applies. A replica that refuses the upgrade with an HTTP answer has that answer passed
back (where uvicorn offers the ASGI ``websocket.http.response`` extension). Each WebSocket counts as one
request in flight on its replica, and in the service's traffic (status 101, no latency: it lasts as long as
the conversation).
"""

from __future__ import annotations

import logging
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidHandshake, InvalidStatus
from websockets.frames import CloseCode

from trainyard.api.guard import CALLER_KEY
from trainyard.api.serve_hop import HOP, error_answer, forward_headers, open_hop, release, route_for, with_replica
from trainyard.api.serve_origin import returned
from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.errors import ReplicaUnreachable, ServiceNotFound, ServiceUnavailable, TrainyardError
from trainyard.services.service_tokens import HEADER
from trainyard.services.serving import ServingService
from trainyard.ws_relay import relay

log = logging.getLogger(__name__)
# the websockets library writes its own handshake and Host; the caller's extensions were agreed with uvicorn
NOT_FORWARDED = HOP | {b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-extensions",
                       b"sec-websocket-protocol", b"content-length"}
# of the replica's handshake answer, what is not uvicorn's to write again
NOT_RETURNED = HOP | {b"sec-websocket-accept", b"sec-websocket-extensions", b"sec-websocket-protocol",
                      b"content-length", b"date", b"server"}
OPEN_TIMEOUT = 30.0  # seconds for the replica to accept the upgrade
MAX_SIZE = 16 * 1024 * 1024  # bytes in one message from the replica: uvicorn's own limit the other way
TOKEN_HEADER = HEADER.decode()  # the websockets library takes str headers


async def proxy_websocket(scope: dict, receive: Any, send: Any, service: ServingService, name: str,
                          path: bytes, query: bytes) -> None:
    if (await receive())["type"] != "websocket.connect":  # the caller left before its upgrade was handled
        return
    caller: Caller = scope.get(CALLER_KEY, LOCAL_ADMIN)
    try:
        route = await route_for(service, name, caller)
    except ServiceNotFound as e:
        return await refuse(scope, send, e)
    service.traffic.started(name)
    job_id: str | None = None
    status = 101
    try:
        route = await with_replica(service, route, caller)
        headers = [(k.decode("latin-1"), v.decode("latin-1"))
                   for k, v in forward_headers(scope, name, NOT_FORWARDED)]
        target = (path + (b"?" + query if query else b"")).decode("latin-1")

        async def open_ws(replica_id: str, base: str) -> ClientConnection:
            token = route.tokens.get(replica_id)
            signed = headers if token is None else [*headers, (TOKEN_HEADER, token.decode("latin-1"))]
            return await connect(f"ws://{base}{target}", additional_headers=signed,
                                 subprotocols=scope.get("subprotocols") or None, user_agent_header=None,
                                 compression=None, proxy=None, open_timeout=OPEN_TIMEOUT, max_size=MAX_SIZE)

        # OSError: refused or unreachable, nothing reached it: another replica may take it
        job_id, replica = await open_hop(service, route, open_ws, OSError)
    except InvalidStatus as e:  # the replica answered the upgrade in HTTP: that answer goes back
        status = e.response.status_code
        release(service, job_id)
        service.traffic.ended(name, status, None)
        kept = _returned(e.response.headers.raw_items(), service.sandboxed)
        return await _refuse_with(scope, send, status, kept, e.response.body)
    except (InvalidHandshake, TimeoutError) as e:
        release(service, job_id)
        service.traffic.ended(name, 502, None)
        return await refuse(scope, send, ReplicaUnreachable(f"the replica of service {name} did not accept the "
                                                            f"WebSocket: {e}"))
    except (ServiceUnavailable, ReplicaUnreachable) as e:
        release(service, job_id)
        service.traffic.ended(name, e.http_status, None)
        return await refuse(scope, send, e)
    except BaseException:
        release(service, job_id)
        service.traffic.ended(name, 502, None)
        raise
    try:
        await send({"type": "websocket.accept", "subprotocol": replica.subprotocol,
                    "headers": _returned(replica.response.headers.raw_items(), service.sandboxed)
                    if replica.response else []})
        await relay(receive, send, replica)
    except BaseException:
        status = 502
        raise
    finally:
        await replica.close()
        release(service, job_id)
        service.traffic.ended(name, status, None)


def _returned(items: Any, sandboxed: bool) -> list[tuple[bytes, bytes]]:
    return returned([(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in items], NOT_RETURNED, sandboxed)


async def refuse(scope: dict, send: Any, error: TrainyardError) -> None:
    status, headers, body = error_answer(error)
    await _refuse_with(scope, send, status, headers, body)


async def _refuse_with(scope: dict, send: Any, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    """An HTTP answer to the upgrade where the server can send one, else a refused upgrade (uvicorn: 403)."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        return await send({"type": "websocket.close", "code": CloseCode.POLICY_VIOLATION})
    headers = [(k, v) for k, v in headers if k != b"content-length"] + [(b"content-length", b"%d" % len(body))]
    await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})
