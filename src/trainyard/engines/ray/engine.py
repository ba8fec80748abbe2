"""The Ray engine: each attempt is a placement group; a node's agent (or, for a replica that asks for
GPUs, an actor of its own) runs each replica's launcher.

Ray places and accounts; trainyard keeps the queue, the history, logs and
metrics. The planner picks the node of every replica from :meth:`nodes`; each
bundle is pinned to that node with a label selector on ``ray.io/node-id``, so
Ray and the planner agree on where things run. The placement strategy is
``STRICT_SPREAD`` when the spec asks ``placement: spread``, ``PACK`` otherwise.

A replica that asks for no GPUs is started by its node's agent
(:class:`~trainyard.engines.ray.actor.NodeAgent`, one detached actor per node,
made on the first launch there; :mod:`trainyard.engines.ray.agents` finds them)
once its bundle is placed: no Ray worker process is started per job. A replica that asks for GPUs gets
an actor of its own in its bundle, the only way to learn which GPU ids Ray gave it.

Names, not memory, are the source of truth, so a restarted control plane finds
everything again: placement group ``trainyard-<attempt id>``, agents
``agent-<node id>`` and actors ``<attempt id>-r<replica>`` in the ``trainyard``
namespace, all detached (they outlive the driver, i.e. the trainyard server);
the attempt's handle says which of the two runs each replica.

A watcher thread waits on every replica's ``run`` call; once every replica of
an attempt has exited, the placement group is removed, which also ends the
actors: nothing is left holding resources. What it collects goes in a
:class:`~trainyard.engines.ray.ledger.ReplicaLedger`, which
:mod:`trainyard.engines.ray.reconcile` reads to answer :meth:`reconcile`.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from trainyard.engines.base import Engine, Observation
from trainyard.engines.leftovers import Leftover
from trainyard.engines.ray import nodes as raynodes
from trainyard.engines.ray.actor import LOST, NOT_STARTED, ReplicaActor
from trainyard.engines.ray.agents import NodeAgents, agent_name
from trainyard.engines.ray.cluster import (LAUNCHER_STARTERS_ENV, actor_name, check_reachable, find_placement_group,
                                         free_port, pg_name)
from trainyard.engines.ray.ledger import ReplicaLedger
from trainyard.engines.ray.reconcile import Reconciler
from trainyard.errors import TrainyardError, Unsupported
from trainyard.launch.config import LaunchConfig
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, NodeInfo
from trainyard.spec.reports import LaunchResult

log = logging.getLogger("trainyard.engines.ray")
NODES_TTL = 0.5          # seconds a ray.nodes() answer is reused (the planner asks on every cycle)
LEFTOVERS_TIMEOUT = 120.0  # seconds the agents may take to remove a sweep's folders


class RayEngine(Engine):
    name = "ray"

    def __init__(self, address: str, root: Path, namespace: str = "trainyard") -> None:
        """Connect to the cluster at ``address`` (``host:port`` of the head's GCS, or ``ray://host:10001``).

        ``root`` is where replica folders, virtualenvs and checkpoints go on
        every node, unless a node's ``TRAINYARD_NODE_ROOT`` names its own. It needs
        no sharing when artifacts are on an object store (checkpoints are synced
        through it); with a folder as the store it must be shared (NFS) for
        checkpoints to follow a retry to another node.
        """
        check_reachable(address)
        try:
            import ray
        except ImportError:
            raise TrainyardError("the ray engine needs Ray: pip install 'trainyard[ray]'") from None

        self._ray = ray
        self.root = Path(root)
        self.namespace = namespace
        ray.init(address=address, namespace=namespace, logging_level=logging.WARNING, log_to_driver=False,
                 configure_logging=False)
        self._remote = ray.remote(ReplicaActor)
        self._agents = NodeAgents(ray, namespace)
        self._raw: list[dict[str, Any]] = []
        self._raw_at = 0.0
        self._ledger = ReplicaLedger()
        self._reconciler = Reconciler(ray, namespace, self._agents, self._ledger, release=self._release,
                                      follow_agent=self._on_agent, follow_actor=self._follow)
        self._closed = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="trainyard-ray-watcher", daemon=True)
        self._watcher.start()

    # -- nodes -----------------------------------------------------------------

    def _nodes_raw(self, fresh: bool = False) -> list[dict[str, Any]]:
        now = time.monotonic()
        if fresh or now - self._raw_at > NODES_TTL:
            self._raw, self._raw_at = self._ray.nodes(), now
        return self._raw

    def nodes(self) -> list[NodeInfo]:
        return [raynodes.node_info(n) for n in raynodes.alive(self._nodes_raw())]

    def _node(self, name: str) -> dict[str, Any]:
        found = raynodes.find(self._nodes_raw(), name) or raynodes.find(self._nodes_raw(fresh=True), name)
        if found is None:
            raise RuntimeError(f"no Ray node {name!r} in the cluster")
        return found

    def validate(self, spec: JobSpec) -> None:
        # refused at submit rather than run in an image on the node: a Ray worker node has no
        # runtime trainyard can count on (see the README, "Container images")
        if spec.image and spec.image_fallback == "refuse":
            raise Unsupported("the ray engine runs jobs in the node's Python environment; `image` is not "
                              "supported there (use `env.pip`, or the local engine)", field="image")

    def rendezvous(self, attempt: AttemptInfo) -> tuple[str, int]:
        address = self._node(attempt.replicas[0].node)["NodeManagerAddress"]
        return address, free_port(address)

    # -- launch / cancel ---------------------------------------------------------

    def launch(self, attempt: AttemptInfo, spec: JobSpec, configs: list[LaunchConfig]) -> dict[str, Any]:
        ray = self._ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        r = spec.resources
        self._ledger.grace[attempt.id] = spec.grace_period
        node_ids = [self._node(rep.node)["NodeID"] for rep in attempt.replicas]
        pg = find_placement_group(self._ray, attempt.id, self.namespace)
        if pg is None:
            strategy = "STRICT_SPREAD" if getattr(spec, "placement", "pack") == "spread" else "PACK"
            pg = placement_group(
                [raynodes.bundle(r.cpu, r.memory, r.gpu) for _ in configs], strategy=strategy,
                name=pg_name(attempt.id, self.namespace), lifetime="detached",
                bundle_label_selector=[{raynodes.NODE_ID_LABEL: nid} for nid in node_ids],
            )
        handle = {"placement_group": pg_name(attempt.id, self.namespace), "replicas": []}
        for i, config in enumerate(configs):
            name = actor_name(attempt.id, i)
            if not r.gpu:
                handle["replicas"].append({"agent": agent_name(node_ids[i]), "node_id": node_ids[i]})
            else:
                handle["replicas"].append({"actor": name, "node_id": node_ids[i]})
            with self._ledger.lock:
                known = (attempt.id, i) in self._ledger.results or (attempt.id, i) in self._ledger.runs.values()
            if known:
                continue  # launched by this process already
            if not r.gpu:  # the agent starts it at most once, whoever asks how often
                self._on_agent(attempt.id, i, node_ids[i], self._node_config(config, attempt).to_dict(), pg)
                continue
            try:
                actor = ray.get_actor(name, namespace=self.namespace)  # launched before a restart: attach
            except ValueError:
                actor = self._remote.options(
                    name=name, namespace=self.namespace, lifetime="detached", max_restarts=0, max_concurrency=4,
                    num_cpus=r.cpu, num_gpus=r.gpu, memory=r.memory or None, runtime_env=LAUNCHER_STARTERS_ENV,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
                ).remote()
            # the config goes with an attach too: the actor starts a launcher at most once, and one made
            # just before a restart may never have been asked to
            self._follow(attempt.id, i, actor, self._node_config(config, attempt).to_dict())
        return handle

    def _node_config(self, config: LaunchConfig, attempt: AttemptInfo) -> LaunchConfig:
        config.venv_cache = config.venv_cache or str(self.root / "venvs")
        config.input_cache = config.input_cache or str(self.root / "cache" / "inputs")
        config.checkpoint_dir = config.checkpoint_dir or str(self.root / "checkpoints" / attempt.job_id)
        config.carry_ca()  # the launcher reports back over HTTPS from a node that may not have the file
        return config

    def replica_dir(self, attempt_id: str, replica: int) -> Path:
        return self.root / "attempts" / attempt_id / f"r{replica}"

    def _follow(self, attempt_id: str, replica: int, actor: Any, config: dict[str, Any] | None) -> None:
        ref = actor.run.remote(config, str(self.replica_dir(attempt_id, replica)), str(self.root))
        self._followed(ref, attempt_id, replica)

    def _on_agent(self, attempt_id: str, replica: int, node_id: str, config: dict[str, Any] | None,
                  pg: Any = None) -> None:
        """Have the node's agent start the replica's launcher once ``pg`` is placed (``config``), or
        attach to it (None); either way its run call is followed like an actor's."""
        ref = self._agents.on(node_id).run.remote(actor_name(attempt_id, replica), config,
                                                  str(self.replica_dir(attempt_id, replica)), str(self.root), pg)
        self._agents.runs(attempt_id, replica, node_id)
        self._followed(ref, attempt_id, replica)

    def _followed(self, ref: Any, attempt_id: str, replica: int) -> None:
        with self._ledger.lock:
            self._ledger.runs[ref] = (attempt_id, replica)
            self._ledger.gangs.setdefault(attempt_id, set()).add(replica)

    def cancel(self, attempt: AttemptInfo) -> None:
        self._ledger.cancelled.setdefault(attempt.id, time.monotonic())
        pg = find_placement_group(self._ray, attempt.id, self.namespace)
        if pg is not None and self._pg_state(pg) == "PENDING":
            self._release(attempt.id, len(attempt.replicas))  # never placed: nothing runs yet, nothing to wait for
            return
        for r in attempt.replicas:
            node_id = self._agents.node_of(attempt, r.index)
            if node_id is not None:
                if (agent := self._agents.existing(node_id)) is not None:  # else its launcher went with it
                    agent.stop.remote(actor_name(attempt.id, r.index))
                continue
            try:
                self._ray.get_actor(actor_name(attempt.id, r.index), namespace=self.namespace).stop.remote()
            except ValueError:
                pass

    # -- watching ------------------------------------------------------------------

    def _watch(self) -> None:
        """Collect each replica's result as its launcher exits; release a gang once all of it has."""
        while not self._closed.is_set():
            with self._ledger.lock:
                refs = list(self._ledger.runs)
            if not refs:
                self._closed.wait(0.05)
                continue
            try:
                ready, _ = self._ray.wait(refs, num_returns=1, timeout=0.2)
            except Exception:  # a broken connection: the loop outlives it, reconcile reports what is lost
                log.exception("waiting on Ray actors failed")
                self._closed.wait(1.0)
                continue
            for ref in ready:
                self._collect(ref)

    def _collect(self, ref: Any) -> None:
        result: LaunchResult | str | None
        try:
            # an actor started by an older server may answer a dict: read either way
            result = as_result(self._ray.get(ref))
        except Exception as e:  # the actor died: its node, or a kill; reconcile decides which
            log.info("replica actor ended without a result: %s", str(e).splitlines()[0] if str(e) else e)
            result = None
            self._agents.drop_handles()
        with self._ledger.lock:
            if ref not in self._ledger.runs:  # released meanwhile
                return
            attempt_id, replica = self._ledger.runs.pop(ref)
            if result == LOST:
                self._ledger.lost.add((attempt_id, replica))
                result = None
            if result == NOT_STARTED:  # reconcile says not_launched, and the caller launches it again
                self._ledger.unstarted.add((attempt_id, replica))
                self._ledger.gangs.get(attempt_id, set()).discard(replica)
                return
            if result is not None:
                self._ledger.results[(attempt_id, replica)] = result
            gang = self._ledger.gangs.get(attempt_id, set())
            gang.discard(replica)
            done = not gang
        if done and result is not None:
            self._release(attempt_id)

    def _release(self, attempt_id: str, replicas: int = 1) -> None:
        """Remove the attempt's placement group and its actors. Idempotent.

        Actors are killed too: one that was still waiting for its bundle stays
        ``PENDING_CREATION`` forever once its placement group is gone.
        """
        with self._ledger.lock:
            self._ledger.gangs.pop(attempt_id, None)
            for ref, (a, _) in list(self._ledger.runs.items()):
                if a == attempt_id:
                    del self._ledger.runs[ref]
            on_agents = self._agents.release(attempt_id)
        for replica, node_id in on_agents.items():
            if (agent := self._agents.existing(node_id)) is not None:
                agent.forget.remote(actor_name(attempt_id, replica))
        pg = find_placement_group(self._ray, attempt_id, self.namespace)
        if pg is not None:
            try:
                self._ray.util.remove_placement_group(pg)
            except Exception:  # already gone
                pass
        i = 0
        while True:  # replicas are numbered from 0; the count may be unknown (an orphan)
            try:
                actor = self._ray.get_actor(actor_name(attempt_id, i), namespace=self.namespace)
            except ValueError:
                if i >= replicas:
                    return
            else:
                self._ray.kill(actor, no_restart=True)
            i += 1

    def _pg_state(self, pg: Any) -> str:
        return self._ray.util.placement_group_table(pg).get("state", "")

    # -- reconcile -------------------------------------------------------------------

    def reconcile(self, attempts: list[AttemptInfo]) -> list[Observation]:
        return self._reconciler.reconcile(attempts, self._nodes_raw(fresh=True))

    def remove_leftovers(self, items: list[Leftover]) -> tuple[int, int]:
        """Each alive node's agent removes its own (made if none is up: it holds no resources); a node that
        left the cluster keeps its folders."""
        by_node: dict[str, list[tuple[str, str]]] = {}
        for i in items:
            by_node.setdefault(i.node, []).append((i.kind, i.name))
        alive = {raynodes.node_name(n["NodeID"]): n["NodeID"] for n in raynodes.alive(self._nodes_raw(fresh=True))}
        calls = [self._agents.on(alive[name]).remove.remote(str(self.root), wanted)
                 for name, wanted in by_node.items() if name in alive]
        removed = failed = 0
        for done, lost in self._ray.get(calls, timeout=LEFTOVERS_TIMEOUT) if calls else []:
            removed, failed = removed + done, failed + lost
        return removed, failed

    def close(self) -> None:
        """Disconnect; the detached actors and their launchers keep running."""
        self._closed.set()
        self._watcher.join(timeout=2)
        try:
            self._ray.shutdown()
        except Exception:
            pass


def as_result(value: Any) -> LaunchResult | str | None:
    """What a replica's run call answered: a result, ``NOT_STARTED``, ``LOST`` or None (no result.json)."""
    return value if value is None or value in (NOT_STARTED, LOST) else LaunchResult.model_validate(value)
