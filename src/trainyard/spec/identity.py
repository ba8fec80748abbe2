"""Users, teams, API tokens and audit entries as the API, SDK and CLI exchange them.

The roles' meaning is :mod:`trainyard.auth.permissions`' (a leaf this package may not
import); ``tests/unit/test_permissions.py`` keeps :data:`ROLES` equal to its ``Role``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from trainyard.errors import InvalidSpec
from trainyard.spec.job import Strict, check_name
from trainyard.spec.choices import ROLES, RoleName  # noqa: F401  (re-exported)

OS_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")  # a portable Unix login name
DURATION = re.compile(r"^(\d{1,5})([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_EXPIRY_S = 5 * 365 * 86400


Name = Annotated[str, AfterValidator(check_name)]


def _login(v: str) -> str:
    if not OS_USER.fullmatch(v):
        raise ValueError("a Unix login name: lower-case letters, digits, '_' or '-', at most 32")
    return v


OsUser = Annotated[str, AfterValidator(_login)]


def parse_duration(text: str) -> int:
    """``90d``, ``12h``, ``30m``, ``2w`` → seconds."""
    m = DURATION.match(text.strip())
    if not m:
        raise ValueError(f"{text!r}: write a number and a unit, e.g. 90d, 12h, 30m, 2w")
    return int(m.group(1)) * _SECONDS[m.group(2)]


def account_refused(message: str) -> InvalidSpec:
    """A new user's Unix account (``os_user``) refused, naming the field."""
    return InvalidSpec.body("os_user", message)


def account_taken(os_user: str, holder: str) -> InvalidSpec:
    """``os_user`` is ``holder``'s account already: the service's check says it, and so does the store when
    another create took the account between that check and its insert."""
    return account_refused(f"account {os_user!r} is user {holder}'s already: each user needs an account of its "
                           "own, or its jobs could read the other's (secrets included)")


class UserCreate(Strict):
    name: Name
    team: Name | None = Field(None, description="the team it joins (created if it does not exist)")
    role: RoleName = "member"
    os_user: OsUser | None = Field(None, description="Unix account its jobs run as (local engine, server run as root)")


class AccountSet(Strict):
    os_user: OsUser | None = Field(description="Unix account the user's jobs run as from now on; null: none of its own")


class TeamCreate(Strict):
    name: Name


class MembershipSet(Strict):
    team: Name
    role: Literal["maintainer", "member", "viewer"] | None = Field(
        "member", description="the user's role in the team; null takes the user out of it")


class TokenCreate(Strict):
    name: Name = Field(description="what it is for, e.g. laptop")
    expires_in: int | None = Field(None, ge=60, le=MAX_EXPIRY_S, description="seconds; none: never expires")
    user: Name | None = Field(None, description="whose token (admins only); default: the caller's")


class UserInfo(BaseModel):
    name: str
    admin: bool
    os_user: str | None = None
    disabled: bool = False
    created_at: float
    teams: dict[str, str] = Field(default_factory=dict, description="team -> role")


class TeamInfo(BaseModel):
    name: str
    created_at: float
    members: dict[str, str] = Field(default_factory=dict, description="user -> role")


class TokenInfo(BaseModel):
    id: str
    user: str
    name: str
    created_at: float
    last_used_at: float | None = Field(None, description="to the minute: refreshed at most once a minute")
    expires_at: float | None = None
    revoked_at: float | None = None


class NewToken(BaseModel):
    """A token as it is created: ``secret`` is shown this once and never stored."""

    info: TokenInfo
    secret: str


class NewUser(BaseModel):
    user: UserInfo
    token: NewToken


class AuditRecord(BaseModel):
    id: int
    at: float
    user: str
    source: str | None = None
    action: str
    target: str | None = None
    detail: dict[str, Any] | None = None


class WhoAmI(BaseModel):
    user: str
    admin: bool
    teams: dict[str, str]
    users: bool = Field(True, description="whether the server takes users' tokens (`--auth`); without, every request "
                                          "acts as the server's owner, and users and their tokens sign nobody in")
    token: str | None = Field(None, description="the id of the user's token this request carried, so that a page can "
                                                "tell which of the tokens it lists it signs in with (None: the "
                                                "server's own token, or no `--auth`)")
