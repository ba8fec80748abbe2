"""What `trainyard show` says about a job's resource use, from the launcher's samples."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table
    from trainyard.spec.monitoring import ReplicaUsageInfo




def resource_table(usage: list[ReplicaUsageInfo]) -> Table | None:
    from rich.table import Table

    if not usage:
        return None
    table = Table(title="resource use", box=None, header_style="bold", title_justify="left")
    for col in ("ATTEMPT", "REPLICA", "CPU %", "MEMORY", "PEAK MEMORY", "GPU %", "MEAN GPU %", "GPU MEMORY", "NOTE"):
        table.add_column(col)
    for u in usage:
        gpu = u.gpu_util is not None
        table.add_row(str(u.attempt), str(u.replica), _num(u.cpu_percent), _mem(u.memory_bytes),
                      _mem(u.peak_memory_bytes), _num(u.gpu_util) if gpu else "-", _num(u.mean_gpu_util),
                      _mem(u.gpu_memory_bytes) if gpu else "-", "GPUs flagged idle" if u.idle_flagged_at else "")
    return table


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def _mem(v: int | None) -> str:
    from trainyard.spec.units import format_memory

    return "-" if v is None else format_memory(v)
