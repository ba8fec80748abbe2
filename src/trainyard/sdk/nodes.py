"""Node maintenance from the SDK: ``Client().cordon``, ``.drain``, ``.uncordon``, ``.node`` (admins).

```python
c = Client()
c.drain("gpu-7", reason="swap a DIMM", wait=600)   # returns once nothing runs there (or raises at 600 s)
c.uncordon("gpu-7")
```
"""

from __future__ import annotations

import time
from typing import Callable
from urllib.parse import quote

from pydantic import BaseModel

from trainyard import errors
from trainyard.sdk.http import Http
from trainyard.spec.records import NodeInfo


class Drained(BaseModel):
    node: NodeInfo
    stopped: list[str]  # the attempts told to stop; their jobs are back in line


def path(name: str, action: str = "") -> str:
    return f"/api/v1/nodes/{quote(name, safe='')}" + (f"/{action}" if action else "")


def get(http: Http, name: str) -> NodeInfo:
    return NodeInfo.model_validate(http.request("GET", path(name)).json())


def change(http: Http, name: str, action: str, reason: str | None) -> dict:
    return http.request("POST", path(name, action), json={"reason": reason} if reason else None).json()


def wait_empty(http: Http, name: str, timeout: float | None,
               progress: Callable[[NodeInfo], None] | None = None) -> NodeInfo:
    """Poll ``name`` until no live attempt has a replica there; TrainyardError past ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = 0.2
    while True:
        node = get(http, name)
        if progress is not None:
            progress(node)
        if node.attempts == 0:
            return node
        if deadline is not None and time.monotonic() >= deadline:
            raise errors.TrainyardError(f"node {name} still has {node.attempts} live attempt"
                                        f"{'s' if node.attempts != 1 else ''} after {timeout:g} s", node=name)
        time.sleep(pause)
        pause = min(pause * 1.5, 2.0)


class NodeCalls:
    """Client's calls on nodes (mixed into :class:`trainyard.sdk.client.Client`, whose ``http`` they use)."""

    http: Http

    def nodes(self) -> list[NodeInfo]:
        return [NodeInfo.model_validate(n) for n in self.http.request("GET", "/api/v1/nodes").json()]

    def node(self, name: str) -> NodeInfo:
        return get(self.http, name)

    def cordon(self, node: str, reason: str | None = None) -> NodeInfo:
        """Place no new attempt on ``node`` (an admin's); what runs there goes on."""
        return NodeInfo.model_validate(change(self.http, node, "cordon", reason))

    def drain(self, node: str, reason: str | None = None, wait: float | bool = False) -> Drained:
        """Cordon ``node`` and stop what runs there, requeueing it; with ``wait`` (seconds, or True for no
        limit), return once nothing runs there."""
        drained = Drained.model_validate(change(self.http, node, "drain", reason))
        if wait is not False:
            drained.node = wait_empty(self.http, node, None if wait is True else float(wait))
        return drained

    def uncordon(self, node: str) -> NodeInfo | None:
        """Let new attempts onto ``node`` again; None if it has left the cluster."""
        found = change(self.http, node, "uncordon", None)
        return NodeInfo.model_validate(found) if found else None
