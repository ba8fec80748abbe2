"""Asking a running Dask scheduler what the cluster loop needs: clients, tasks, its
adaptive target, which workers joined; and retiring workers gracefully.

Over Dask's own RPC (``distributed.core.rpc``), which is not a client: the
server's questions never keep a cluster from being idle. ``security``: the
cluster's client credentials (a ``distributed.security.Security``), None for plain TCP.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("trainyard.clusters")
TIMEOUT = 5.0  # seconds for one question; a scheduler slower than that is asked again next tick
RETIRE_TIMEOUT = 120.0  # seconds Dask gets to move a retiring worker's data off


@dataclass(slots=True)
class Probe:
    clients: int  # connected clients, Dask's fire-and-forget one left out
    tasks: int  # tasks the scheduler holds (queued, running or kept in memory)
    target: int  # how many workers Dask's adaptive logic wants now
    workers: dict[str, str] = field(default_factory=dict)  # worker name (its job id) -> its address


def _state(dask_scheduler: Any = None) -> dict:
    """Runs inside the scheduler (pickled by value: this module need not be installed there)."""
    s = dask_scheduler
    return {"clients": sum(1 for c in s.clients if c != "fire-and-forget"), "tasks": len(s.tasks),
            "target": int(s.adaptive_target()), "workers": {str(ws.name): a for a, ws in s.workers.items()}}


def _dumps(fn: Any) -> bytes:
    import cloudpickle

    import trainyard.services.dask_probe as me

    cloudpickle.register_pickle_by_value(me)
    try:
        return cloudpickle.dumps(fn)
    finally:
        cloudpickle.unregister_pickle_by_value(me)


async def _ask(address: str, security: Any, handler: str, timeout: float, **kwargs: Any) -> Any:
    from distributed.core import rpc

    args = security.get_connection_args("client") if security is not None else {}
    async with rpc(address, timeout=min(timeout, 3.0), connection_args=args) as r:
        return await asyncio.wait_for(getattr(r, handler)(**kwargs), timeout)


def probe(address: str, security: Any = None) -> Probe | None:
    """The scheduler's state, or None when it does not answer (starting, or gone)."""
    try:
        out = asyncio.run(_ask(address, security, "run_function", TIMEOUT, function=_dumps(_state), wait=True))
    except Exception as e:  # unreachable, closing: the loop asks again
        log.debug("probing %s: %s", address, e)
        return None
    if not isinstance(out, dict) or out.get("status") != "OK":
        log.warning("probing %s: %s", address, out)
        return None
    return Probe(**out["result"])


def workers_to_close(address: str, n: int, security: Any = None) -> list[str]:
    """The addresses of the ``n`` workers Dask would rather lose (least data held)."""
    try:
        return list(asyncio.run(_ask(address, security, "workers_to_close", TIMEOUT, n=n)))
    except Exception as e:
        log.warning("asking %s which workers to close: %s", address, e)
        return []


def retire(address: str, names: list[str], security: Any = None) -> None:
    """Move the workers' data to the others, then close them (their jobs end as succeeded)."""
    try:
        asyncio.run(_ask(address, security, "retire_workers", RETIRE_TIMEOUT, names=names, close_workers=True,
                         remove=True))
    except Exception as e:
        log.warning("retiring %s on %s: %s", names, address, e)
