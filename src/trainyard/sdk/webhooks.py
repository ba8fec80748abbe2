"""Subscriptions to the server's webhooks: ``Client().notify``.

```python
c = Client()
c.notify.webhooks()                                    # the ones you may use: names and kinds
c.notify.subscribe("ml-alerts", on=["failed"], scope="team")   # your first team's failed jobs
c.notify.deliveries(sub.id)                            # sent, pending or given up, and why
```
"""

from __future__ import annotations

from pydantic import TypeAdapter, ValidationError

from trainyard.sdk import paging
from trainyard import errors
from trainyard.sdk.http import Http
from trainyard.spec.lines import validation_errors
from trainyard.spec.webhooks import DeliveryInfo, SubscriptionCreate, SubscriptionInfo, WebhookInfo

_HOOKS = TypeAdapter(list[WebhookInfo])
_DELIVERIES = TypeAdapter(list[DeliveryInfo])


class Notify:
    def __init__(self, http: Http) -> None:
        self.http = http

    def webhooks(self) -> list[WebhookInfo]:
        return _HOOKS.validate_json(self.http.request("GET", "/api/v1/webhooks").content)

    def subscribe(self, webhook: str, on: list[str] | None = None, scope: str = "mine", team: str | None = None,
                  queue: str | None = None, name: str | None = None, kind: str = "job",
                  labels: str | None = None) -> SubscriptionInfo:
        """Have ``webhook`` told when jobs end as ``on`` says (default: failed): your own (``mine``), a team's
        (``team``, default your first), or (an admin) every job (``all``); only ``queue``'s, or those whose
        name matches the glob ``name``, or those the label selector ``labels`` picks (``"stage=prod,!scratch"``);
        ``kind="pipeline_run"``: pipeline runs' ends. Checked here first: a bad field is named before anything
        is sent."""
        data = {"webhook": webhook, "on": on or ["failed"], "scope": scope, "team": team, "queue": queue, "name": name,
                "kind": kind, "labels": labels}
        try:
            req = SubscriptionCreate.model_validate(data)
        except ValidationError as e:
            raise errors.InvalidSpec(errors=validation_errors(e, {}, "<subscription>", SubscriptionCreate)) from None
        body = req.model_dump(mode="json", exclude_none=True)
        return SubscriptionInfo.model_validate_json(self.http.json_call("POST", "/api/v1/subscriptions", body=body))

    def list(self, limit: int | None = None) -> list[SubscriptionInfo]:
        """Your subscriptions (an admin's: everyone's), newest first: all, or the first ``limit``."""
        return paging.every(self.http, "/api/v1/subscriptions", SubscriptionInfo, limit=limit)

    def page(self, limit: int = paging.LIST_LIMIT, cursor: str | None = None) -> paging.Page[SubscriptionInfo]:
        """One page of subscriptions, newest first; its ``next_cursor`` as ``cursor`` gives the next."""
        return paging.page(self.http, "/api/v1/subscriptions", SubscriptionInfo, limit=limit, cursor=cursor)

    def get(self, sub_id: str) -> SubscriptionInfo:
        return SubscriptionInfo.model_validate_json(self.http.request("GET", f"/api/v1/subscriptions/{sub_id}").content)

    def deliveries(self, sub_id: str) -> list[DeliveryInfo]:
        return _DELIVERIES.validate_json(
            self.http.request("GET", f"/api/v1/subscriptions/{sub_id}/deliveries").content)

    def delete(self, sub_id: str) -> None:
        self.http.request("DELETE", f"/api/v1/subscriptions/{sub_id}")
