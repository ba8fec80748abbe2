"""The Ray engine's reconcile: what each replica the store believes live is doing, read from what the
watcher collected (:class:`~trainyard.engines.ray.ledger.ReplicaLedger`) and, for replicas this
process does not follow, from the cluster by name; plus the clean-up that rides on it.

A replica whose placement group Ray has not placed reads ``placing`` (:mod:`trainyard.engines.ray.placing`).
A replica launched before this process started is attached to (its agent's or its actor's run call
followed again), so a restarted control plane finds its work. Where a replica is lost, its node
gone, or a cancel overdue, the attempt's placement group and actors are released here. Now and then
placement groups that no live attempt owns (their attempt ended while no server ran) are removed.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from trainyard.engines.base import Observation
from trainyard.engines.ray import nodes as raynodes, placing
from trainyard.engines.ray.agents import NodeAgents
from trainyard.engines.ray.cluster import actor_name, find_placement_group, pg_name
from trainyard.engines.ray.ledger import ReplicaLedger
from trainyard.spec.records import AttemptInfo
from trainyard.spec.reports import LaunchResult
from trainyard.status import Reason

log = logging.getLogger("trainyard.engines.ray")
ORPHAN_SWEEP_EVERY = 10.0  # seconds between looks for placement groups no live attempt owns
CANCEL_SLACK = 15.0      # seconds past a cancel's grace period after which actors that still run are killed

Release = Callable[[str, int], None]      # attempt id, its replica count: remove its placement group and actors
Follow = Callable[[str, int, Any, None], None]  # attempt id, replica, its agent's node id or its actor, no config


class Reconciler:
    def __init__(self, ray: Any, namespace: str, agents: NodeAgents, ledger: ReplicaLedger,
                 release: Release, follow_agent: Follow, follow_actor: Follow) -> None:
        """``follow_agent`` and ``follow_actor`` attach to a launcher already started (they follow its run
        call and start nothing); ``release`` is idempotent."""
        self._ray = ray
        self.namespace = namespace
        self._agents = agents
        self._ledger = ledger
        self._release = release
        self._follow_agent = follow_agent
        self._follow_actor = follow_actor
        self._swept = 0.0

    def reconcile(self, attempts: list[AttemptInfo], raw: list[dict[str, Any]]) -> list[Observation]:
        """:meth:`trainyard.engines.base.Engine.reconcile`, given a fresh ``ray.nodes()`` answer."""
        alive = {n["NodeID"] for n in raynodes.alive(raw)}
        unplaced = placing.pending(self._ray, self.namespace, attempts)
        now = time.time()
        out: list[Observation] = []
        for a in attempts:
            lost_node = False
            for r in a.replicas:
                if r.status.is_terminal():
                    continue
                obs = self._observe(a, r.index, alive, raw)
                if obs.state == "alive" and a.id in unplaced:  # its run call waits for the group: no launcher yet
                    obs = Observation(a.id, r.index, "placing", detail=placing.reason(unplaced[a.id], a, now))
                if obs.result is not None and obs.result.kind is Reason.NODE_LOST:
                    lost_node = True
                out.append(obs)
            if lost_node:
                self._release(a.id, len(a.replicas))
        self._forget({a.id for a in attempts})
        return out

    def _observe(self, a: AttemptInfo, index: int, alive: set[str], raw: list[dict[str, Any]]) -> Observation:
        ledger = self._ledger
        key = (a.id, index)
        if key in ledger.results:
            return Observation(a.id, index, "exited", ledger.results[key])
        node = raynodes.find(raw, a.replicas[index].node)
        if node is None or node["NodeID"] not in alive:
            return Observation(a.id, index, "exited", LaunchResult(
                reason=Reason.NODE_LOST, message=f"Ray node {a.replicas[index].node} left the cluster"))
        with ledger.lock:
            followed = any(v == key for v in ledger.runs.values())
            unstarted = key in ledger.unstarted
            ledger.unstarted.discard(key)
            lost = key in ledger.lost
            ledger.lost.discard(key)
        if followed:
            return self._overdue_cancel(a, index) or Observation(a.id, index, "alive")
        if unstarted:
            return Observation(a.id, index, "not_launched")
        if lost:
            self._release(a.id, len(a.replicas))
            return Observation(a.id, index, "lost", detail="the node's agent restarted and its launcher left no result")
        node_id = self._agents.node_of(a, index)
        if node_id is not None and a.id not in ledger.cancelled:  # launched before this process started: attach
            self._follow_agent(a.id, index, node_id, None)
            return Observation(a.id, index, "alive")
        try:
            actor = self._ray.get_actor(actor_name(a.id, index), namespace=self.namespace)
        except ValueError:
            actor = None
        if actor is not None:  # launched before this process started: attach
            self._follow_actor(a.id, index, actor, None)
            return Observation(a.id, index, "alive")
        if a.id in ledger.cancelled:
            return Observation(a.id, index, "exited", LaunchResult(reason=Reason.CANCELLED,
                                                                  message="cancelled before it ran"))
        if not a.handle and find_placement_group(self._ray, a.id, self.namespace) is None:
            return Observation(a.id, index, "not_launched")
        self._release(a.id, len(a.replicas))
        return Observation(a.id, index, "lost", detail="the replica's Ray actor is gone and left no result")

    def _overdue_cancel(self, a: AttemptInfo, index: int) -> Observation | None:
        """A cancelled replica whose launcher outlived its grace period by far: remove it by force."""
        asked = self._ledger.cancelled.get(a.id)
        if asked is None or time.monotonic() - asked < self._ledger.grace.get(a.id, 10.0) + CANCEL_SLACK:
            return None
        self._release(a.id, len(a.replicas))
        return Observation(a.id, index, "exited", LaunchResult(
            reason=Reason.CANCELLED, message="the launcher did not stop in time; its actor was killed"))

    def _forget(self, active: set[str]) -> None:
        """Drop what ended attempts left in memory; now and then, remove orphaned placement groups."""
        in_flight = self._ledger.forget(active)
        now = time.monotonic()
        if now - self._swept < ORPHAN_SWEEP_EVERY:
            return
        self._swept = now
        prefix = pg_name("", self.namespace)
        for info in self._ray.util.placement_group_table().values():
            name = info.get("name") or ""
            attempt_id = name[len(prefix):]
            if name.startswith(prefix) and info.get("state") != "REMOVED" and attempt_id not in active | in_flight:
                log.info("removing orphaned placement group %s", name)
                self._release(attempt_id, 1)
