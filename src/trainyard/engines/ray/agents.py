"""The Ray engine's node agents: one :class:`~trainyard.engines.ray.actor.NodeAgent` per node, found
or made by name, and which of them runs which replica.

An agent is a detached actor named ``agent-<node id>`` in the engine's namespace, pinned to its
node and holding no resources of its own; it is made on the first launch there and outlives the
server, so a restarted one finds it again by that name. Handles are cached; the cache is dropped
when an actor dies (it may have been an agent), and a handle is then looked up or made again.

Which node's agent runs a replica is kept here for the replicas this process launched or attached
to; for others the attempt's handle says (``{"agent": name, "node_id": id}`` per replica).
"""

from __future__ import annotations

import threading
from typing import Any

from trainyard.engines.ray.actor import AGENT_THREADS, NodeAgent
from trainyard.engines.ray.cluster import LAUNCHER_STARTERS_ENV
from trainyard.spec.records import AttemptInfo


def agent_name(node_id: str) -> str:
    return f"agent-{node_id}"


class NodeAgents:
    def __init__(self, ray: Any, namespace: str) -> None:
        self._ray = ray
        self.namespace = namespace
        self._remote = ray.remote(NodeAgent)
        self._lock = threading.Lock()
        self._handles: dict[str, Any] = {}             # node id -> its agent's handle
        self._running: dict[str, dict[int, str]] = {}  # attempt -> replica -> node id of the agent running it

    def on(self, node_id: str) -> Any:
        """The node's agent, made (detached, pinned to the node, no resources of its own) if it is not up."""
        with self._lock:
            agent = self._handles.get(node_id)
        if agent is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            agent = self._remote.options(
                name=agent_name(node_id), namespace=self.namespace, lifetime="detached", get_if_exists=True,
                max_restarts=0, max_concurrency=AGENT_THREADS, num_cpus=0, runtime_env=LAUNCHER_STARTERS_ENV,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote()
            with self._lock:
                self._handles[node_id] = agent
        return agent

    def existing(self, node_id: str) -> Any:
        """The node's agent if it is up; None rather than make one (on a node that may be gone)."""
        with self._lock:
            agent = self._handles.get(node_id)
        if agent is not None:
            return agent
        try:
            return self._ray.get_actor(agent_name(node_id), namespace=self.namespace)
        except ValueError:
            return None

    def drop_handles(self) -> None:
        """An actor died, maybe an agent: every agent is looked up (or made) again on its next use."""
        with self._lock:
            self._handles.clear()

    def runs(self, attempt_id: str, replica: int, node_id: str) -> None:
        """Note that the agent on ``node_id`` runs the replica."""
        with self._lock:
            self._running.setdefault(attempt_id, {})[replica] = node_id

    def node_of(self, attempt: AttemptInfo, replica: int) -> str | None:
        """The node id of the agent that runs the replica, or None if it has an actor of its own."""
        with self._lock:
            node_id = self._running.get(attempt.id, {}).get(replica)
        if node_id is not None:
            return node_id
        entries = (attempt.handle or {}).get("replicas") or []
        entry = entries[replica] if replica < len(entries) and isinstance(entries[replica], dict) else {}
        return entry.get("node_id") if entry.get("agent") else None

    def release(self, attempt_id: str) -> dict[int, str]:
        """Forget the attempt; replica -> node id of the agents that ran it, for the caller to tell them."""
        with self._lock:
            return self._running.pop(attempt_id, {})
