"""Queues: define, list with usage, show, delete."""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import BaseModel

from trainyard.api.deps import CallerDep, PlatformDep
from trainyard.spec.queue import QueueSpec
from trainyard.spec.records import QueueInfo

router = APIRouter(prefix="/api/v1/queues", tags=["queues"])


class CreateQueue(BaseModel):
    queue: QueueSpec
    replace: bool = False


@router.get("")
def list_queues(p: PlatformDep, caller: CallerDep) -> list[QueueInfo]:
    return p.queues.list(caller)


@router.post("", status_code=201)
def create_queue(body: CreateQueue, p: PlatformDep, caller: CallerDep) -> QueueInfo:
    return p.queues.create(body.queue, replace=body.replace, caller=caller)


@router.get("/{name}")
def get_queue(name: str, p: PlatformDep, caller: CallerDep) -> QueueInfo:
    return p.queues.get(name, caller)


@router.delete("/{name}", status_code=204)
def delete_queue(name: str, p: PlatformDep, caller: CallerDep) -> Response:
    p.queues.delete(name, caller)
    return Response(status_code=204)
