"""Secrets on request: set, list, delete; checked when a job naming them is submitted, and handed to its
launchers (and to nothing else) when its attempts start.

Who: a team's maintainers (and admins) set and delete its secrets; anyone who reads the team sees their names;
values are never read back through the API. A job reads the secrets of its own team (its queue's), and a job
of no team (an admin's, on the default queue) those of no team.
"""

from __future__ import annotations

import hmac
from typing import Callable

from trainyard.auth.permissions import LOCAL_ADMIN, Action, Caller
from trainyard.auth.tokens import token_hash
from trainyard.errors import AttemptNotFound, Conflict, Forbidden, InvalidSpec, SecretNotFound
from trainyard.services.audit import AuditLog
from trainyard.services.secret_box import SecretBox
from trainyard.spec.secrets import MAX_VALUE, SecretInfo
from trainyard.store import Store
from trainyard.store.secrets import SecretStore

MAX_PER_TEAM = 1000  # as GitHub's per organisation: each is a row of up to 64 KiB
NO_TEAM = "-"  # ?team=- (--team -): the secrets of no team, which only admins have, even an admin in a team


class SecretService:
    def __init__(self, store: Store, box: SecretBox, audit: AuditLog) -> None:
        self.rows = SecretStore(store)
        self.store = store
        self.box = box
        self.audit = audit
        # job id -> variables trainyard itself gives the job with its secrets (a Dask cluster's TLS identity)
        self.more: Callable[[str], dict[str, str]] = lambda job_id: {}

    def scope(self, caller: Caller, team: str | None) -> str | None:
        """The team a request means: the one named (``-``: no team, an admin's), else the caller's own (the
        first where it may submit), else no team (an admin's)."""
        if team == NO_TEAM:
            if not caller.admin:
                raise Forbidden("only admins have secrets of no team", field="team")
            return None
        if team is not None:
            if caller.admin:
                self.store.get_team(team)  # TeamNotFound, naming it
            return team
        teams = caller.submit_teams() or sorted(caller.teams)
        if teams:
            return teams[0]
        if caller.admin:
            return None
        raise Forbidden("you belong to no team: an admin adds you to one", field="team")

    def _manage(self, caller: Caller, team: str | None) -> None:
        if caller.admin or caller.may(Action.MANAGE_SECRETS, team):
            return
        if team is not None and team in caller.teams:
            raise Forbidden(f"your role in team {team} does not allow changing its secrets (maintainers do)",
                            field="team")
        raise Forbidden(f"you are not in team {team}" if team else "only admins set secrets of no team",
                        field="team")

    def set(self, name: str, value: str, team: str | None = None, caller: Caller = LOCAL_ADMIN) -> SecretInfo:
        team = self.scope(caller, team)
        self._manage(caller, team)
        have = self.rows.names(team)
        if name not in have and len(have) >= MAX_PER_TEAM:
            raise Conflict(f"{_team(team)} has {len(have)} secrets, the most a team may hold: delete one first",
                           team=team)
        created = self.rows.put(team, name, self.box.seal(value), len(value), caller.user)
        self.audit.record(caller, "secret.set", f"{team or NO_TEAM}/{name}", team=team, created=created)
        return self._info(name, team)

    def delete(self, name: str, team: str | None = None, caller: Caller = LOCAL_ADMIN) -> None:
        team = self.scope(caller, team)
        self._manage(caller, team)
        if not self.rows.delete(team, name):
            raise SecretNotFound(f"no secret {name} in {_team(team)}", secret=name, team=team)
        self.audit.record(caller, "secret.delete", f"{team or NO_TEAM}/{name}", team=team)

    def get(self, name: str, team: str | None = None, caller: Caller = LOCAL_ADMIN) -> SecretInfo:
        team = self.scope(caller, team)
        if team is not None and not (caller.admin or caller.may(Action.READ, team)):
            raise SecretNotFound(f"no team {team} among yours", team=team)  # another team's: not revealed
        return self._info(name, team)

    def _info(self, name: str, team: str | None) -> SecretInfo:
        found = [s for s in self.rows.infos([team]) if s.name == name]
        if not found:
            raise SecretNotFound(f"no secret {name} in {_team(team)}", secret=name, team=team)
        return found[0]

    def list(self, team: str | None = None, caller: Caller = LOCAL_ADMIN) -> list[SecretInfo]:
        """The secrets of ``team``, or of every team the caller reads (an admin: all)."""
        if team == NO_TEAM:
            return self.rows.infos([self.scope(caller, team)])
        if team is not None:
            if not (caller.admin or caller.may(Action.READ, team)):
                raise SecretNotFound(f"no team {team} among yours", team=team)  # another team's: not revealed
            return self.rows.infos([team])
        return self.rows.infos(None if caller.admin else sorted(caller.teams))

    def rotate(self, caller: Caller = LOCAL_ADMIN) -> dict[str, int]:
        """Read the key file again and re-seal every value with its first key (an admin's)."""
        if not caller.admin:
            raise Forbidden("only admins rotate the secrets' key")
        keys = self.box.reload()
        resealed = self.rows.reseal_all(self.box.reseal)
        self.audit.record(caller, "secret.rotate", None, keys=keys, resealed=resealed)
        return {"keys": keys, "resealed": resealed}

    def check(self, wanted: dict[str, str], team: str | None) -> None:
        """Each secret a job names exists in its team; else the spec is refused naming ``secrets.VAR``."""
        if not wanted:
            return
        have = self.rows.names(team)
        errors = [{"field": f"secrets.{var}", "line": None, "where": f"secrets.{var}",
                   "message": f"no secret {name!r} in {_team(team)} (trainyard secret ls; a maintainer sets it "
                              f"with: trainyard secret set {name}{' --team ' + team if team else ''})"}
                  for var, name in sorted(wanted.items()) if name not in have]
        if errors:
            raise InvalidSpec(errors=errors)

    def sizes(self, wanted: dict[str, str], team: str | None, exact: bool = False) -> dict[str, int]:
        """variable -> bytes of the value of the secret it names in ``team`` (those that exist), for the check
        of what one exec takes. The stored length counts characters: at most 4 bytes each in UTF-8, and no value
        is past MAX_VALUE, so that bound needs no value opened; ``exact`` opens them (only the server's memory
        sees them, as at an attempt's start) where the bound is too coarse to decide."""
        if not wanted:
            return {}
        if exact:
            sealed = self.rows.sealed(team, sorted(set(wanted.values())))
            size = {name: len(self.box.open(v, f"secret {name} of {_team(team)}").encode("utf-8", "surrogatepass"))
                    for name, v in sealed.items()}
        else:
            size = {i.name: min(4 * i.length, MAX_VALUE) for i in self.rows.infos([team]) if i.name in wanted.values()}
        return {var: size[name] for var, name in wanted.items() if name in size}

    def for_attempt(self, attempt_id: str, token: str | None, source: str | None = None) -> dict[str, str]:
        """What one attempt's launchers put in the command's environment: each variable its job's spec names,
        with its secret's value. Only for the attempt's own credential, and only while it runs; each read is
        in the audit log, as the job's owner's, from the launcher's address."""
        grant = self.rows.grant(attempt_id)
        if grant is None or not (grant.token_hash and token and hmac.compare_digest(grant.token_hash,
                                                                                   token_hash(token))):
            raise AttemptNotFound(f"no such attempt: {attempt_id}", attempt_id=attempt_id)
        if not grant.live:
            raise Forbidden("the attempt has ended", attempt_id=attempt_id)
        sealed = self.rows.sealed(grant.team, sorted(set(grant.wanted.values())))
        missing = sorted({n for n in grant.wanted.values() if n not in sealed})
        if missing:
            raise SecretNotFound(f"no secret {', '.join(missing)} in {_team(grant.team)} (deleted since the job "
                                 "was submitted?)", secret=missing[0], team=grant.team)
        env = {var: self.box.open(sealed[name], f"secret {name} of {_team(grant.team)}")
               for var, name in grant.wanted.items()}
        env.update(self.more(grant.job_id))
        self.audit.record(Caller(user=grant.owner or LOCAL_ADMIN.user, source=source), "secret.read", attempt_id,
                          job=grant.job_id, team=grant.team, secrets=sorted(set(grant.wanted.values())))
        return env


def _team(team: str | None) -> str:
    return f"team {team}" if team else "no team (an admin's default queue)"
