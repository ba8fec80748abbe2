"""Attempts whose placement group Ray has not placed yet, and what their jobs say about it.

A group stays pending while its node lacks the room Ray would reserve for it. trainyard plans from
the nodes' totals and its own attempts, so what it cannot see is most often the reason: another
user of the cluster (a Ray job, an actor, a group of their own) holds the node's CPUs, memory or
GPUs. The attempt stays admitted and waits, as a Ray user's own group would: Ray places it the
moment the room is free, and the replica's launcher starts then (a requeue would be admitted to
the same node at once, since the planner sees it as free). Its replicas read ``placing`` meanwhile,
which the scheduler neither takes for a silent launcher nor kills, and once a group has waited
:data:`SAY_AFTER` seconds, the job's reason says so, with what Ray says of it.
"""

from __future__ import annotations

from typing import Any

from trainyard.engines.ray.cluster import pg_name
from trainyard.spec.records import AttemptInfo
from trainyard.spec.units import format_memory
from trainyard.status import AttemptStatus

SAY_AFTER = 10.0  # seconds a group may stay pending before its job says so: Ray places one in ms when it can

# what Ray's scheduling state of a pending group (PlacementGroupStats.SchedulingState) means for people
MEANING = {
    "NO_RESOURCES": "the node does not have that much free; something outside trainyard (another Ray user's "
                    "tasks, actors or placement groups) may hold it",
    "INFEASIBLE": "Ray finds no node that could ever hold it (as it sees the nodes' resources and labels)",
    "QUEUED": "it is still in Ray's queue",
    "SCHEDULING_STARTED": "Ray is placing it",
    "FAILED_TO_COMMIT_RESOURCES": "the node refused the reservation Ray asked of it; Ray tries again",
}


def pending(ray: Any, namespace: str, attempts: list[AttemptInfo]) -> dict[str, dict[str, Any]]:
    """``placement_group_table`` entries of the starting attempts' groups that Ray has not placed, by
    attempt id: one read of the GCS, none while no attempt is starting, empty if the GCS cannot answer."""
    starting = {a.id for a in attempts if a.status == AttemptStatus.STARTING}
    if not starting:
        return {}
    try:
        table = ray.util.placement_group_table()
    except Exception:  # the GCS is away for a moment: the next cycle asks again
        return {}
    prefix = pg_name("", namespace)
    out = {}
    for info in table.values():
        name = info.get("name") or ""
        if name.startswith(prefix) and name[len(prefix):] in starting and info.get("state") == "PENDING":
            out[name[len(prefix):]] = info
    return out


def reason(info: dict[str, Any], attempt: AttemptInfo, now: float) -> str:
    """What the job says while its group waits; empty before it has waited :data:`SAY_AFTER` seconds."""
    waited = now - attempt.created_at
    if waited < SAY_AFTER:
        return ""
    stats = info.get("stats") or {}
    state = str(stats.get("scheduling_state") or "")
    tries = stats.get("scheduling_attempt")
    said = f"Ray says {state}" + (f" after {tries} tries" if tries else "") if state else "Ray says nothing of it"
    asks = "; ".join(f"{_bundle(b)} on node {attempt.replicas[int(i)].node}"
                     for i, b in sorted((info.get("bundles") or {}).items()) if int(i) < len(attempt.replicas))
    meaning = MEANING.get(state)
    return (f"Ray has not placed the placement group {info.get('name')} for {_waited(waited)}: {said}"
            + (f" ({meaning})" if meaning else "") + (f"; it asks {asks}" if asks else "")
            + "; the job starts once Ray places it (cancel it to give up)")


def _bundle(resources: dict[str, float]) -> str:
    parts = []
    for key, value in sorted(resources.items()):
        if key == "memory":
            parts.append(f"memory {format_memory(int(value))}")
        elif not key.startswith(("bundle_group_", "node:")):
            parts.append(f"{key} {value:g}")
    return ", ".join(parts) or "nothing"


def _waited(seconds: float) -> str:
    """Coarse, so the reason (written where it changes) changes every 10 s at first, then every minute."""
    if seconds < 60:
        return f"{int(seconds // 10 * 10)} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    return f"{seconds / 3600:.1f} h"
