"""What a notebook or component step expands into: the one type the expanders and the runner share."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Expansion:
    steps: dict[str, dict]  # plain steps (one for a notebook or a container component; one per graph task)
    outputs: dict[str, str]  # each output of the original step -> "SUBSTEP.OUTPUT" that provides it
    warnings: list[str] = field(default_factory=list)  # e.g. the component image that runs on the host
