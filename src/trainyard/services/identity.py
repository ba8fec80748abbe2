"""Users, teams and API tokens: who a request comes from, and managing them.

A token is random (32 bytes, URL-safe) and kept only as its sha256, so telling
who sent a request is one indexed lookup by hash, its user and memberships
joined in, its answer reused for :data:`REMEMBER_FOR` seconds (forgotten at
once when this server revokes a token, disables a user or changes a
membership). ``last_used_at`` is written at most once a minute per token, so
a busy client does not turn every read into a write.

The server's own token (the home's ``token`` file or ``--token-file``) is the
local admin and needs no lookup: the embedded default never touches these tables.
"""

from __future__ import annotations

import hmac
import os
import pwd
import secrets
import threading
import time
from collections.abc import Callable

from trainyard.auth.permissions import LOCAL_ADMIN, Action, Caller, Role
from trainyard.auth.tokens import token_hash
from trainyard.errors import AlreadyExists, Forbidden, InvalidSpec, TrainyardError
from trainyard.services.audit import AuditLog
from trainyard.spec.identity import (NewToken, NewUser, TeamCreate, TeamInfo, TokenCreate, TokenInfo, UserCreate,
                                     UserInfo, account_refused, account_taken)
from trainyard.store import Store

TOUCH_EVERY = 60.0  # seconds between two writes of one token's last_used_at
REMEMBER_FOR = 2.0  # seconds a token's owner is reused without a lookup; a change made here forgets at once
FIRST_ADMIN = "admin"


def new_secret() -> str:
    return "ty_" + secrets.token_urlsafe(32)


def _admin_only(caller: Caller) -> None:
    if not caller.may(Action.MANAGE_USERS, None):
        raise Forbidden("only an admin manages users and teams")


