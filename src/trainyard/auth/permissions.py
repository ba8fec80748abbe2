"""Who may do what: one table of role → actions, and what a caller may see.

Every rule about users lives here; services ask :meth:`Caller.may` before a
change and apply :func:`visible` to every listing, so a list shows only what
the caller may see and a lookup of anything else answers 404 (another team's
objects are not revealed, not even as a 403).

Roles: ``admin`` is global (everything, every team); ``maintainer``,
``member`` and ``viewer`` are held per team. The server's own token (the
home's ``token`` file, or ``--token-file``) is :data:`LOCAL_ADMIN`: whoever can
read that file already owns the server's data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import NamedTuple


class Role(str, Enum):
    ADMIN = "admin"            # everything, every team
    MAINTAINER = "maintainer"  # a member who also cancels the team's jobs, manages its queues and secrets
    MEMBER = "member"          # submits to the team's queues, cancels its own jobs, sees the team's
    VIEWER = "viewer"          # reads the team's objects


class Action(str, Enum):
    READ = "read"                  # see a team's jobs, runs, logs, metrics, outputs, queues
    SUBMIT = "submit"              # jobs and pipeline runs on the team's queues
    CANCEL_OWN = "cancel_own"      # cancel or retry what one submitted
    CANCEL_TEAM = "cancel_team"    # cancel or retry anything of the team
    MANAGE_QUEUES = "manage_queues"
    MANAGE_SECRETS = "manage_secrets"  # set and delete the team's secrets (their values are never read back)
    MANAGE_USERS = "manage_users"  # users, teams, everyone's tokens, the audit log


ALLOWED: dict[Role, frozenset[Action]] = {
    Role.VIEWER: frozenset({Action.READ}),
    Role.MEMBER: frozenset({Action.READ, Action.SUBMIT, Action.CANCEL_OWN}),
    Role.MAINTAINER: frozenset({Action.READ, Action.SUBMIT, Action.CANCEL_OWN, Action.CANCEL_TEAM,
                                Action.MANAGE_QUEUES, Action.MANAGE_SECRETS}),
    Role.ADMIN: frozenset(Action),
}
TEAM_ROLES = (Role.MAINTAINER, Role.MEMBER, Role.VIEWER)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request: a user and its roles per team, and where it came from (for the audit log)."""

    user: str
    admin: bool = False
    teams: Mapping[str, Role] = field(default_factory=dict)
    os_user: str | None = None  # Unix account the user's jobs run as, where the server can switch
    source: str | None = None   # client address as the server saw it (after trusted proxy headers)

    def may(self, action: Action, team: str | None, owner: str | None = None) -> bool:
        """Whether this caller may do ``action`` on an object of ``team`` submitted by ``owner``."""
        if self.admin:
            return True
        role = self.teams.get(team) if team is not None else None
        if role is None:
            return False
        if action == Action.CANCEL_OWN and owner != self.user:
            return Action.CANCEL_TEAM in ALLOWED[role]
        return action in ALLOWED[role]

    def sees(self, team: str | None, owner: str | None) -> bool:
        return self.admin or owner == self.user or (team is not None and team in self.teams)

    def submit_teams(self) -> list[str]:
        """Teams whose queues this caller may submit to, by name."""
        return sorted(t for t, r in self.teams.items() if Action.SUBMIT in ALLOWED[r])

    def at(self, source: str | None) -> "Caller":
        return replace(self, source=source)


LOCAL_ADMIN = Caller(user="local", admin=True)


class Visible(NamedTuple):
    """What a listing may show: everything (``teams`` None), or these teams' objects and the user's own."""

    teams: frozenset[str] | None
    user: str


def visible(caller: Caller) -> Visible:
    return Visible(None if caller.admin else frozenset(caller.teams), caller.user)
