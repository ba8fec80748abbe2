"""A real model server process (``python -m trainyard.serving.model_server``) on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ModelServer:
    def __init__(self, model: Path, name: str, *args: str, cwd: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.name, self.port = name, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.address = f"127.0.0.1:{self.port}"  # what tritonclient takes
        self.log = Path(model).parent / f"model-server-{name}-{self.port}.log"
        env = dict(env or {})
        # env's PYTHONPATH goes first (a test shadowing a package), then this checkout, then the caller's
        pythonpath = os.pathsep.join(p for p in [env.pop("PYTHONPATH", ""), str(ROOT / "src"), str(ROOT),
                                                 os.environ.get("PYTHONPATH", "")] if p)
        self.cmd = [sys.executable, "-m", "trainyard.serving.model_server", "--model", str(model), "--name", name,
                    "--port", str(self.port), *args]
        self.cwd, self.env = cwd, {**os.environ, **env, "PYTHONPATH": pythonpath}
        self.proc: subprocess.Popen | None = None

    def start(self) -> ModelServer:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        return self

    def wait(self, path: str = "/v2/health/ready", timeout: float = 60) -> ModelServer:
        """Until ``path`` answers 200; RuntimeError with the log if the process exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"model server exited {self.proc.returncode}: {self.output()[-3000:]}")
            try:
                if httpx.get(self.url + path, timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"model server not answering {path} after {timeout}s: {self.output()[-3000:]}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def export_scorer(torch, path: Path):  # noqa: ANN001, ANN201
    """A module with several inputs (a bool mask, a keyword-only temperature, a dynamic batch) and a dict of
    outputs, saved at ``path`` as a ``torch.export`` program; returns the module, to compare answers with."""

    class Scorer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x: torch.Tensor, mask: torch.Tensor, *, temperature: torch.Tensor) -> dict:
            logits = self.linear(x) / temperature
            return {"proba": torch.softmax(logits.masked_fill(~mask, -1e9), dim=-1), "label": logits.argmax(-1)}

    net = Scorer().eval()
    batch = torch.export.Dim("batch")
    program = torch.export.export(net, (torch.zeros(2, 4), torch.ones(2, 3, dtype=torch.bool)),
                                  {"temperature": torch.tensor(1.0)},
                                  dynamic_shapes={"x": {0: batch}, "mask": {0: batch}, "temperature": None})
    torch.export.save(program, path)
    return net
