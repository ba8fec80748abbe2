"""A real Ray cluster on this machine: a head and worker nodes, each started with ``ray start``.

Every node is started in a session of its own, so a test can kill one node
(its raylet and everything under it, as a machine that dies) and the fixture
can kill them all at the end, without touching any other Ray on the machine.
Resources are declared, not detected: two cores can host three nodes.

:func:`shared` is the session's one cluster of :func:`start_test_cluster`'s shape, for every module
that does not need nodes of its own (``shared_ray_cluster`` in tests/conftest.py says who and when).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil

GIB = 2**30
# GCS notices a dead node after period × threshold: about 1.5 s instead of Ray's default ~30 s
FAST_HEALTH_CHECKS = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3",
                      "RAY_health_check_timeout_ms": "500", "RAY_health_check_initial_delay_ms": "500"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RAY_WORKER_PORTS_END = 19999  # Ray's workers take 10002-19999 unless told otherwise; ray start refuses overlaps


def quiet_port() -> int:
    """A free port below the kernel's ephemeral range. A port from :func:`free_port` can be handed to
    any port-0 bind or outgoing connection before ``ray start`` binds it, and a starting node makes
    many: a dashboard port lost that way failed every Ray test of a run (2026-11-27)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(100):
        port = random.randrange(RAY_WORKER_PORTS_END + 1, max(low, RAY_WORKER_PORTS_END + 2))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    return free_port()


