"""Where things live: the home folder, the database, the artifact store, the server."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field, model_validator

ADDRESS_FILE = "server.json"


def home() -> Path:
    """``$TRAINYARD_HOME``, default ``~/.trainyard``."""
    return Path(os.environ.get("TRAINYARD_HOME") or Path.home() / ".trainyard").expanduser()


class ServerSettings(BaseModel):
    home: Path = Field(default_factory=home)
    db: str | None = Field(None, description="database URL; default SQLite in the home folder")
    artifacts: str | None = Field(None, description="fsspec URL; default file:// in the home folder")
    host: str = "127.0.0.1"
    port: int = 0  # 0: the port used last time if free, else any free port
    engine: str = "local"  # local or ray
    ray_address: str | None = Field(None, description="the Ray cluster (engine ray): host:port of its head, or ray://…")
    ray_namespace: str = "trainyard"
    cpus: float | None = None
    memory: int | None = None
    gpus: int | None = None
    gpu_type: str | None = None
    token: str | None = Field(None, description="bearer token clients must send (kept only as its hash)",
                              exclude=True, repr=False)
    token_sha256: str | None = Field(None, description="SHA-256 of the token clients must send; "
                                     "`trainyard server` uses the home's own token when none is given")
    queues_file: Path | None = Field(None, description="YAML file of queues, loaded at start (replaces earlier file queues)")
    component_catalog: list[str] = Field(
        default_factory=list, description="folders and URLs where pipeline steps find Kubeflow components by name")
    lost_contact_after: float = 60.0  # seconds without a report from a launcher the engine cannot see

    @model_validator(mode="after")
    def _hash_token(self) -> "ServerSettings":
        if self.token is not None:
            from trainyard.auth.tokens import token_hash

            self.token_sha256, self.token = token_hash(self.token), None
        return self

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.home / 'trainyard.db'}"

    @property
    def artifacts_url(self) -> str:
        return self.artifacts or (self.home / "artifacts").as_uri()

    @property
    def address_file(self) -> Path:
        return self.home / ADDRESS_FILE
