"""Webhooks (named by the admin in the server's config) and subscriptions to them (made by users).

The server's ``--config``:

```yaml
webhooks:
  ml-alerts: {url: "https://hooks.slack.com/services/T0/B0/XXXX", format: slack, teams: [vision]}
  ops: {url: "http://ops.internal:8080/trainyard"}       # format json (the default): the event as JSON
```

A user subscribes one to the ends of jobs they may see (``trainyard notify add ml-alerts --on failed``):
their own, a team's, or (an admin) everyone's, narrowed by queue, name or labels. The URL stays with the
server (a Slack hook holds its token): users name webhooks, never see or give addresses, so no request
can make the server call an address of the caller's choosing.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from trainyard.spec.label_selector import MAX_TEXT, parse_selector, selector_text
from trainyard.spec.names import check_name

EVENTS = ("succeeded", "failed", "cancelled")  # the ends of a job (or pipeline run) a subscription may ask for
Kind = Literal["job", "pipeline_run"]
Event = Literal["succeeded", "failed", "cancelled"]
MAX_PER_USER = 100  # subscriptions of one user


class Scope(str, Enum):
    MINE = "mine"  # the subscriber's own jobs, whatever their team
    TEAM = "team"  # every job of a team the subscriber belongs to
    ALL = "all"    # every job (admins only)


class SubscriptionCreate(BaseModel):
    """``POST /api/v1/subscriptions``."""

    model_config = {"extra": "forbid"}

    webhook: str = Field(description="a webhook of the server's config (GET /api/v1/webhooks)")
    on: list[Event] = Field(default_factory=lambda: ["failed"], min_length=1, max_length=3,
                            description="which ends: succeeded, failed, cancelled")
    kind: Kind = Field("job", description="whose ends: jobs', or pipeline runs' (their steps are jobs)")
    scope: Scope = Scope.MINE
    team: str | None = Field(None, description="with scope team: which (default your first)")
    queue: str | None = Field(None, description="only jobs of this queue")
    name: str | None = Field(None, max_length=63, description="only jobs whose name matches this glob (nightly-*)")
    labels: str | None = Field(None, max_length=MAX_TEXT, description="only jobs this label selector picks "
                               "(stage=prod,owner in (ann,bob),!scratch)")

    @field_validator("webhook", "team", "queue")
    @classmethod
    def _names(cls, v: str | None) -> str | None:
        return check_name(v)

    @field_validator("name")
    @classmethod
    def _glob(cls, v: str | None) -> str | None:
        if v is not None and (not v or any(c in v for c in "\n\r\0")):
            raise ValueError("a glob such as nightly-* (one line)")
        return v

    @field_validator("labels")
    @classmethod
    def _selector(cls, v: str | None) -> str | None:
        if v is None:
            return None
        try:  # kept as it reads back: one spelling of each selector
            return selector_text(parse_selector(v, "labels")) or None
        except ValueError as e:
            raise ValueError(str(e).removeprefix("labels: ")) from None

    @model_validator(mode="after")
    def _scope(self) -> "SubscriptionCreate":
        if self.team is not None and self.scope is not Scope.TEAM:
            raise ValueError("team: give it with scope team")
        if self.queue is not None and self.kind != "job":
            raise ValueError("queue: a pipeline run has none (its steps' jobs do)")
        if self.labels is not None and self.kind != "job":
            raise ValueError("labels: a pipeline run has none (its steps' jobs do)")
        self.on = sorted(set(self.on), key=EVENTS.index)
        return self


class SubscriptionInfo(BaseModel):
    id: str
    owner: str
    webhook: str
    on: list[Event]
    kind: Kind = "job"
    scope: Scope
    team: str | None = None
    queue: str | None = None
    name: str | None = None
    labels: str | None = None
    created_at: float
    delivered: int = 0
    pending: int = 0
    failed: int = 0


class WebhookInfo(BaseModel):
    """What a user sees of a webhook: its name and kind, never its address."""

    name: str
    format: str
    teams: list[str] | None = None


class DeliveryInfo(BaseModel):
    id: int
    subscription_id: str
    webhook: str
    kind: Kind = "job"
    object_id: str = Field(description="the job's id, or the pipeline run's")
    event: Event
    status: Literal["pending", "sent", "failed"]
    attempts: int
    last_error: str | None = None
    created_at: float
    sent_at: float | None = None
