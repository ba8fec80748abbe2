"""/api/v1/secrets: thin; the rules live in services/secrets. Values go in, never out, but to a launcher."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.auth.tokens import bearer
from trainyard.errors import InvalidSpec
from trainyard.spec.job import NAME, check_name
from trainyard.spec.secrets import SecretInfo, SecretValue

router = APIRouter(tags=["secrets"])
Team = Annotated[str | None, Query(pattern=f"^-$|{NAME.pattern}", max_length=63,
                                   description="whose: a team, or - for no team (an admin's); default your first "
                                               "team, else no team")]


def named(name: str) -> str:
    """The path's secret name, refused in a spec field's words (the pattern's own message says less) but as the
    path parameter it is."""
    try:
        return check_name(name)
    except ValueError as e:
        raise InvalidSpec.parameter("name", str(e), "path") from None


@router.get("/api/v1/secrets")
def list_secrets(p: PlatformDep, caller: CallerDep, team: Team = None) -> list[SecretInfo]:
    """Names and history of the secrets of ``team``, or of every team you read. Never their values."""
    return p.secrets.list(team, caller)


@router.post("/api/v1/secrets/rotate")
def rotate_secrets(p: PlatformDep, caller: CallerDep) -> dict[str, int]:
    """Re-read the key file and re-seal every value with its first key (admins); ``resealed`` counts those that
    were under another key."""
    return p.secrets.rotate(caller)


@router.get("/api/v1/secrets/{name}")
def get_secret(name: str, p: PlatformDep, caller: CallerDep, team: Team = None) -> SecretInfo:
    return p.secrets.get(named(name), team, caller)


@router.put("/api/v1/secrets/{name}")
def set_secret(name: str, body: SecretValue, p: PlatformDep, caller: CallerDep,
               team: Team = None) -> SecretInfo:
    """Create or replace a secret (a team maintainer's or an admin's); its value is sealed and never shown."""
    return p.secrets.set(named(name), body.value, team, caller)


@router.delete("/api/v1/secrets/{name}", status_code=204)
def delete_secret(name: str, p: PlatformDep, caller: CallerDep, team: Team = None) -> Response:
    p.secrets.delete(named(name), team, caller)
    return Response(status_code=204)


@router.post("/internal/attempts/{attempt_id}/secrets", tags=["internal"])
async def attempt_secrets(attempt_id: str, request: Request) -> dict[str, dict[str, str]]:
    """An attempt's launcher, with the attempt's own credential, reads the variables its job's ``secrets:``
    name, once, at its start; it keeps them in memory and in the command's environment only."""
    p = request.app.state.platform
    env = await run_in_threadpool(p.secrets.for_attempt, attempt_id, bearer(request.headers.get("authorization")),
                                  request.client.host if request.client else None)
    return {"env": env}
