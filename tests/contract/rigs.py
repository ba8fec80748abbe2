"""One rig per engine: what the contract suite needs to drive it directly, without a server.

A rig makes attempts that fit its engine's nodes, launch configs whose command
a test can end on cue (with exit code 3), and a new engine object over the
same home or cluster, as a restarted server makes. Launchers report to a
:class:`ReportServer` that acknowledges everything.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from tests.integration.test_launcher_support import ReportServer
from tests.support.waiting import until
from trainyard.engines.base import Engine, Observation
from trainyard.engines.fake import FakeEngine
from trainyard.launch.config import LaunchConfig
from trainyard.spec.job import JobSpec
from trainyard.spec.records import AttemptInfo, NodeInfo, ReplicaInfo
from trainyard.status import AttemptStatus

EXIT_CODE = 3  # what a command ended on cue exits with
SPEC = JobSpec(command="unused: the launch configs carry the command", resources={"cpu": 0.25}, grace_period=1.0)

# Waits for its flag file, then exits with EXIT_CODE; appends a line to "starts" first, so a test can count its runs.
COMMAND = f"""import os, sys, time
with open(sys.argv[1] + ".starts", "a") as f:
    f.write("started\\n")
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
sys.exit({EXIT_CODE})
"""


class Rig:
    """Drives one engine; subclasses say how to make it and how to end a command."""

    timeout = 30.0  # seconds a launch may take to show as exited

    def __init__(self, base: Path) -> None:
        self.base = Path(base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.engine = self.make()
        self.launched: list[AttemptInfo] = []

    def make(self) -> Engine:
        raise NotImplementedError

    def node(self) -> str:
        return self.engine.nodes()[0].name

    def restart(self) -> None:
        """Close the engine and make a new one over the same home or cluster, as a restarted server does."""
        self.engine.close()
        self.engine = self.make()

    def attempt(self, name: str) -> AttemptInfo:
        now = time.time()
        replica = ReplicaInfo(index=0, node=self.node(), status=AttemptStatus.RUNNING)
        return AttemptInfo(id=f"{name}-1", job_id=name, number=1, status=AttemptStatus.RUNNING, node=replica.node,
                           created_at=now, replicas=[replica])

    def configs(self, attempt: AttemptInfo) -> list[LaunchConfig]:
        self.flag(attempt).parent.mkdir(exist_ok=True)
        return [LaunchConfig(job_id=attempt.job_id, attempt_id=attempt.id, attempt=attempt.number, replica=0,
                             server=self.server_url(), token="t", grace_period=1.0, exit_report_deadline=5.0,
                             command=[sys.executable, "-c", COMMAND, str(self.flag(attempt))])]

    def launch_args(self, attempt: AttemptInfo) -> tuple[JobSpec, list[LaunchConfig]]:
        return SPEC, self.configs(attempt)

    def launch(self, attempt: AttemptInfo) -> tuple[AttemptInfo, dict[str, Any]]:
        """The attempt as the store keeps it once launched (with its handle), and the handle."""
        handle = self.engine.launch(attempt, *self.launch_args(attempt))
        self.launched.append(attempt)
        return attempt.model_copy(update={"handle": handle}), handle

    def observe(self, attempt: AttemptInfo) -> Observation:
        """``attempt``'s observation from a reconcile of every attempt the rig has launched, as the scheduler
        reconciles all the store's live attempts at once: an engine may forget what it holds for an attempt
        left out (the Ray engine drops collected results), so reconciling one alone could lose another's end."""
        others = [a for a in self.launched if a.id != attempt.id]
        return next(o for o in self.engine.reconcile([attempt, *others]) if o.attempt_id == attempt.id)

    def wait_for(self, attempt: AttemptInfo, state: str) -> Observation:
        return until(lambda: (o := self.observe(attempt)).state == state and o, timeout=self.timeout)

    def flag(self, attempt: AttemptInfo) -> Path:
        return self.base / "flags" / attempt.id

    def end(self, attempt: AttemptInfo) -> None:
        """Make the attempt's command exit with :data:`EXIT_CODE`."""
        self.flag(attempt).touch()

    def starts(self, attempt: AttemptInfo) -> int:
        """How many times the attempt's command has started."""
        path = Path(f"{self.flag(attempt)}.starts")
        return len(path.read_text().splitlines()) if path.exists() else 0

    def server_url(self) -> str:
        return "http://127.0.0.1:9"  # the fake starts no launcher

    def close(self) -> None:
        for attempt in self.launched:  # nothing outlives the test
            self.engine.cancel(attempt)
        self.engine.close()


class FakeRig(Rig):
    timeout = 5.0

    def make(self) -> Engine:
        # the fake's state stands for the cluster, not for a server process: a restart keeps it
        if getattr(self, "engine", None) is not None:
            return self.engine
        return FakeEngine([NodeInfo(name="n", cpu=4, memory=2**30)])

    def end(self, attempt: AttemptInfo) -> None:
        self.engine.finish(attempt.id, exit_code=EXIT_CODE)

    def starts(self, attempt: AttemptInfo) -> int:
        return int(attempt.id in self.engine.launched)


class LauncherRig(Rig):
    """A real engine: its launchers report to a report server of the rig's own."""

    def __init__(self, base: Path) -> None:
        self.reports = ReportServer()
        super().__init__(base)

    def server_url(self) -> str:
        return self.reports.url

    def close(self) -> None:
        for attempt in self.launched:  # wait for the launchers to go: the Ray engine then frees the bundle
            self.engine.cancel(attempt)
            try:
                until(lambda: self.observe(attempt).state != "alive", timeout=self.timeout)
            except AssertionError:
                pass  # left to the cluster's own teardown
        super().close()
        self.reports.close()


class LocalRig(LauncherRig):
    def make(self) -> Engine:
        from trainyard.engines.local import LocalEngine

        return LocalEngine(self.base / "home", NodeInfo(name="local", cpu=2, memory=2**30))


class RayRig(LauncherRig):
    timeout = 90.0  # a placement group and an actor on a loaded two-core machine

    def __init__(self, base: Path, address: str) -> None:
        self.address = address
        super().__init__(base)

    def make(self) -> Engine:
        from trainyard.engines.ray import RayEngine

        return RayEngine(self.address, self.base / "root", namespace=f"contract-{self.base.name}")

    def node(self) -> str:
        workers = [n for n in self.engine.nodes() if n.labels.get("zone") == "a"]  # the CPU worker
        return workers[0].name
