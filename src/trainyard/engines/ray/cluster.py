"""Where things are on a Ray cluster for the engine: the names that let a restarted control plane find its
placement groups and actors again, whether the head answers, a port for a gang's rendezvous, and the
runtime environment of the actors that start launchers."""

from __future__ import annotations

import random
import socket
from typing import Any

import psutil

from trainyard.errors import TrainyardError

# A Ray worker that ends (its raylet died, ``ray stop``) SIGKILLs its child processes: the launchers,
# which could then not stop their commands (each in a session of its own), left running unseen
# beside the retries. Left alone, a launcher gets its SIGTERM from PR_SET_PDEATHSIG and stops its
# command, as :func:`trainyard.engines.ray.actor._die_with_parent` means it to.
LAUNCHER_STARTERS_ENV = {"env_vars": {"RAY_kill_child_processes_on_worker_exit": "false"}}


def pg_name(attempt_id: str, namespace: str = "trainyard") -> str:
    """Placement group names are cluster-wide: prefixed with the namespace, so two servers never meet."""
    return f"{namespace}-{attempt_id}"


def actor_name(attempt_id: str, replica: int) -> str:
    return f"{attempt_id}-r{replica}"


def find_placement_group(ray: Any, attempt_id: str, namespace: str) -> Any:
    """The attempt's placement group, by its name; None if there is none (never made, or removed)."""
    try:
        return ray.util.get_placement_group(pg_name(attempt_id, namespace))
    except ValueError:
        return None


def free_port(address: str) -> int:
    """A port free on ``address``: checked when that is this machine, else a random high one."""
    local = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs}
    if address in local:
        with socket.socket() as s:
            s.bind((address, 0))
            return s.getsockname()[1]
    return random.randint(20000, 40000)


def check_reachable(address: str) -> None:
    """Fail at once, naming the address, where ``ray.init`` would retry for minutes."""
    if address.startswith("ray://") or address == "auto":
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
    except (OSError, ValueError) as e:
        raise TrainyardError(f"cannot reach the Ray cluster at {address!r} (--ray-address): {e}") from None
