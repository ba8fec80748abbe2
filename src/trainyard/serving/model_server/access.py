"""Only requests that came through the trainyard server: those carrying the replica's own token.

A replica's port listens on its node, where any process (another team's job) can connect to it; the server's
``/serve/NAME/`` proxy checks the caller's team and sends each request on with the replica attempt's token in
``X-Trainyard-Service-Token`` (services/service_tokens.py). So when the server gave one (``TRAINYARD_SERVICE_TOKEN``),
a request without it is refused with 403, but for the health checks of the service's probes (which send it anyway)
and of ``tritonclient``-like callers that only ask whether the server is up. Run by hand, without a token, the
server answers everyone, as before.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from trainyard import envvars

HEADER = envvars.SERVICE_TOKEN_HEADER.lower().encode()
OPEN = frozenset({"/v2/health/live", "/v2/health/ready"})  # what a probe asks; it tells nothing of the model
_REFUSED = json.dumps({"error": f"this model server answers only requests through the trainyard server "
                                f"(/serve/NAME/): {envvars.SERVICE_TOKEN_HEADER} is missing or wrong"}).encode()


class TokenCheck:
    """ASGI middleware: HTTP requests without ``token`` in :data:`HEADER` get 403, but GET (or HEAD) of :data:`OPEN`."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not (scope["path"] in OPEN and scope["method"] in ("GET", "HEAD")):
            given = next((v for k, v in scope["headers"] if k == HEADER), b"")
            if not hmac.compare_digest(given, self.token):  # constant time: a wrong guess says nothing of the right
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", b"%d" % len(_REFUSED))]})
                await send({"type": "http.response.body", "body": _REFUSED})
                return
        await self.app(scope, receive, send)
