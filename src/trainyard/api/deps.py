"""Dependencies shared by the routers (who may come in at all is :mod:`trainyard.api.guard`'s)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from trainyard.api.guard import CALLER_KEY
from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.services.platform import Platform


async def get_platform(request: Request) -> Platform:
    # async: FastAPI runs a plain function dependency in its thread pool, a hop per request for a lookup
    return request.app.state.platform


PlatformDep = Annotated[Platform, Depends(get_platform)]


async def get_caller(request: Request) -> Caller:
    """Who sent the request, as the guard found it (the local admin where no token is required)."""
    # async for the same reason: every route depends on it, and a hop queued behind 40 busy worker
    # threads was most of a read's time under load (bench/RESULTS.md, session 6)
    return request.scope.get(CALLER_KEY, LOCAL_ADMIN)


CallerDep = Annotated[Caller, Depends(get_caller)]
