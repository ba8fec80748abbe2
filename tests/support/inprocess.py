"""A platform in this process on a fake engine, served through Starlette's TestClient: the API, SDK and loops
as a server runs them, with the engine's launches and ends in the test's hands."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from fastapi.testclient import TestClient

from trainyard.api.app import create_app
from trainyard.config import ServerSettings
from trainyard.engines.fake import FakeEngine
from trainyard.sdk.client import Client
from trainyard.services.platform import Platform
from trainyard.spec.records import NodeInfo

TOKEN = "s3cret"


class InProcess(NamedTuple):
    tc: TestClient  # raw HTTP with the server's token
    sdk: Client  # the SDK as the server's own identity (an admin)
    engine: FakeEngine
    platform: Platform


@contextmanager
def in_process(db_url: str, home: Path, nodes: list[NodeInfo], **settings: Any) -> Iterator[InProcess]:
    engine = FakeEngine(nodes)
    platform = Platform(ServerSettings(home=home, db=db_url, token=TOKEN, **settings), engine=engine)
    with TestClient(create_app(platform, "http://testserver"), headers={"Authorization": f"Bearer {TOKEN}"}) as tc:
        yield InProcess(tc, Client("http://testserver", token=TOKEN, transport=tc._transport), engine, platform)
