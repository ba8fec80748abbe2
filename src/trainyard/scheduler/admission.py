"""Admission: which pending jobs start now, where, and why the others wait.

A pure function of (pending jobs, nodes with their usage, now), so it can be
tested without processes. The loop applies what it decides. This first-come
policy is the default; the full scheduler (priorities, quotas, gangs) replaces
it behind the same :class:`Admission` protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from trainyard.spec.job import JobSpec, Resources
from trainyard.spec.records import JobInfo, NodeInfo
from trainyard.spec.units import format_memory


@dataclass
class Placement:
    job_id: str
    replicas: list[tuple[str, list[str]]]  # (node, GPU ids) for each replica, in replica order


@dataclass
class Plan:
    placements: list[Placement] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # pending job id -> why it waits


class Admission(Protocol):
    def plan(self, pending: list[JobInfo], nodes: list[NodeInfo], now: float) -> Plan: ...


@dataclass
class _Free:
    node: NodeInfo
    cpu: float
    memory: int
    gpus: list[str]

    @classmethod
    def of(cls, n: NodeInfo) -> "_Free":
        return cls(n, n.cpu - n.cpu_used, n.memory - n.memory_used, [g for g in n.gpu_ids if g not in n.gpus_used])


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


def _fits(r: Resources, f: _Free) -> bool:
    return (
        _static_mismatch(r, f.node) is None
        and r.cpu <= f.cpu + 1e-9 and (r.memory or 0) <= f.memory and r.gpu <= len(f.gpus)
    )


def check_fits_some_node(spec: JobSpec, nodes: list[NodeInfo]) -> tuple[str, str] | None:
    """``(field, message)`` when no node could ever run ``spec``; None when one could."""
    r = spec.resources
    if not nodes:
        return "resources", "there are no nodes"
    if any(_static_mismatch(r, n) is None for n in nodes):
        return None
    biggest = max(nodes, key=lambda n: (n.gpu, n.cpu, n.memory))
    if r.node_selector and not any(all(n.labels.get(k) == v for k, v in r.node_selector.items()) for n in nodes):
        return "resources.node_selector", f"no node has labels {r.node_selector}"
    if r.gpu and r.gpu_types and not any(n.gpu_type in r.gpu_types for n in nodes):
        have = sorted({n.gpu_type for n in nodes if n.gpu_type}) or ["none"]
        return "resources.gpu_type", f"no node has GPU type {' or '.join(r.gpu_types)} (have: {', '.join(have)})"
    if r.gpu > max(n.gpu for n in nodes):
        return "resources.gpu", f"asks for {r.gpu} GPUs; the largest node has {max(n.gpu for n in nodes)}"
    if r.cpu > max(n.cpu for n in nodes):
        return "resources.cpu", f"asks for {r.cpu:g} cores; the largest node has {max(n.cpu for n in nodes):g}"
    if (r.memory or 0) > max(n.memory for n in nodes):
        return "resources.memory", (f"asks for {format_memory(r.memory)}; the largest node has "
                                    f"{format_memory(max(n.memory for n in nodes))}")
    return "resources", f"no single node has all of it (largest: {biggest.name})"


def describe_shortfall(r: Resources, frees: list[_Free]) -> str:
    want = []
    if r.gpu:
        kind = " or ".join(r.gpu_types) if r.gpu_types else "GPU"
        best = max((len(f.gpus) for f in frees if _static_mismatch(r, f.node) is None), default=0)
        want.append(f"{r.gpu} × {kind} ({best} free on any node)")
    best_cpu = max((f.cpu for f in frees if _static_mismatch(r, f.node) is None), default=0.0)
    if r.cpu > best_cpu + 1e-9:
        want.append(f"{r.cpu:g} cores ({max(best_cpu, 0):g} free)")
    if r.memory:
        best_mem = max((f.memory for f in frees if _static_mismatch(r, f.node) is None), default=0)
        if r.memory > best_mem:
            want.append(f"{format_memory(r.memory)} memory ({format_memory(max(best_mem, 0))} free)")
    return "needs " + ", ".join(want) if want else "no node has all of it free at once"


class FifoAdmission:
    """Submit order; a job that fits starts, one that does not waits with a reason.

    Later jobs may start past a waiting one when they fit (no reservations yet:
    the full scheduler adds them).
    """

    def plan(self, pending: list[JobInfo], nodes: list[NodeInfo], now: float) -> Plan:
        frees = [_Free.of(n) for n in nodes]
        plan = Plan()
        ahead = 0
        for job in pending:
            if job.not_before and job.not_before > now:
                last = job.last_attempt
                why = f" after {last.reason}" if last and last.reason else ""
                plan.reasons[job.id] = f"retrying in {job.not_before - now:.0f}s{why}"
                continue
            r = job.spec.resources
            placed = _place_gang(r, job.spec.replicas, frees)
            if placed is None:
                behind = f"; {ahead} job{'s' if ahead != 1 else ''} ahead" if ahead else ""
                gang = f"{job.spec.replicas} replicas, each " if job.spec.replicas > 1 else ""
                plan.reasons[job.id] = gang + describe_shortfall(r, frees) + behind
                ahead += 1
                continue
            plan.placements.append(Placement(job.id, placed))
        return plan


def _place_gang(r: Resources, replicas: int, frees: list[_Free]) -> list[tuple[str, list[str]]] | None:
    """First fit for every replica, or nothing at all (a gang starts whole or not at all)."""
    trial = [_Free(f.node, f.cpu, f.memory, list(f.gpus)) for f in frees]
    placed = []
    for _ in range(replicas):
        spot = next((f for f in trial if _fits(r, f)), None)
        if spot is None:
            return None
        gpus, spot.gpus = spot.gpus[: r.gpu], spot.gpus[r.gpu:]
        spot.cpu -= r.cpu
        spot.memory -= r.memory or 0
        placed.append((spot.node.name, gpus))
    for f, t in zip(frees, trial):
        f.cpu, f.memory, f.gpus = t.cpu, t.memory, t.gpus
    return placed
