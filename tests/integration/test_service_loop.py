"""The leader's service loop against a real store (SQLite and PostgreSQL), ticked by hand."""

import pytest

from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.services.platform import Platform
from trainyard.spec.records import NodeInfo
from trainyard.spec.service import ScaleRequest, ServiceSpec

pytestmark = pytest.mark.postgres

NODES = [NodeInfo(name="a", cpu=4, memory=16 * 2**30, gpu=0, gpu_type=None, gpu_ids=[])]


def test_a_tick_reads_the_store_again_only_after_a_commit_and_acts_on_each_change(db_url, tmp_path):
    # given a server's platform, not started (no other loop writes meanwhile), whose service loop's reads are counted
    platform = Platform(ServerSettings(home=tmp_path / "home", db=db_url, token="s3cret"), engine=FakeEngine(NODES))
    loop, reads = platform.service_loop, []
    read = loop.services.tick_view
    loop.services.tick_view = lambda: reads.append(1) or read()
    sqlite = platform.store.version is not None
    try:
        platform.serving.apply(ServiceSpec.model_validate(
            {"name": "web", "command": ["python", "app.py"], "service": {"replicas": 1}}))

        # when it ticks: the first tick starts a replica (a commit), the second reads that, the third finds
        # nothing new committed and reads nothing on SQLite (PostgreSQL has no cheap version: it reads again)
        for _ in range(3):
            loop.cycle()
        assert len(reads) == (2 if sqlite else 3)
        assert len(platform.serving.get("web").replicas) == 1

        # then a change committed by anyone is read at the next tick and acted on
        platform.serving.scale("web", ScaleRequest(replicas=3))
        loop.cycle()
        assert len(reads) == (3 if sqlite else 4)
        assert len(platform.serving.get("web").replicas) == 3
    finally:
        platform.store.close()
