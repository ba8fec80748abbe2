"""Ray nodes as trainyard nodes: capacity, GPU type and labels, from what ``ray.nodes()`` reports.

Conventions (set when a node joins, e.g.
``ray start --num-gpus=8 --resources '{"gpu_type:A100": 8}' --labels zone=a``):

- GPU type: a custom resource ``gpu_type:<TYPE>``; failing that, the
  ``accelerator_type:<TYPE>`` resource Ray adds by itself when it detects GPUs.
- labels: the node's Ray labels (``--labels``), except Ray's own ``ray.io/…``
  ones; a custom resource ``label:<key>=<value>`` also works, for Ray versions
  or launchers (KubeRay ``rayStartParams``) that only pass resources.

Pure functions of the reported dicts, so they are tested without a cluster.
"""

from __future__ import annotations

from typing import Any

from trainyard.spec.records import NodeInfo

GPU_TYPE_PREFIX = "gpu_type:"
ACCELERATOR_PREFIX = "accelerator_type:"
LABEL_PREFIX = "label:"
NODE_ID_LABEL = "ray.io/node-id"  # Ray sets it on every node; bundles are pinned with it
NAME_LENGTH = 12  # node ids are 56 hex digits; a prefix this long is unique in any real cluster


def node_name(node_id: str) -> str:
    return node_id[:NAME_LENGTH]


def gpu_type(resources: dict[str, float]) -> str | None:
    for prefix in (GPU_TYPE_PREFIX, ACCELERATOR_PREFIX):
        for key in sorted(resources):
            if key.startswith(prefix) and key != prefix:
                return key[len(prefix):]
    return None


def labels(raw: dict[str, Any]) -> dict[str, str]:
    out = {k: str(v) for k, v in (raw.get("Labels") or {}).items() if not k.startswith("ray.io/")}
    for key in raw.get("Resources") or {}:
        if key.startswith(LABEL_PREFIX) and "=" in key:
            k, v = key[len(LABEL_PREFIX):].split("=", 1)
            out.setdefault(k, v)
    return out


def node_info(raw: dict[str, Any]) -> NodeInfo:
    """One alive node of ``ray.nodes()`` as a trainyard node (its totals; usage is added by the server).

    Its memory enforcement is reported as ``sampled``, the floor: ``ray.nodes()``
    does not say whether the node's launchers may make cgroups, and asking each
    node would cost a task per node per scheduling cycle. A launcher there still
    uses a cgroup where it finds one.
    """
    res = raw.get("Resources") or {}
    gpus = int(res.get("GPU", 0))
    return NodeInfo(
        name=node_name(raw["NodeID"]), cpu=float(res.get("CPU", 0.0)), memory=int(res.get("memory", 0)),
        gpu=gpus, gpu_type=gpu_type(res) if gpus else None, gpu_ids=[str(i) for i in range(gpus)],
        labels={**labels(raw), "ray.address": str(raw.get("NodeManagerAddress", ""))},
        memory_enforcement="sampled",
    )


def alive(raw_nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n for n in raw_nodes if n.get("Alive")]


def find(raw_nodes: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The node (alive or dead) a trainyard node name stands for."""
    found = [n for n in raw_nodes if n["NodeID"].startswith(name)]
    return max(found, key=lambda n: bool(n.get("Alive"))) if found else None


def bundle(cpu: float, memory: int | None, gpu: int) -> dict[str, float]:
    """What one replica reserves in its placement group bundle (Ray refuses an empty bundle)."""
    out: dict[str, float] = {"CPU": cpu} if cpu > 0 else {}
    if gpu:
        out["GPU"] = float(gpu)
    if memory:
        out["memory"] = float(memory)
    return out or {"CPU": 0.01}