class IdentityService:
    def __init__(self, store: Store, audit: AuditLog, *, server_token_sha256: str | None, users: bool) -> None:
        """``users``: whether users' API tokens are accepted at all (``trainyard server --auth``)."""
        self.store = store
        self.audit = audit
        self.server_token_sha256 = server_token_sha256
        self.accept_users = users
        self._touched: dict[str, float] = {}  # token id -> when this process last wrote its last_used_at
        self._known: dict[str, tuple[Caller, float]] = {}  # token hash -> (its owner, good until)
        self._owners: dict[str, tuple[Caller | None, float]] = {}  # user -> (caller_of, good until)
        self._lock = threading.Lock()
        self.forgotten: list[Callable[[], None]] = []  # called when a change here forgets who tokens stand for

    # -- who is calling --------------------------------------------------------------

    def server_token(self, secret: str) -> bool:
        """Whether ``secret`` is the server's own token (the local admin): no database involved."""
        return self.server_hash(token_hash(secret))

    def server_hash(self, digest: str) -> bool:
        """Whether ``digest`` is the SHA-256 of the server's own token."""
        return self.server_token_sha256 is not None and hmac.compare_digest(digest, self.server_token_sha256)

    def authenticate(self, secret: str) -> Caller | None:
        """The caller a bearer token stands for; None for an unknown, revoked or expired token, or a
        disabled user."""
        return LOCAL_ADMIN if self.server_token(secret) else self.user_caller(secret)

    def token_id(self, secret: str | None) -> str | None:
        """The id of the live user's token ``secret`` (None for the server's own, or without ``--auth``)."""
        if not secret or not self.accept_users or self.server_token(secret):
            return None
        owner = self.store.token_owner(token_hash(secret), time.time())
        return owner.token_id if owner is not None else None

    def remembered(self, digest: str) -> Caller | None:
        """The owner of the user's token of SHA-256 ``digest`` looked up within the last :data:`REMEMBER_FOR`
        seconds: no database."""
        known = self._known.get(digest) if self.accept_users else None
        return known[0] if known is not None and time.time() < known[1] else None

    def user_caller(self, secret: str) -> Caller | None:
        """The user an API token belongs to (one indexed lookup); None unless ``--auth`` is on."""
        return self.hash_owner(token_hash(secret))

    def hash_owner(self, digest: str) -> Caller | None:
        """The user whose token has SHA-256 ``digest``, as :meth:`user_caller` (a ``/serve/`` sign-in cookie
        holds the digest, not the token)."""
        if not self.accept_users:
            return None
        now = time.time()
        known = self._known.get(digest)
        if known is not None and now < known[1]:
            return known[0]
        owner = self.store.token_owner(digest, now)
        if owner is None:
            return None
        # another server sharing the database sees a revocation within REMEMBER_FOR; this one at once
        until = min(now + REMEMBER_FOR, owner.expires_at or float("inf"))
        with self._lock:
            if len(self._known) > 10_000:
                self._known.clear()
            self._known[digest] = (owner.caller, until)
        last = max(owner.last_used_at or 0.0, self._touched.get(owner.token_id, 0.0))
        if now - last >= TOUCH_EVERY:
            with self._lock:
                self._touched[owner.token_id] = now
            self.store.touch_token(owner.token_id, now)
        return owner.caller

    def caller_of(self, user: str | None) -> Caller | None:
        """``user`` as a request of theirs would be seen now (what they made acts in their name later: a
        schedule's fire, a subscription's delivery); None if disabled or gone."""
        if not self.accept_users:
            return LOCAL_ADMIN  # no users on this server: everything is the local admin's
        found = self.store.users(user) if user else []
        if not found:
            return LOCAL_ADMIN if user == LOCAL_ADMIN.user else None  # made with the server's own token
        u = found[0]
        if u.disabled:
            return None
        return Caller(user=u.name, admin=u.admin, teams={k: Role(v) for k, v in u.teams.items()}, os_user=u.os_user)

    def check_submitter(self, owner: str | None, team: str | None, queue: str, *,
                        team_for: Callable[[Caller, str], str | None]) -> Caller | None:
        """Refuse (Forbidden, saying why) a job made later in ``owner``'s name (a sweep's trial, a pipeline
        step, a service's replica, a Dask worker) unless they could submit it themselves now: not disabled,
        and allowed on ``queue`` by ``team_for`` (a direct submit's rule) and in the job's ``team``. The owner
        as they are now, whose other rights the job is held to; None where none are asked.

        What they made was checked when they made it; a disabled user, or one since made a viewer or taken
        out of the team, must not go on getting jobs (run as their Unix account) through it."""
        if not self.accept_users or owner is None or owner == LOCAL_ADMIN.user:
            return None  # no users on this server (all is the local admin's), or the local admin's own: never refused
        who = self._owner_now(owner)
        if who is None:
            raise Forbidden(f"its owner {owner} is disabled or gone: no new job starts in their name", owner=owner)
        try:
            team_for(who, queue)
        except InvalidSpec:  # the queue is there (the job was made on it): the owner no longer sees it
            raise Forbidden(f"its owner {owner} may no longer submit to queue {queue}: it is not one of their teams' "
                            "queues", owner=owner, queue=queue) from None
        except Forbidden as e:
            raise Forbidden(f"its owner {owner} may no longer submit to queue {queue}: "
                            f"{e.message.removeprefix('queue: ')}", owner=owner, queue=queue) from None
        if team is not None and not who.may(Action.SUBMIT, team):
            raise Forbidden(f"its owner {owner} may no longer submit to team {team}'s queues", owner=owner, team=team)
        return who

    def _owner_now(self, user: str) -> Caller | None:
        """:meth:`caller_of`, reused for :data:`REMEMBER_FOR` seconds as a token's owner is (a burst of a sweep's
        trials is one read); a change made here forgets it at once."""
        now = time.time()
        known = self._owners.get(user)
        if known is not None and now < known[1]:
            return known[0]
        who = self.caller_of(user)
        with self._lock:
            if len(self._owners) > 10_000:
                self._owners.clear()
            self._owners[user] = (who, now + REMEMBER_FOR)
        return who

    def run_as(self, owner: str | None) -> dict | None:
        """The Unix account a job of ``owner`` runs as: where users are on, this server is root and the
        user is mapped to one; None otherwise (the job runs as the server)."""
        if not self.accept_users or owner is None or os.geteuid() != 0:
            return None
        found = self.store.users(owner)
        if not found or not found[0].os_user:
            return None
        try:
            pw = pwd.getpwnam(found[0].os_user)
        except KeyError:  # never run as root instead
            raise TrainyardError(f"user {owner} is mapped to Unix account {found[0].os_user!r}, which this machine "
                                 "does not have") from None
        return {"uid": pw.pw_uid, "gid": pw.pw_gid, "name": pw.pw_name, "home": pw.pw_dir}

    # -- users and teams -------------------------------------------------------------

    def bootstrap(self, caller: Caller = LOCAL_ADMIN, name: str = FIRST_ADMIN) -> NewUser | None:
        """The first admin and its token, unless an admin exists (then None)."""
        if self.store.admins():
            return None
        return self.create_user(caller, UserCreate(name=name, role="admin"), action="admin.bootstrap")

    def create_user(self, caller: Caller, req: UserCreate, action: str = "user.create") -> NewUser:
        """A user with its first token (named ``first``)."""
        _admin_only(caller)
        if req.name == LOCAL_ADMIN.user:
            raise InvalidSpec.body("name", f"{req.name!r} is the server's own identity; pick another name")
        if req.os_user is not None:
            self._check_account(req.os_user)
        if req.role != "admin" and req.team is None:
            raise InvalidSpec.body("team", f"a {req.role} belongs to a team: give --team")
        admin = req.role == "admin"  # an admin given a team is also counted as its maintainer
        user = self.store.create_user(req.name, admin=admin, team=req.team,
                                      role="maintainer" if admin else req.role, os_user=req.os_user)
        token = self._new_token(req.name, "first", None)
        self.audit.record(caller, action, req.name, role=req.role, team=req.team, os_user=req.os_user)
        return NewUser(user=user, token=token)

    def set_account(self, caller: Caller, name: str, os_user: str | None) -> UserInfo:
        """The Unix account ``name``'s jobs run as (None: none of its own), checked as at :meth:`create_user`. Its
        attempts under way keep the account they started as; every later one (a retry, a requeue, a replica)
        runs as this one."""
        _admin_only(caller)
        was = self.store.get_user(name).os_user
        if os_user is not None and os_user != was:
            self._check_account(os_user, user=name)
        info = self.store.set_os_user(name, os_user)
        self._forget()  # a caller remembered (_known) carries its account
        self.audit.record(caller, "user.account", name, os_user=os_user, was=was)
        return info

    def _check_account(self, os_user: str, user: str | None = None) -> None:
        """Refuse (naming ``os_user``) an account this machine lacks, root's, or one another user's jobs run as:
        the account is what keeps one user's running jobs (their environment, secrets included, their files) from
        another's, so a shared one would let each user's jobs read the other's. Two creates at once both pass
        here: the store's unique index on the name refuses the second in the same words (not another name of
        the same uid, which only this check sees)."""
        try:
            uid = pwd.getpwnam(os_user).pw_uid
        except KeyError:
            raise account_refused(f"the server's machine has no account {os_user!r}") from None
        if uid == 0:
            raise account_refused(f"{os_user!r} is root's account (uid 0): its jobs would read every team's secrets "
                                  "and files; give the user an account of its own")
        for other in self.store.users():
            if other.name == user:  # the user whose account this is to be
                continue
            try:
                theirs = other.os_user is not None and pwd.getpwnam(other.os_user).pw_uid == uid
            except KeyError:  # an account the machine no longer has runs no job (run_as)
                theirs = False
            if theirs:
                raise account_taken(os_user, other.name)

    def set_membership(self, caller: Caller, user: str, team: str, role: str | None) -> UserInfo:
        _admin_only(caller)
        info = self.store.set_membership(user, team, role)
        self._forget()
        self.audit.record(caller, "user.membership", user, team=team, role=role)
        return info

    def users(self, caller: Caller) -> list[UserInfo]:
        _admin_only(caller)
        return self.store.users()

    def user(self, caller: Caller, name: str) -> UserInfo:
        if name != caller.user:
            _admin_only(caller)
        return self.store.get_user(name)

    def disable_user(self, caller: Caller, name: str) -> UserInfo:
        _admin_only(caller)
        info = self.store.set_disabled(name, True)
        self._forget()
        self.audit.record(caller, "user.disable", name)
        return info

    def enable_user(self, caller: Caller, name: str) -> UserInfo:
        """Undo :meth:`disable_user`: the user's tokens work again, those revoked or expired meanwhile excepted
        (disabling only suspends them), and new work may start in their name."""
        _admin_only(caller)
        info = self.store.set_disabled(name, False)
        self._forget()  # a refusal of their owner remembered (_owners) would outlive the change by REMEMBER_FOR
        self.audit.record(caller, "user.enable", name)
        return info

    def create_team(self, caller: Caller, req: TeamCreate) -> TeamInfo:
        _admin_only(caller)
        info = self.store.create_team(req.name)
        self.audit.record(caller, "team.create", req.name)
        return info

    def teams(self, caller: Caller) -> list[TeamInfo]:
        """Every team for an admin; the caller's own teams otherwise."""
        return [t for t in self.store.teams() if caller.admin or t.name in caller.teams]

    # -- tokens -----------------------------------------------------------------------

    def create_token(self, caller: Caller, req: TokenCreate) -> NewToken:
        user = req.user or caller.user
        if user != caller.user:
            _admin_only(caller)
        if user == LOCAL_ADMIN.user:
            raise Forbidden("the server's own token is not a user: create a user (trainyard admin user create) "
                            "and tokens for it")
        if any(t.name == req.name and t.revoked_at is None for t in self.store.tokens(user)):
            raise AlreadyExists(f"{user} has a token named {req.name} already; revoke it or pick another name",
                                field="name")
        expires_at = time.time() + req.expires_in if req.expires_in else None
        token = self._new_token(user, req.name, expires_at)
        self.audit.record(caller, "token.create", token.info.id, user=user, name=req.name, expires_at=expires_at)
        return token

    def tokens(self, caller: Caller, user: str | None = None) -> list[TokenInfo]:
        """The caller's tokens; an admin may ask for anyone's (``user``), or everyone's (``user="*"``)."""
        if user is not None and user != caller.user:
            _admin_only(caller)
            return self.store.tokens(None if user == "*" else user)
        return self.store.tokens(caller.user)

    def revoke_token(self, caller: Caller, token_id: str) -> TokenInfo:
        """Revoke one of the caller's tokens (an admin: anyone's); another user's is not found."""
        info = self.store.revoke_token(token_id, None if caller.admin else caller.user)
        self._forget()
        self.audit.record(caller, "token.revoke", token_id, user=info.user, name=info.name)
        return info

    def _forget(self) -> None:
        with self._lock:
            self._known.clear()
            self._owners.clear()
        for forget in self.forgotten:  # the nginx front's grants (front/grants.py)
            forget()

    def _new_token(self, user: str, name: str, expires_at: float | None) -> NewToken:
        secret = new_secret()
        return NewToken(info=self.store.add_token(user, name, token_hash(secret), expires_at), secret=secret)
