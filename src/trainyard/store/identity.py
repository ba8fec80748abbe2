"""Users, teams, memberships, API tokens (as hashes) and the audit log."""

from __future__ import annotations

import secrets
import time
from typing import Any, NamedTuple

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from trainyard.auth.permissions import Caller, Role
from trainyard.errors import AlreadyExists, TeamNotFound, TokenNotFound, UserNotFound
from trainyard.spec.identity import AuditRecord, TeamInfo, TokenInfo, UserInfo, account_taken
from trainyard.store import identity_tables as it

TOKEN_FIELDS = ("id", "user", "name", "created_at", "last_used_at", "expires_at", "revoked_at")
AUDIT_FIELDS = ("id", "at", "user", "source", "action", "target", "detail")


class TokenOwner(NamedTuple):
    """A live token's owner, as the request it came with will act."""

    caller: Caller
    token_id: str
    last_used_at: float | None
    expires_at: float | None


class IdentityMixin:
    # -- teams and users ---------------------------------------------------------

    def create_team(self, name: str) -> TeamInfo:
        with self.write() as s:
            if s.get(it.Team, name) is not None:
                raise AlreadyExists(f"team {name} exists already", team=name)
            s.add(it.Team(name=name, created_at=time.time()))
        return self.get_team(name)

    def teams(self) -> list[TeamInfo]:
        with self.read() as s:
            members: dict[str, dict[str, str]] = {}
            for m in s.scalars(select(it.Membership)):
                members.setdefault(m.team, {})[m.user] = m.role
            return [TeamInfo(name=r.name, created_at=r.created_at, members=members.get(r.name, {}))
                    for r in s.scalars(select(it.Team).order_by(it.Team.name))]

    def get_team(self, name: str) -> TeamInfo:
        found = next((x for x in self.teams() if x.name == name), None)
        if found is None:
            raise TeamNotFound(f"no such team: {name}", team=name)
        return found

    def create_user(self, name: str, *, admin: bool, team: str | None, role: str | None,
                    os_user: str | None) -> UserInfo:
        """A user, and its membership of ``team`` (made if it does not exist), in one transaction. Another create
        committed between our reads and our insert (another server's, or a request on another thread) is refused
        as if it had come first: the same name (AlreadyExists) or the same ``os_user`` (InvalidSpec; the unique
        index of 0030 sees it); the same new team is there now, and the user is added once more."""
        try:
            self._add_user(name, admin=admin, team=team, role=role, os_user=os_user)
        except IntegrityError:
            # told apart by reading again, not by parsing each dialect's message for the constraint's name
            if self.users(name):
                raise AlreadyExists(f"user {name} exists already", user=name) from None
            holder = self._account_holder(os_user)
            if holder is not None:
                raise account_taken(os_user, holder) from None
            self._add_user(name, admin=admin, team=team, role=role, os_user=os_user)
        return self.get_user(name)

    def _add_user(self, name: str, *, admin: bool, team: str | None, role: str | None, os_user: str | None) -> None:
        now = time.time()
        with self.write() as s:
            if s.get(it.User, name) is not None:
                raise AlreadyExists(f"user {name} exists already", user=name)
            s.add(it.User(name=name, admin=admin, os_user=os_user, disabled=False, created_at=now))
            if team is not None and role is not None:
                if s.get(it.Team, team) is None:
                    s.add(it.Team(name=team, created_at=now))
                s.flush()
                s.add(it.Membership(user=name, team=team, role=role))

    def _account_holder(self, os_user: str | None) -> str | None:
        """The user whose jobs run as Unix account ``os_user``, if any."""
        if os_user is None:
            return None
        with self.read() as s:
            return s.scalar(select(it.User.name).where(it.User.os_user == os_user))

    def set_membership(self, user: str, team: str, role: str | None) -> UserInfo:
        """Give ``user`` ``role`` in ``team``; None removes it from the team."""
        with self.write() as s:
            if s.get(it.User, user) is None:
                raise UserNotFound(f"no such user: {user}", user=user)
            if s.get(it.Team, team) is None:
                raise TeamNotFound(f"no such team: {team}", team=team)
            row = s.get(it.Membership, (user, team))
            if row is not None:
                s.delete(row)
                s.flush()
            if role is not None:
                s.add(it.Membership(user=user, team=team, role=role))
        return self.get_user(user)

    def users(self, name: str | None = None) -> list[UserInfo]:
        with self.read() as s:
            teams: dict[str, dict[str, str]] = {}
            q = select(it.Membership) if name is None else select(it.Membership).where(it.Membership.user == name)
            for m in s.scalars(q):
                teams.setdefault(m.user, {})[m.team] = m.role
            q = select(it.User).order_by(it.User.name)
            rows = s.scalars(q if name is None else q.where(it.User.name == name))
            return [UserInfo(name=r.name, admin=r.admin, os_user=r.os_user, disabled=r.disabled,
                             created_at=r.created_at, teams=teams.get(r.name, {})) for r in rows]

    def get_user(self, name: str) -> UserInfo:
        found = self.users(name)
        if not found:
            raise UserNotFound(f"no such user: {name}", user=name)
        return found[0]

    def set_disabled(self, name: str, disabled: bool) -> UserInfo:
        """A disabled user's tokens stop working at once (checked with every request); none is revoked, so
        enabling the user again gives back those not revoked or expired meanwhile."""
        with self.write() as s:
            if s.execute(update(it.User).where(it.User.name == name).values(disabled=disabled)).rowcount != 1:
                raise UserNotFound(f"no such user: {name}", user=name)
        return self.get_user(name)

    def set_os_user(self, name: str, os_user: str | None) -> UserInfo:
        """The Unix account ``name``'s jobs run as from now on (None: the server's own); one another user took
        meanwhile is refused as :meth:`create_user` refuses it (the unique index of 0030)."""
        try:
            with self.write() as s:
                if s.execute(update(it.User).where(it.User.name == name).values(os_user=os_user)).rowcount != 1:
                    raise UserNotFound(f"no such user: {name}", user=name)
        except IntegrityError:
            raise account_taken(os_user, self._account_holder(os_user) or "another") from None
        return self.get_user(name)

    def admins(self) -> list[str]:
        with self.read() as s:
            return list(s.scalars(select(it.User.name).where(it.User.admin.is_(True), it.User.disabled.is_(False))))

    # -- tokens ----------------------------------------------------------------------

    def add_token(self, user: str, name: str, token_hash: str, expires_at: float | None) -> TokenInfo:
        row = dict(id="t-" + secrets.token_hex(6), user=user, name=name, hash=token_hash, created_at=time.time(),
                   last_used_at=None, expires_at=expires_at, revoked_at=None)
        with self.write() as s:
            if s.get(it.User, user) is None:
                raise UserNotFound(f"no such user: {user}", user=user)
            s.connection().execute(insert(it.ApiToken.__table__), [row])
        return TokenInfo(**{k: row[k] for k in TOKEN_FIELDS})

    def tokens(self, user: str | None = None) -> list[TokenInfo]:
        c = it.ApiToken.__table__.c
        q = select(*(c[k] for k in TOKEN_FIELDS)).order_by(c.created_at)
        with self.read() as s:
            rows = s.connection().execute(q if user is None else q.where(c.user == user)).mappings()
            return [TokenInfo(**r) for r in rows]

    def revoke_token(self, token_id: str, user: str | None = None) -> TokenInfo:
        """Revoke a token (``user``'s only, when given); revoking twice keeps the first time."""
        c = it.ApiToken.__table__.c
        where = [c.id == token_id] + ([c.user == user] if user is not None else [])
        with self.write() as s:
            s.execute(update(it.ApiToken).where(*where, c.revoked_at.is_(None)).values(revoked_at=time.time()))
        found = [x for x in self.tokens(user) if x.id == token_id]
        if not found:
            raise TokenNotFound(f"no such token: {token_id}", token=token_id)
        return found[0]

    def token_owner(self, token_hash: str, now: float) -> TokenOwner | None:
        """The owner of a live token (not revoked, not expired, user not disabled): one indexed
        lookup by hash, its user and memberships joined in."""
        tok, u, m = it.ApiToken.__table__.c, it.User.__table__.c, it.Membership.__table__.c
        q = (select(tok.id, tok.last_used_at, tok.expires_at, u.name, u.admin, u.os_user, m.team, m.role)
             .join(it.User.__table__, u.name == tok.user)
             .outerjoin(it.Membership.__table__, m.user == u.name)
             .where(tok.hash == token_hash, tok.revoked_at.is_(None), u.disabled.is_(False),
                    (tok.expires_at.is_(None)) | (tok.expires_at > now)))
        with self.read() as s:
            rows = s.connection().execute(q).all()
        if not rows:
            return None
        first = rows[0]
        teams = {r.team: Role(r.role) for r in rows if r.team is not None}
        return TokenOwner(Caller(user=first.name, admin=first.admin, teams=teams, os_user=first.os_user),
                          first.id, first.last_used_at, first.expires_at)

    def touch_token(self, token_id: str, now: float) -> None:
        with self.write() as s:
            s.execute(update(it.ApiToken).where(it.ApiToken.id == token_id).values(last_used_at=now))

    # -- audit -----------------------------------------------------------------------

    def add_audit(self, *, user: str, source: str | None, action: str, target: str | None,
                  detail: dict[str, Any] | None) -> None:
        with self.write() as s:
            s.connection().execute(insert(it.AuditEntry.__table__), [dict(
                at=time.time(), user=user, source=source, action=action, target=target, detail=detail)])

    def audit(self, *, user: str | None = None, since: float | None = None, limit: int = 1000) -> list[AuditRecord]:
        """Oldest first, the last ``limit`` entries matching."""
        c = it.AuditEntry.__table__.c
        where = ([c.user == user] if user else []) + ([c.at >= since] if since is not None else [])
        q = select(*(c[k] for k in AUDIT_FIELDS)).where(*where).order_by(c.id.desc()).limit(limit)
        with self.read() as s:
            rows = s.connection().execute(q).mappings().all()
        return [AuditRecord(**r) for r in reversed(rows)]

