"""/api/v1/whoami, users, teams, tokens and the audit log: thin; the rules live in services/identity."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from trainyard.api.serve_cookie import clear_cookie, set_cookie
from trainyard.auth.tokens import bearer

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.spec.identity import (AccountSet, AuditRecord, MembershipSet, NewToken, NewUser, TeamCreate, TeamInfo,
                                     TokenCreate, TokenInfo, UserCreate, UserInfo, WhoAmI)

router = APIRouter(prefix="/api/v1", tags=["identity"])


@router.get("/whoami")
def whoami(request: Request, p: PlatformDep, caller: CallerDep) -> WhoAmI:
    token = p.identity.token_id(bearer(request.headers.get("authorization")))
    return WhoAmI(user=caller.user, admin=caller.admin, teams={t: r.value for t, r in caller.teams.items()},
                  users=p.identity.accept_users, token=token)


@router.post("/serve-session", status_code=204)
def open_serve_session(request: Request, caller: CallerDep) -> Response:
    """Sets the HttpOnly cookie with which this browser opens ``/serve/NAME/`` pages as this caller: the SHA-256
    of the token this request carried, good on ``/serve/`` and clusters' dashboards only (nothing when the server
    asks for none)."""
    answer = Response(status_code=204)
    token = bearer(request.headers.get("authorization"))
    if token is not None:
        for cookie in set_cookie(token, secure=request.url.scheme == "https"):
            answer.headers.append("set-cookie", cookie)
    return answer


@router.delete("/serve-session", status_code=204)
def close_serve_session(request: Request) -> Response:
    """Clears that cookie (signing out)."""
    answer = Response(status_code=204)
    for cookie in clear_cookie(secure=request.url.scheme == "https"):
        answer.headers.append("set-cookie", cookie)
    return answer


@router.post("/users", status_code=201)
def create_user(body: UserCreate, p: PlatformDep, caller: CallerDep) -> NewUser:
    """A user and its first token (shown in this answer only)."""
    return p.identity.create_user(caller, body)


@router.get("/users")
def list_users(p: PlatformDep, caller: CallerDep) -> list[UserInfo]:
    return p.identity.users(caller)


@router.get("/users/{name}")
def get_user(name: str, p: PlatformDep, caller: CallerDep) -> UserInfo:
    return p.identity.user(caller, name)


@router.post("/users/{name}/disable")
def disable_user(name: str, p: PlatformDep, caller: CallerDep) -> UserInfo:
    """The user's tokens stop working at once; its jobs and history stay."""
    return p.identity.disable_user(caller, name)


@router.post("/users/{name}/enable")
def enable_user(name: str, p: PlatformDep, caller: CallerDep) -> UserInfo:
    """A disabled user's tokens work again, but those revoked or expired meanwhile: disabling revoked none."""
    return p.identity.enable_user(caller, name)


@router.put("/users/{name}/os-user")
def set_account(name: str, body: AccountSet, p: PlatformDep, caller: CallerDep) -> UserInfo:
    """The Unix account the user's jobs run as from their next attempt on (attempts under way keep theirs)."""
    return p.identity.set_account(caller, name, body.os_user)


@router.put("/users/{name}/teams")
def set_membership(name: str, body: MembershipSet, p: PlatformDep, caller: CallerDep) -> UserInfo:
    return p.identity.set_membership(caller, name, body.team, body.role)


@router.post("/teams", status_code=201)
def create_team(body: TeamCreate, p: PlatformDep, caller: CallerDep) -> TeamInfo:
    return p.identity.create_team(caller, body)


@router.get("/teams")
def list_teams(p: PlatformDep, caller: CallerDep) -> list[TeamInfo]:
    return p.identity.teams(caller)


@router.post("/tokens", status_code=201)
def create_token(body: TokenCreate, p: PlatformDep, caller: CallerDep) -> NewToken:
    """A new API token, shown in this answer only: the server keeps its sha256."""
    return p.identity.create_token(caller, body)


@router.get("/tokens")
def list_tokens(p: PlatformDep, caller: CallerDep,
                user: Annotated[str | None, Query(max_length=63, description="an admin: anyone's, or * for all")]
                = None) -> list[TokenInfo]:
    return p.identity.tokens(caller, user)


@router.post("/tokens/{token_id}/revoke")
def revoke_token(token_id: str, p: PlatformDep, caller: CallerDep) -> TokenInfo:
    return p.identity.revoke_token(caller, token_id)


@router.get("/audit")
def audit(p: PlatformDep, caller: CallerDep,
          user: Annotated[str | None, Query(max_length=63)] = None,
          since: Annotated[float | None, Query(ge=0, le=1e11, description="unix time")] = None,
          limit: Annotated[int, Query(ge=1, le=10_000)] = 1000) -> list[AuditRecord]:
    """Changes, oldest first: everyone's for an admin, one's own otherwise."""
    return p.audit.read(caller, user=user, since=since, limit=limit)
