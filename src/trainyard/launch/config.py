"""What the engine tells the launcher: written as ``launch.json`` in the attempt dir.

A plain class, not pydantic or even a dataclass (which imports ``inspect``):
the launcher reads it on every attempt and must start fast.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

CONFIG_NAME = "launch.json"
RESULT_NAME = "result.json"
LOG_NAME = "output.log"
METRICS_NAME = "metrics.jsonl"


_REQUIRED = ("job_id", "attempt_id", "attempt", "server", "command")
_DEFAULTS: dict = {
    "replica": 0, "address_file": None, "token": None, "env": dict, "snapshot": None, "python_env": None,
    "venv_cache": None, "inputs": dict, "input_cache": None, "outputs": list, "output_url": None,
    "checkpoint_dir": None, "memory_limit": None, "timeout": None, "grace_period": 10.0, "gpus": list,
    "exit_report_deadline": 3600.0, "container": None, "venv": None, "server_ca": None, "server_ca_pem": None,
    "run_as": None,
    "cgroup_root": "/sys/fs/cgroup", "log_url": None, "storage": None, "checkpoint_url": None,
    "sample_every": None, "secrets": None, "store_url": None,
    "inputs_as_job": False, "outputs_max": None, "replicas": 1, "pids_max": None, "cpu": None, "cpu_limit": False,
    "dev_root": "/dev",
}


class LaunchConfig:
    job_id: str
    attempt_id: str
    attempt: int                     # 1-based attempt number
    server: str                      # API base URL, e.g. http://127.0.0.1:8470
    server_ca: str | None            # PEM file trusted for an https server besides the system's CAs
    server_ca_pem: str | None        # or its contents, for a node where the server's path means nothing (Ray)
    command: list[str]               # argv, params already substituted
    replica: int                     # index of this replica in the attempt's gang (0 is the master)
    replicas: int                    # how many the gang has (the spec's, not the job's own WORLD_SIZE)
    address_file: str | None         # JSON {"url": ...}; re-read when the server is unreachable
    token: str | None                # this attempt's own credential, sent as "Authorization: Bearer <token>"
    env: dict[str, str]              # extra variables for the command (on top of os.environ)
    snapshot: str | None             # fsspec URL of the code snapshot (.tar.gz); extracted as the work dir
    python_env: dict | None          # {"pip": [...], "requirements": "text"} -> cached virtualenv
    venv_cache: str | None           # folder of virtualenvs, one per content hash
    inputs: dict[str, str]           # NAME -> local path or fsspec URL
    input_cache: str | None          # where URL inputs are fetched once, by URL hash
    outputs: list[str]               # extra globs, relative to the work dir, to upload too
    output_url: str | None           # fsspec URL (folder) the outputs go to
    outputs_max: int | None          # bytes of outputs this replica may upload in all; None: no bound
    checkpoint_dir: str | None
    memory_limit: int | None         # bytes, whole process tree
    pids_max: int | None             # processes and threads of the whole tree (launch.pidlimit); None: no bound
    cpu: float | None                # cores asked (resources.cpu): the tree's cpu cgroup weight (launch.cpulimit)
    cpu_limit: bool                  # ... and its hard cap too (the server's cpu_limit)
    timeout: float | None            # seconds of run time
    grace_period: float              # seconds between SIGTERM and SIGKILL
    gpus: list[str]                  # -> CUDA_VISIBLE_DEVICES (set, possibly empty, when the spec asked none)
    dev_root: str | None             # where the node's GPU device files are: the others are denied (launch.devices)
    exit_report_deadline: float
    run_as: dict | None              # {"uid", "gid", "name", "home"}: the OS account the command runs as (launch.runas)
    cgroup_root: str | None          # where cgroups are mounted; None: sample the memory limit (launch.cgroup)
    container: dict | None           # run in an image: {"runtime", "kind", "image", "pull_policy", "cpus"} (launch.container)
    venv: str | None                 # with no python_env: "overlay" or "fresh" per-attempt virtualenv (launch.scratchenv)
    secrets: list[str] | None        # variables whose values the launcher reads from the server (launch.secrets)
    sample_every: float | None       # seconds between resource samples (launch.sampling); 0 or None: off (the server says 5)
    log_url: str | None              # fsspec URL the full log is copied to when the attempt ends (remote stores only)
    storage: dict | None             # fsspec options per protocol, e.g. {"s3": {"endpoint_url": ...}}; no credentials
    checkpoint_url: str | None       # fsspec folder URL the checkpoint dir syncs to (object stores only; launch.checkpoints)
    store_url: str | None            # the artifact store's root: inputs under it are fetched with the launcher's keys
    inputs_as_job: bool              # other remote inputs fetched as the job without run_as too (env of its own)

    masks = None  # the job's secret values once read (launch.secrets.Masks): in memory only, never in to_dict

    def __init__(self, **values) -> None:  # noqa: ANN003
        missing = [k for k in _REQUIRED if k not in values]
        unknown = [k for k in values if k not in _REQUIRED and k not in _DEFAULTS]
        if missing or unknown:
            raise TypeError(f"LaunchConfig: missing {missing}, unknown {unknown}")
        for key, default in _DEFAULTS.items():
            setattr(self, key, default() if callable(default) else default)
        for key, value in values.items():
            setattr(self, key, value)

    def carry_ca(self) -> None:
        """The server's certificate as its contents rather than its path: a Ray node has the server's
        files only if it shares its filesystem, which a node of its own root does not."""
        if self.server_ca and not self.server_ca_pem:
            self.server_ca_pem = Path(self.server_ca).read_text(encoding="ascii")
            self.server_ca = None

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in (*_REQUIRED, *_DEFAULTS)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LaunchConfig) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"LaunchConfig({self.attempt_id!r})"

    def write(self, attempt_dir: Path, made: bool = False) -> Path:
        """Write ``launch.json``, readable by its owner only: it holds the attempt's credential.
        ``made``: an empty one (0600) was made ahead with the folder by the local engine, in a folder only
        the server may write to, and no launcher is told of it yet: written in place, no new inode (making
        one cost up to ~0.7 ms of CPU under /tmp on the bench machine)."""
        path = Path(attempt_dir) / CONFIG_NAME
        if made:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
            except OSError:
                pass  # made the usual way
            else:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(json.dumps(self.to_dict(), separators=(",", ":")))
                return path
        tmp = path.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)  # a leftover would keep its own mode
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            # compact: with an indent json.dumps falls back to its pure-Python encoder (~4x the CPU),
            # paid once per launch by the scheduler thread (json.tool shows it indented)
            f.write(json.dumps(self.to_dict(), separators=(",", ":")))
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, attempt_dir: Path) -> "LaunchConfig":
        # bytes to json.loads (UTF-8, as written): no text layer, nor its locale lookup, on the launcher's path
        with open(Path(attempt_dir) / CONFIG_NAME, "rb") as f:
            return cls(**json.loads(f.read()))


def read_token(attempt_dir: str | Path) -> str | None:
    """The attempt's credential in ``launch.json`` now: the engine renews it when it launches the attempt again."""
    try:
        with open(Path(attempt_dir) / CONFIG_NAME, encoding="utf-8") as f:
            token = json.load(f).get("token")
    except (OSError, ValueError, AttributeError):
        return None
    return token if isinstance(token, str) and token else None


def renew_token(attempt_dir: Path, token: str | None) -> None:
    """A gang launched again after a restart (some replicas had started, some not) has a new
    credential: the running launchers read it from here (:func:`read_token`) when the old one is refused."""
    try:
        config = LaunchConfig.read(attempt_dir)
    except (OSError, ValueError, TypeError):
        return
    if token and config.token != token:
        config.token = token
        config.write(attempt_dir)
