"""/api/v1/nodes: the cluster's nodes, and an admin's cordons and drains (the rules are in services/nodes)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.spec.records import NodeInfo

router = APIRouter(prefix="/api/v1/nodes", tags=["nodes"])


class NodeChange(BaseModel):
    reason: str | None = Field(None, max_length=500, description="why, shown beside the node and in the audit log")


class Drained(BaseModel):
    node: NodeInfo
    stopped: list[str] = Field(description="attempts told to stop; their jobs are back in line")


@router.get("")
def list_nodes(p: PlatformDep, caller: CallerDep) -> list[NodeInfo]:
    return p.nodes.list(caller)


@router.get("/{name}")
def get_node(name: str, p: PlatformDep, caller: CallerDep) -> NodeInfo:
    return p.nodes.get(name, caller)


@router.post("/{name}/cordon")
def cordon_node(name: str, p: PlatformDep, caller: CallerDep, body: NodeChange | None = None) -> NodeInfo:
    """No new attempt is placed on the node; those running there go on."""
    return p.nodes.cordon(name, body.reason if body else None, caller)


@router.post("/{name}/drain")
def drain_node(name: str, p: PlatformDep, caller: CallerDep, body: NodeChange | None = None) -> Drained:
    """Cordon the node and stop what runs there, requeueing those jobs (a preemption's stop: checkpoint, grace)."""
    node, stopped = p.nodes.drain(name, body.reason if body else None, caller)
    return Drained(node=node, stopped=stopped)


@router.post("/{name}/uncordon")
def uncordon_node(name: str, p: PlatformDep, caller: CallerDep) -> NodeInfo | None:
    """New attempts may be placed on the node again."""
    return p.nodes.uncordon(name, caller)
