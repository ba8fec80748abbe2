"""Whether a job could ever run on these nodes: checked at submit, so a job that
never could is refused with the field to fix instead of waiting forever."""

from __future__ import annotations

from trainyard.spec.job import JobSpec, Resources
from trainyard.spec.lines import suggestion
from trainyard.spec.records import NodeInfo
from trainyard.spec.units import format_memory


def _static_mismatch(r: Resources, n: NodeInfo) -> str | None:
    """Why ``n`` can never hold ``r`` (labels, GPU type, capacity), or None."""
    for k, v in r.node_selector.items():
        if n.labels.get(k) != v:
            return f"label {k}={v}"
    if r.gpu and r.gpu_types and n.gpu_type not in r.gpu_types:
        return f"GPU type {' or '.join(r.gpu_types)}"
    if r.cpu > n.cpu:
        return "cpu"
    if (r.memory or 0) > n.memory:
        return "memory"
    if r.gpu > n.gpu:
        return "gpu"
    return None


def check_fits_some_node(spec: JobSpec, nodes: list[NodeInfo]) -> tuple[str, str] | None:
    """``(field, message)`` when no node could ever run ``spec``; None when one could."""
    r = spec.resources
    if not nodes:
        return "resources", "there are no nodes"
    able = [n for n in nodes if _static_mismatch(r, n) is None]
    if able:
        if spec.placement == "spread" and spec.replicas > len(able):
            return "placement", (f"spread puts each of the {spec.replicas} replicas on its own node; "
                                 f"{len(able)} node{'s' if len(able) != 1 else ''} can hold one")
        return None
    biggest = max(nodes, key=lambda n: (n.gpu, n.cpu, n.memory))
    if r.node_selector and not any(all(n.labels.get(k) == v for k, v in r.node_selector.items()) for n in nodes):
        return "resources.node_selector", f"no node has labels {r.node_selector}"
    if r.gpu and r.gpu_types and not any(n.gpu_type in r.gpu_types for n in nodes):
        have = sorted({n.gpu_type for n in nodes if n.gpu_type}) or ["none"]
        hint = suggestion(r.gpu_types[0], have, cutoff=0.8)  # H100 is no typo of A100; a100 and A10 are
        return "resources.gpu_type", f"no node has GPU type {' or '.join(r.gpu_types)} (have: {', '.join(have)}){hint}"
    if r.gpu > max(n.gpu for n in nodes):
        return "resources.gpu", f"asks for {r.gpu} GPU{'s' if r.gpu != 1 else ''}; the largest node has {max(n.gpu for n in nodes)}"
    if r.cpu > max(n.cpu for n in nodes):
        return "resources.cpu", f"asks for {r.cpu:g} cores; the largest node has {max(n.cpu for n in nodes):g}"
    if (r.memory or 0) > max(n.memory for n in nodes):
        return "resources.memory", (f"asks for {format_memory(r.memory)}; the largest node has "
                                    f"{format_memory(max(n.memory for n in nodes))}")
    return "resources", f"no single node has all of it (largest: {biggest.name})"
