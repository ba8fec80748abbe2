"""The leader's webhook loop: job ends become deliveries, and deliveries are POSTed, with retries.

Each cycle 1 reads the events after its cursor (job ends only), matches each
against every subscription (its events, scope, queue and name glob, and that its
owner may still see the job), and records what is owed with the cursor's move,
in one transaction; 2 takes up to 8 due deliveries (each due to no other sender
for 5 minutes) and POSTs them at once. A 2xx answer is delivered; anything
else is tried again after 5 s, 30 s, 2 min, 10 min and 30 min, then given up
(recorded, with the last error). Delivery is at least once: a server that dies
between a POST and its record sends that event again, 5 minutes later.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

import httpx

from trainyard.auth.permissions import Caller
from trainyard.services.ticker import Ticker
from trainyard.services.webhooks import WebhookService
from trainyard.spec.label_selector import Selector, matches, parse_selector
from trainyard.spec.webhooks import Scope, SubscriptionInfo
from trainyard.store.webhooks import Ended

log = logging.getLogger("trainyard.webhooks")
BACKOFF = (5.0, 30.0, 120.0, 600.0, 1800.0)  # seconds before each retry; then it is given up
KEEP = 7 * 86400.0  # seconds a sent or given-up delivery is kept (its subscription's counts and list)
SENDERS = 8  # POSTs in flight at once
LOOK = 2.0  # seconds between looks (not woken by job news: a burst's thousands of ends are read in one look)


class WebhookLoop(Ticker):
    name = "trainyard-webhooks"
    log = log

    def __init__(self, service: WebhookService, server_url: Any = lambda: "") -> None:
        super().__init__()
        self.service = service
        self.store = service.store
        self.server_url = server_url  # where the UI is, for the links in the events
        self._sleep = LOOK
        self._forgot = 0.0  # when old deliveries were last deleted

    def start(self) -> None:
        self.store.start_cursor()
        super().start()

    def pause(self) -> float:
        return self._sleep

    def cycle(self, now: float | None = None) -> None:
        self.enqueue(self.store.subscriptions(counts=False))
        if time.time() - self._forgot > 600:
            self._forgot = time.time()
            self.store.forget(self._forgot - KEEP)
        due = self.store.due(time.time() if now is None else now, SENDERS)  # no more taken than sent at once
        if due:  # at once: a receiver that is slow to answer (up to its timeout) holds up no other
            with ThreadPoolExecutor(max_workers=min(SENDERS, len(due)), thread_name_prefix="webhook") as pool:
                list(pool.map(self.send, due))
        soonest = self.store.next_due()
        self._sleep = LOOK if soonest is None else min(LOOK, max(0.05, soonest - time.time()))

    def enqueue(self, subs: list[SubscriptionInfo]) -> None:
        cursor, upto, ends = self.store.ended_since()
        if upto == cursor:
            return
        callers = {sub.owner: self.service.identity.caller_of(sub.owner) for sub in subs}  # one read a subscriber
        owed = [self._delivery(sub, end) for end in ends for sub in subs if self._matches(sub, end, callers[sub.owner])]
        if not self.store.owe(cursor, upto, owed):
            log.info("webhooks: another server read events %d..%d first", cursor, upto)

    def _matches(self, sub: SubscriptionInfo, end: Ended, caller: Caller | None) -> bool:
        """Whether ``end`` is one ``sub`` asked for, and its owner (``caller``, as seen now) may see the job."""
        if end.kind != sub.kind or end.status not in sub.on or (sub.queue and end.queue != sub.queue):
            return False
        if sub.name and not fnmatch.fnmatchcase(end.name, sub.name):
            return False
        if sub.labels and not matches(end.labels, _selector(sub.labels)):
            return False
        if sub.scope is Scope.MINE and end.owner != sub.owner:
            return False
        if sub.scope is Scope.TEAM and end.team != sub.team:
            return False
        return caller is not None and caller.sees(end.team, end.owner)

    def _delivery(self, sub: SubscriptionInfo, end: Ended) -> dict[str, Any]:
        page = "jobs" if end.kind == "job" else "pipelines"
        url = f"{self.server_url().rstrip('/')}/{page}/{end.object_id}"
        what = {"id": end.object_id, "name": end.name, "status": end.status, "reason": end.reason,
                "team": end.team, "owner": end.owner, "url": url}
        if end.kind == "job":
            what["queue"], what["labels"] = end.queue, end.labels or {}
        payload = {"event": f"{end.kind}.{end.status}", "at": end.at, "subscription": sub.id, end.kind: what}
        return {"subscription_id": sub.id, "webhook": sub.webhook, "event_id": end.event_id, "kind": end.kind,
                "object_id": end.object_id, "event": end.status, "payload": payload}

    def send(self, d: dict[str, Any]) -> None:
        attempts = d["attempts"] + 1
        hook = self.service.hooks.get(d["webhook"])
        if hook is None:
            self.store.retry(d["id"], attempts, f"webhook {d['webhook']} is no longer in the server's config", None)
            return
        body = d["payload"] if hook.format == "json" else {"text": slack_text(d["payload"])}
        error = post(hook.url, body, hook.timeout)
        if error is None:
            self.store.sent(d["id"], attempts)
            return
        later = time.time() + BACKOFF[attempts - 1] if attempts <= len(BACKOFF) else None
        self.store.retry(d["id"], attempts, error, later)
        log.warning("webhook %s, %s %s %s: %s (%s)", d["webhook"], d["kind"], d["object_id"], d["event"], error,
                    "given up" if later is None else f"again in {BACKOFF[attempts - 1]:g}s")


def post(url: str, body: Any, timeout: float) -> str | None:
    """POST ``body`` as JSON; None when answered 2xx, else why not. The whole answer must come within ``timeout``:
    httpx's own timeout is per read, so a receiver sending a byte now and then would hold a sender (and the cycle
    that waits for it) for good; and no more than the first 200 bytes of a refusal are read."""
    try:
        return asyncio.run(asyncio.wait_for(_post(url, body, timeout), timeout))
    except (asyncio.TimeoutError, httpx.TimeoutException):
        return f"TimeoutError: no whole answer within {timeout:g} s"
    except httpx.HTTPError as e:
        return f"{type(e).__name__}: {e}"


async def _post(url: str, body: Any, timeout: float) -> str | None:
    async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
        async with client.stream("POST", url, json=body, headers={"Accept-Encoding": "identity"}) as r:
            if r.is_success:
                return None
            said = b""
            async for chunk in r.aiter_raw():
                said += chunk
                if len(said) >= 200:
                    break
            return f"HTTP {r.status_code}: {said[:200].decode(errors='replace')}"


@lru_cache(maxsize=256)
def _selector(text: str) -> Selector:
    """A subscription's selector, parsed once (it was checked when subscribed)."""
    return parse_selector(text, "labels")


def slack_text(payload: dict[str, Any]) -> str:
    """One line for a chat: ``Job *train* (j-1) failed: Error(exit 1) <url|open>``."""
    kind = "job" if "job" in payload else "pipeline_run"
    o = payload[kind]
    why = f": {o['reason']}" if o.get("reason") and o["reason"] != o["status"] else ""
    return f"{'Job' if kind == 'job' else 'Pipeline run'} *{o['name']}* ({o['id']}) {o['status']}{why} <{o['url']}|open>"
