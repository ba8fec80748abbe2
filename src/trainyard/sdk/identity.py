"""Users, teams, tokens and the audit log through the API: ``Client().identity``."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from trainyard.sdk.http import Http
from trainyard.spec.identity import (AuditRecord, NewToken, NewUser, TeamInfo, TokenInfo, UserInfo, WhoAmI)

_USERS = TypeAdapter(list[UserInfo])
_TEAMS = TypeAdapter(list[TeamInfo])
_TOKENS = TypeAdapter(list[TokenInfo])
_AUDIT = TypeAdapter(list[AuditRecord])


class Identity:
    def __init__(self, http: Http) -> None:
        self.http = http

    def _get(self, path: str, **params: Any) -> Any:
        return self.http.request("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def whoami(self) -> WhoAmI:
        return WhoAmI.model_validate(self._get("/api/v1/whoami"))

    def create_user(self, name: str, *, team: str | None = None, role: str = "member",
                    os_user: str | None = None) -> NewUser:
        body = {"name": name, "team": team, "role": role, "os_user": os_user}
        return NewUser.model_validate(self.http.request("POST", "/api/v1/users", json=body).json())

    def users(self) -> list[UserInfo]:
        return _USERS.validate_python(self._get("/api/v1/users"))

    def user(self, name: str) -> UserInfo:
        return UserInfo.model_validate(self._get(f"/api/v1/users/{name}"))

    def disable_user(self, name: str) -> UserInfo:
        return UserInfo.model_validate(self.http.request("POST", f"/api/v1/users/{name}/disable").json())

    def enable_user(self, name: str) -> UserInfo:
        """Undo :meth:`disable_user`: its tokens not revoked or expired meanwhile work again."""
        return UserInfo.model_validate(self.http.request("POST", f"/api/v1/users/{name}/enable").json())

    def set_os_user(self, name: str, os_user: str | None) -> UserInfo:
        """The Unix account ``name``'s jobs run as from their next attempt on (None: none of its own)."""
        body = {"os_user": os_user}
        return UserInfo.model_validate(self.http.request("PUT", f"/api/v1/users/{name}/os-user", json=body).json())

    def set_membership(self, name: str, team: str, role: str | None) -> UserInfo:
        body = {"team": team, "role": role}
        return UserInfo.model_validate(self.http.request("PUT", f"/api/v1/users/{name}/teams", json=body).json())

    def create_team(self, name: str) -> TeamInfo:
        return TeamInfo.model_validate(self.http.request("POST", "/api/v1/teams", json={"name": name}).json())

    def teams(self) -> list[TeamInfo]:
        return _TEAMS.validate_python(self._get("/api/v1/teams"))

    def create_token(self, name: str, *, expires_in: int | None = None, user: str | None = None) -> NewToken:
        body = {"name": name, "expires_in": expires_in, "user": user}
        return NewToken.model_validate(self.http.request("POST", "/api/v1/tokens", json=body).json())

    def tokens(self, user: str | None = None) -> list[TokenInfo]:
        return _TOKENS.validate_python(self._get("/api/v1/tokens", user=user))

    def revoke_token(self, token_id: str) -> TokenInfo:
        return TokenInfo.model_validate(self.http.request("POST", f"/api/v1/tokens/{token_id}/revoke").json())

    def audit(self, *, user: str | None = None, since: float | None = None, limit: int = 1000) -> list[AuditRecord]:
        return _AUDIT.validate_python(self._get("/api/v1/audit", user=user, since=since, limit=limit))
