"""From a stored job and a new attempt to what the launcher is told."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from trainyard.artifacts.store import ArtifactStore
from trainyard.config import ServerSettings
from trainyard.launch.config import LaunchConfig
from trainyard.spec.records import AttemptInfo, JobInfo


def launch_config(
    job: JobInfo, attempt: AttemptInfo, *, settings: ServerSettings, artifacts: ArtifactStore, server_url: str,
) -> LaunchConfig:
    spec = job.spec
    env = {"TRAINYARD_PARAMS": json.dumps(spec.params)}
    if not (spec.env and spec.env.pip):
        # no env asked: `python` in the command is the server's interpreter, as documented
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return LaunchConfig(
        job_id=job.id,
        attempt_id=attempt.id,
        attempt=attempt.number,
        server=server_url,
        address_file=str(settings.address_file),
        token=settings.token,
        command=spec.argv(),
        env=env,
        snapshot=artifacts.snapshot_url(job.snapshot) if job.snapshot else None,
        python_env={"pip": list(spec.env.pip)} if spec.env and spec.env.pip else None,
        inputs=dict(spec.inputs),
        outputs=list(spec.outputs),
        output_url=artifacts.outputs_url(job.id, attempt.number),
        memory_limit=spec.resources.memory,
        timeout=spec.timeout,
        grace_period=spec.grace_period,
        gpus=list(attempt.gpus),
    )