@contextlib.contextmanager
def one_start_at_a_time():
    """Held across ``ray start``: two at once on one machine make one miss Ray's 30 s registration
    wait, and xdist's workers each start clusters (a fixture's three nodes outlived 180 s so, 2026-12-03)."""
    with open(Path(tempfile.gettempdir()) / "trainyard-ray-start.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclass
class RayNode:
    name: str
    args: list[str]
    proc: subprocess.Popen | None = None
    pgid: int | None = None
    tags: dict = field(default_factory=dict)
    killed: bool = False
    env: dict = field(default_factory=dict)  # on top of this process's environment (e.g. TRAINYARD_NODE_ROOT)
    reargs: Callable[[], list[str]] | None = None  # fresh args (new ports) after a port was found taken

    def processes(self) -> list[psutil.Process]:
        """Every process of this node: its session and all descendants (actors, launchers, commands)."""
        found: dict[int, psutil.Process] = {}
        for p in psutil.process_iter():
            try:
                if os.getpgid(p.pid) == self.pgid:
                    found[p.pid] = p
                    for c in p.children(recursive=True):
                        found[c.pid] = c
            except (psutil.Error, ProcessLookupError):
                pass
        return list(found.values())

    def kill(self) -> None:
        """SIGKILL everything of the node at once, as a machine that loses power.

        Everything is stopped (SIGSTOP) before anything is killed: killed one by one, a launcher
        that outlived its command by a moment reported ``Error(exit -9)`` before the node was seen
        gone, and the attempt ended as the job's own failure rather than ``NodeLost`` (CI, stop 30).
        """
        self.killed = True
        procs = self.processes()
        for signal_all in (psutil.Process.suspend, psutil.Process.kill):
            for p in procs:
                try:
                    signal_all(p)
                except psutil.Error:
                    pass


class RayCluster:
    def __init__(self, base: Path, ray_bin: str) -> None:
        self.base = Path(base)
        # Ray's socket paths (under the temp dir) must fit AF_UNIX's 107 bytes: pytest's tmp paths under
        # xdist (…/popen-gw0/…) do not leave room, so the temp dir is a short one of its own
        self.temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
        self.ray = ray_bin
        self.nodes: list[RayNode] = []
        self._pick_ports()

    def _pick_ports(self) -> None:
        self.port, self.dashboard_port = quiet_port(), quiet_port()
        self.address = f"127.0.0.1:{self.port}"
        self.dashboard_url = f"http://127.0.0.1:{self.dashboard_port}"

    def _start(self, node: RayNode, timeout: float = 90, tries: int = 3) -> RayNode:
        """``ray start`` the node; again (after killing what the failed try left) when it gave up.

        ``ray start`` waits a fixed 30 s (not configurable) for its raylet to
        register with the GCS; on two cores shared with other test runs that
        wait can run out although nothing is wrong, and a second try succeeds.
        """
        env = {**os.environ, **FAST_HEALTH_CHECKS, "RAY_USAGE_STATS_ENABLED": "0", **node.env}
        path = self.base / f"{node.name}.log"
        for attempt in range(1, tries + 1):
            before = path.stat().st_size if path.exists() else 0
            with one_start_at_a_time():
                with open(path, "ab") as log:
                    node.proc = subprocess.Popen([self.ray, "start", *node.args], env=env, stdout=log,
                                                 stderr=subprocess.STDOUT, start_new_session=True)
                node.pgid = node.proc.pid
                try:
                    code = node.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    code = None
            if code == 0:
                self.nodes.append(node)
                return node
            node.kill()  # the raylet (and GCS) of the failed try: a node that never joined
            node.killed = False
            with open(path, "rb") as log:
                said = log.read()[before:].decode(errors="replace")[-3000:]  # this try's output only
            taken = "already occupied" in said or "already in use" in said.lower()
            gave_up = code is None or "timed out during startup" in said or (taken and node.reargs is not None)
            if attempt == tries or not gave_up:
                raise RuntimeError(f"ray start failed (try {attempt}): {said}")
            if taken and node.reargs is not None:
                node.args = node.reargs()
        raise AssertionError("unreachable")

    def start_head(self, cpus: float = 1, memory: int = 2 * GIB, env: dict | None = None) -> RayNode:
        self.base.mkdir(parents=True, exist_ok=True)

        def args() -> list[str]:
            return ["--head", "--node-ip-address=127.0.0.1", f"--port={self.port}", f"--num-cpus={cpus}",
                    "--num-gpus=0", f"--memory={memory}", "--object-store-memory=80000000",
                    "--disable-usage-stats", f"--temp-dir={self.temp}", "--include-dashboard=true",
                    "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}",
                    f"--ray-client-server-port={quiet_port()}"]

        def reargs() -> list[str]:  # no worker has joined yet: the head's address may still change
            self._pick_ports()
            return args()

        return self._start(RayNode("head", env=env or {}, args=args(), reargs=reargs))

    def add_worker(self, name: str, cpus: float = 2, memory: int = 4 * GIB, gpus: int = 0,
                   resources: dict | None = None, labels: dict | None = None, env: dict | None = None) -> RayNode:
        """Started after the nodes before it, never beside them: two ``ray start`` of one machine at
        once make one of them miss Ray's 30 s registration wait every time (tried, 2026-11-26)."""
        args = [f"--address={self.address}", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}",
                f"--num-gpus={gpus}", f"--memory={memory}", "--object-store-memory=80000000",
                "--disable-usage-stats"]
        if resources:
            args.append(f"--resources={json.dumps(resources)}")
        if labels:
            args.append("--labels=" + ",".join(f"{k}={v}" for k, v in labels.items()))
        node = self._start(RayNode(name, args, tags={"gpus": gpus, **(labels or {})}, env=env or {}))
        self.wait_nodes(sum(not n.killed for n in self.nodes))
        return node

    def alive_nodes(self) -> list[dict]:
        from ray.util.state import list_nodes

        return [n for n in list_nodes(address=self.address) if n.state == "ALIVE"]

    def wait_nodes(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if len(self.alive_nodes()) == count:
                    return
            except Exception:  # the dashboard is still starting
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the cluster did not reach {count} alive nodes")

    def stop(self) -> None:
        """SIGTERM every process of every node, SIGKILL what is left a second later.

        The raylets, the GCS and the runtime-env agents never end within 5 s of a SIGTERM, so
        waiting longer only cost every cluster's teardown 5 s; a test cluster keeps nothing that
        a clean shutdown would save (its temp dir is removed here).
        """
        procs = [p for n in self.nodes for p in n.processes()]
        for p in procs:
            try:
                p.terminate()
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(procs, timeout=1)
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        shutil.rmtree(self.temp, ignore_errors=True)


def ray_bin() -> str | None:
    """The ``ray`` of this interpreter's environment (the one the server's workers must share)."""
    path = Path(sys.executable).parent / "ray"
    return str(path) if path.exists() else shutil.which("ray")


def start_test_cluster(base: Path) -> RayCluster:
    """Head (1 CPU) + a CPU worker (2 CPUs, zone=a) + a GPU worker (2 CPUs, 2 × A100 declared, zone=b)."""
    cluster = RayCluster(base, ray_bin())
    try:
        cluster.start_head()
        cluster.add_worker("cpu-worker", cpus=2, labels={"zone": "a"})
        cluster.add_worker("gpu-worker", cpus=2, gpus=2, resources={"gpu_type:A100": 2}, labels={"zone": "b"})
    except BaseException:
        cluster.stop()
        raise
    return cluster


_shared: RayCluster | None = None


def shared(base: Path) -> RayCluster:
    """The session's shared :func:`start_test_cluster`, started under ``base`` on first use."""
    global _shared
    if _shared is None:
        _shared = start_test_cluster(base)
    return _shared


def stop_shared() -> None:
    """Stop the shared cluster, if one runs (again: nothing)."""
    global _shared
    if _shared is not None:
        _shared.stop()
        _shared = None
