"""What the engine tells the launcher: written as ``launch.json`` in the attempt dir.

A stdlib dataclass, not a pydantic model, so the launcher starts fast.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

CONFIG_NAME = "launch.json"
RESULT_NAME = "result.json"
LOG_NAME = "output.log"
METRICS_NAME = "metrics.jsonl"


@dataclass
class LaunchConfig:
    job_id: str
    attempt_id: str
    attempt: int                     # 1-based attempt number
    server: str                      # API base URL, e.g. http://127.0.0.1:8470
    command: list[str]               # argv, params already substituted
    address_file: str | None = None  # JSON {"url": ...}; re-read when the server is unreachable
    token: str | None = None         # sent as "Authorization: Bearer <token>"
    env: dict[str, str] = field(default_factory=dict)  # extra variables for the command (on top of os.environ)
    snapshot: str | None = None      # fsspec URL of the code snapshot (.tar.gz); extracted as the work dir
    python_env: dict | None = None   # {"pip": [...], "requirements": "text"} -> cached virtualenv
    venv_cache: str | None = None    # folder of virtualenvs, one per content hash
    inputs: dict[str, str] = field(default_factory=dict)  # NAME -> local path or fsspec URL
    input_cache: str | None = None   # where URL inputs are fetched once, by URL hash
    outputs: list[str] = field(default_factory=list)     # extra globs, relative to the work dir, to upload too
    output_url: str | None = None    # fsspec URL (folder) the outputs go to
    checkpoint_dir: str | None = None
    memory_limit: int | None = None  # bytes, whole process tree
    timeout: float | None = None     # seconds of run time
    grace_period: float = 10.0       # seconds between SIGTERM and SIGKILL
    gpus: list[str] = field(default_factory=list)  # -> CUDA_VISIBLE_DEVICES (set, possibly empty, when the spec asked none)
    exit_report_deadline: float = 3600.0

    def write(self, attempt_dir: Path) -> Path:
        path = Path(attempt_dir) / CONFIG_NAME
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(path)
        return path

    @classmethod
    def read(cls, attempt_dir: Path) -> "LaunchConfig":
        return cls(**json.loads((Path(attempt_dir) / CONFIG_NAME).read_text()))
