"""Node maintenance: cordon a node (no new attempts there), drain it (and requeue what runs there), uncordon it.

Kubernetes' words and meaning: a cordon leaves running attempts alone (Slurm's ``drain``); a drain also
stops every live attempt with a replica on the node the way a preemption does (checkpoint signal, grace
period) and puts its job back in line, not counted as a retry. Both are the admin's, recorded in the
audit log, and kept in the database: a restart, or the node leaving and coming back, keeps them.
"""

from __future__ import annotations

import logging

from trainyard.auth.permissions import LOCAL_ADMIN, Caller
from trainyard.errors import Forbidden, InvalidSpec, NodeNotFound
from trainyard.services.audit import AuditLog
from trainyard.services.cluster import Cluster
from trainyard.services.scheduling import Scheduler
from trainyard.spec.records import HIDDEN_HOLDER, NodeInfo
from trainyard.status import Reason

log = logging.getLogger(__name__)
MAX_REASON = 500


class NodeService:
    def __init__(self, cluster: Cluster, scheduler: Scheduler, audit: AuditLog) -> None:
        self.cluster = cluster
        self.cordons = cluster.cordons
        self.scheduler = scheduler
        self.audit = audit

    def list(self, caller: Caller = LOCAL_ADMIN) -> list[NodeInfo]:
        """Every node with what it holds; a GPU held by a job ``caller`` may not see names no job."""
        live = self.cluster.live()
        nodes = self.cluster.nodes(live)  # copies made for this call: changing them changes nothing else
        if caller.admin:
            return nodes
        # capacity and use stay whole (they are the cluster's); only whose job holds a GPU is another team's
        unseen = {job.id for job, _ in live if not caller.sees(job.team, job.owner)}
        for n in nodes:
            if unseen & set(n.gpu_holders.values()):
                n.gpu_holders = {gpu: HIDDEN_HOLDER if job in unseen else job for gpu, job in n.gpu_holders.items()}
        return nodes

    def get(self, name: str, caller: Caller = LOCAL_ADMIN) -> NodeInfo:
        for n in self.list(caller):
            if n.name == name:
                return n
        raise NodeNotFound(f"no such node: {name} (trainyard nodes lists them)", node=name)

    def cordon(self, name: str, reason: str | None = None, caller: Caller = LOCAL_ADMIN) -> NodeInfo:
        """No new attempt is placed on ``name``; those running there go on."""
        _admin(caller, "cordon")
        self.get(name, caller)
        self.cordons.rows.cordon(name, _reason(reason), caller.user)
        self._changed()
        self.audit.record(caller, "node.cordon", name, reason=reason)
        return self.get(name, caller)

    def drain(self, name: str, reason: str | None = None, caller: Caller = LOCAL_ADMIN) -> tuple[NodeInfo, list[str]]:
        """Cordon ``name`` and stop every live attempt with a replica there, requeueing its job;
        the node and the ids of the attempts told to stop (a gang's other replicas stop with it)."""
        _admin(caller, "drain")
        self.get(name, caller)
        self.cordons.rows.cordon(name, _reason(reason), caller.user, drained=True)
        self._changed()  # cordoned before anything stops: a requeued job cannot come straight back here
        stopped = []
        for _, a in self.cluster.live():
            if any(r.node == name and not r.status.is_terminal() for r in a.replicas) or (
                    not a.replicas and a.node == name):
                if self.cluster.store.request_stop(a.id, Reason.DRAINED.value):
                    self.scheduler.stop_attempt(a)
                    stopped.append(a.id)
        log.info("node %s drained by %s: %d attempts stopped", name, caller.user, len(stopped))
        self.audit.record(caller, "node.drain", name, reason=reason, attempts=stopped)
        return self.get(name, caller), stopped

    def uncordon(self, name: str, caller: Caller = LOCAL_ADMIN) -> NodeInfo | None:
        """New attempts may be placed on ``name`` again; None if the node is no longer in the cluster."""
        _admin(caller, "uncordon")
        if not self.cordons.rows.uncordon(name):
            self.get(name, caller)  # a node that is there and was not cordoned: nothing to do
        self._changed()
        self.audit.record(caller, "node.uncordon", name)
        try:
            return self.get(name, caller)
        except NodeNotFound:
            return None

    def _changed(self) -> None:
        self.cordons.changed()
        self.scheduler.wake()


def _admin(caller: Caller, what: str) -> None:
    if not caller.admin:
        raise Forbidden(f"only an admin may {what} a node")


def _reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    reason = reason.strip()
    if len(reason) > MAX_REASON or not reason.isprintable():
        raise InvalidSpec.body("reason", f"a reason is one line of at most {MAX_REASON} printable characters")
    return reason or None
