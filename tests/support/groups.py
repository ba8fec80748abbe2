"""Which tests share a worker when the suite runs in parallel (``pytest -n 2 --dist loadgroup``, as ``make test`` does).

Each module's tests run on one worker, in their order, so a module's fixtures are set
up once; the shared Ray cluster's users (of every module) run on one worker as one
block, so the suite starts one cluster, not one per worker. Registered by
``tests/conftest.py``; without xdist the marks do nothing.
"""

from __future__ import annotations

import pytest

RAY_GROUP = "shared-ray"


def uses_shared_ray(item: pytest.Item) -> bool:
    return "shared_ray_cluster" in getattr(item, "fixturenames", ()) or item.get_closest_marker("ray_cluster") is not None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns the marks into the nodeids' @group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = RAY_GROUP if uses_shared_ray(item) else item.nodeid.split("::", 1)[0]
            item.add_marker(pytest.mark.xdist_group(group))
