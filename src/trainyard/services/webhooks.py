"""Subscriptions to the server's webhooks: who may subscribe which, to which jobs' ends.

A subscription watches the caller's own jobs (``mine``), a team's (any member,
viewers too: they see them anyway), or everyone's (admins). A webhook whose
config names ``teams`` is for those teams' users only. What turns job ends into
deliveries and sends them is the leader's :mod:`trainyard.services.webhook_loop`.
"""

from __future__ import annotations

from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.errors import Conflict, Forbidden, InvalidSpec, NotFound
from trainyard.services.audit import AuditLog
from trainyard.services.identity import IdentityService
from trainyard.config import WebhookSettings
from trainyard.spec.paging import Page, Paging
from trainyard.spec.webhooks import MAX_PER_USER, DeliveryInfo, Scope, SubscriptionCreate, SubscriptionInfo, WebhookInfo
from trainyard.store import Store
from trainyard.store.webhooks import WebhookStore


def _invalid(field: str, message: str) -> InvalidSpec:
    return InvalidSpec.body(field, message)  # a subscription's field: no spec


class WebhookService:
    def __init__(self, store: Store, hooks: dict[str, WebhookSettings], identity: IdentityService,
                 audit: AuditLog) -> None:
        self.store = WebhookStore(store)
        self.hooks = hooks
        self.identity = identity
        self.audit = audit

    def usable(self, name: str, caller: Caller) -> bool:
        hook = self.hooks.get(name)
        return hook is not None and (caller.admin or hook.teams is None or bool(set(hook.teams) & set(caller.teams)))

    def webhooks(self, caller: Caller = LOCAL_ADMIN) -> list[WebhookInfo]:
        """The webhooks the caller may subscribe: names and kinds, never addresses."""
        return [WebhookInfo(name=n, format=h.format, teams=h.teams) for n, h in sorted(self.hooks.items())
                if self.usable(n, caller)]

    def subscribe(self, req: SubscriptionCreate, caller: Caller = LOCAL_ADMIN) -> SubscriptionInfo:
        if not self.usable(req.webhook, caller):
            mine = ", ".join(h.name for h in self.webhooks(caller)) or "none"
            raise _invalid("webhook", f"no webhook {req.webhook!r} you may use on this server (yours: {mine}; "
                                      "the admin names them in the server's config, webhooks:)")
        team = None
        if req.scope is Scope.ALL and not caller.admin:
            raise Forbidden("only admins may watch every job (scope all)")
        if req.scope is Scope.TEAM:
            team = req.team or next(iter(sorted(caller.teams)), None)
            if team is None or not (caller.admin or team in caller.teams):
                raise _invalid("team", f"you are in no team {req.team!r}" if req.team else
                               "you are in no team: give one (team) or watch your own jobs (scope mine)")
            teams = self.hooks[req.webhook].teams
            if teams is not None and team not in teams and not caller.admin:
                raise _invalid("team", f"webhook {req.webhook} is for teams {', '.join(teams)} only")
        if self.store.count(caller.user) >= MAX_PER_USER:
            raise Conflict(f"{MAX_PER_USER} subscriptions already, the most a user has; remove one first")
        sub_id = self.store.subscribe(caller.user, req, team)
        self.audit.record(caller, "subscription.create", sub_id, webhook=req.webhook, scope=req.scope.value,
                          team=team)
        return self.store.get(sub_id)

    def page(self, caller: Caller = LOCAL_ADMIN, paging: Paging = Paging()) -> Page[SubscriptionInfo]:
        """A page of the caller's subscriptions (an admin's: everyone's), newest first, and the next one's cursor."""
        items, cursor = self.store.page(None if caller.admin else caller.user, paging)
        return Page[SubscriptionInfo](items=items, next_cursor=cursor)

    def get(self, sub_id: str, caller: Caller = LOCAL_ADMIN) -> SubscriptionInfo:
        found = self.store.get(sub_id)
        if not (caller.admin or found.owner == caller.user):
            raise NotFound(f"no such subscription: {sub_id}", subscription=sub_id)  # another's is not shown
        return found

    def delete(self, sub_id: str, caller: Caller = LOCAL_ADMIN) -> None:
        self.get(sub_id, caller)
        self.store.unsubscribe(sub_id)
        self.audit.record(caller, "subscription.delete", sub_id)

    def deliveries(self, sub_id: str, caller: Caller = LOCAL_ADMIN) -> list[DeliveryInfo]:
        self.get(sub_id, caller)
        return self.store.deliveries(sub_id)
