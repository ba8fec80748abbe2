"""A torch module whose construction waits for a file: a model that is slow to load, on cue.

``--module tests.support.gated_model:Gated`` with ``TRAINYARD_TEST_GATE=/path``: the server's
loader blocks until that path exists, so a test can look at the server while it loads.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch


class Gated(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        gate = Path(os.environ["TRAINYARD_TEST_GATE"])
        deadline = time.monotonic() + 120
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.linear = torch.nn.Linear(2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)
