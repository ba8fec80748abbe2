"""/api/v1/webhooks and /api/v1/subscriptions: thin; the rules live in services/webhooks, the sending in
services/webhook_loop. Webhooks are the admin's (the server's config); a user sees their names, never their
addresses, and subscribes them to the ends of jobs they may see."""

from __future__ import annotations

from fastapi import APIRouter, Response

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.api.paging import SubscriptionPagingDep
from trainyard.spec.paging import Page
from trainyard.spec.webhooks import DeliveryInfo, SubscriptionCreate, SubscriptionInfo, WebhookInfo

router = APIRouter(prefix="/api/v1", tags=["webhooks"])


@router.get("/webhooks")
def list_webhooks(p: PlatformDep, caller: CallerDep) -> list[WebhookInfo]:
    """The webhooks you may subscribe (names and kinds)."""
    return p.webhooks.webhooks(caller)


@router.get("/subscriptions")
def list_subscriptions(p: PlatformDep, caller: CallerDep, paging: SubscriptionPagingDep) -> Page[SubscriptionInfo]:
    """A page of yours (an admin's: everyone's), newest first, with how many deliveries went, wait, or were given
    up."""
    return p.webhooks.page(caller, paging)


@router.post("/subscriptions", status_code=201)
def subscribe(body: SubscriptionCreate, p: PlatformDep, caller: CallerDep) -> SubscriptionInfo:
    return p.webhooks.subscribe(body, caller)


@router.get("/subscriptions/{sub_id}")
def get_subscription(sub_id: str, p: PlatformDep, caller: CallerDep) -> SubscriptionInfo:
    return p.webhooks.get(sub_id, caller)


@router.get("/subscriptions/{sub_id}/deliveries")
def deliveries(sub_id: str, p: PlatformDep, caller: CallerDep) -> list[DeliveryInfo]:
    """Its latest 50 deliveries, newest first: sent, pending (with attempts so far) or failed (with why)."""
    return p.webhooks.deliveries(sub_id, caller)


@router.delete("/subscriptions/{sub_id}", status_code=204)
def unsubscribe(sub_id: str, p: PlatformDep, caller: CallerDep) -> Response:
    p.webhooks.delete(sub_id, caller)
    return Response(status_code=204)
