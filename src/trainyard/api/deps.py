"""Dependencies shared by the routers: the platform, and the bearer token check."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request

from trainyard.errors import TrainyardError
from trainyard.services.platform import Platform


class Unauthorized(TrainyardError):
    """A valid bearer token is required."""

    code = "unauthorized"
    http_status = 401


def get_platform(request: Request) -> Platform:
    return request.app.state.platform


def check_token(request: Request) -> None:
    if request.url.path.startswith("/internal/"):
        return  # launchers: each internal route checks its attempt's own credential
    token = request.app.state.platform.settings.token
    if token is None:
        return
    sent = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    if not secrets.compare_digest(sent, token):
        raise Unauthorized()


PlatformDep = Annotated[Platform, Depends(get_platform)]
