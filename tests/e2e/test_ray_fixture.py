"""The Ray test cluster's own start-up: a port taken before ``ray start`` binds it costs a retry on fresh
ports, not every Ray test of the run (it happened once: the dashboard's port, picked from the kernel's
ephemeral range, was handed to something else first)."""

from __future__ import annotations

import socket

import httpx
import pytest

from tests.conftest import need

pytestmark = pytest.mark.slow


def test_a_head_whose_dashboard_port_is_taken_starts_on_fresh_ports(tmp_path_factory):
    try:
        import ray  # noqa: F401
    except ImportError:
        ray = None
    need(ray is not None, "ray is not installed (pip install 'trainyard[ray]')")
    from tests.support.ray_cluster import RayCluster, ray_bin

    cluster = RayCluster(tmp_path_factory.mktemp("rf"), ray_bin())  # short: Ray's socket paths must fit
    taken = cluster.dashboard_port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            cluster.start_head()
            assert cluster.dashboard_port != taken
            assert "already occupied" in (cluster.base / "head.log").read_text()  # the first try met it
            assert httpx.get(f"{cluster.dashboard_url}/api/version", timeout=30).is_success
            assert len(cluster.alive_nodes()) == 1
        finally:
            cluster.stop()
