"""What `trainyard show` says about a job's resource use, from the launcher's samples."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainyard.cli.safe_text import Table


def resource_table(usage: list[dict]) -> Table | None:
    """``usage``: the API's JSON of each replica's use (``ReplicaUsageInfo``), as :mod:`trainyard.cli.render`
    takes jobs."""
    from trainyard.cli.safe_text import Table

    if not usage:
        return None
    table = Table(title="resource use", box=None, header_style="bold", title_justify="left")
    for col in ("ATTEMPT", "REPLICA", "CPU %", "MEMORY", "PEAK MEMORY", "GPU %", "MEAN GPU %", "GPU MEMORY", "NOTE"):
        table.add_column(col)
    for u in usage:
        gpu = u.get("gpu_util") is not None
        table.add_row(str(u["attempt"]), str(u["replica"]), _num(u.get("cpu_percent")), _mem(u.get("memory_bytes")),
                      _mem(u.get("peak_memory_bytes")), _num(u["gpu_util"]) if gpu else "-",
                      _num(u.get("mean_gpu_util")), _mem(u.get("gpu_memory_bytes")) if gpu else "-",
                      "GPUs flagged idle" if u.get("idle_flagged_at") else "")
    return table


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def _mem(v: int | None) -> str:
    from trainyard.spec.units import format_memory

    return "-" if v is None else format_memory(v)
