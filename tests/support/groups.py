"""Which tests share a worker when the suite runs in parallel (``pytest -n 3 --dist loadgroup``, as ``make test`` does).

Each module's tests run on one worker, in their order, so a module's fixtures are set
up once; the shared Ray cluster's users (of every module) run on one worker as one
block, so the suite starts one cluster, not one per worker. Registered by
``tests/conftest.py``; without xdist the marks do nothing.

xdist 3.8 groups a worker's tests by an ``@GROUP`` suffix it writes to ``item._nodeid``; pytest 9.2 reads a
node's id from ``item._id`` instead, so the suffix went nowhere and every test was a group of its own: modules
split over both workers (their fixtures set up twice) and two Ray clusters started. :func:`_suffix` writes it
where the running pytest reads it, when xdist's did not take.
"""

from __future__ import annotations

import pytest

try:
    from _pytest.nodeid import NodeId  # pytest >= 9.2
except ImportError:
    NodeId = None

RAY_GROUP = "shared-ray"


def uses_shared_ray(item: pytest.Item) -> bool:
    fixtures = getattr(item, "fixturenames", ())
    return "shared_ray_cluster" in fixtures or item.get_closest_marker("ray_cluster") is not None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns the marks into the nodeids' @group
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = RAY_GROUP if uses_shared_ray(item) else item.nodeid.split("::", 1)[0]
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(tryfirst=True)  # before xdist's worker sends the ids it collected to the controller
def pytest_collection_finish(session: pytest.Session) -> None:
    if NodeId is not None and getattr(session.config.option, "loadgroup", False):  # xdist's workers, --dist loadgroup
        for item in session.items:
            _suffix(item)


def _suffix(item: pytest.Item) -> None:
    # the group as xdist names it (xdist/remote.py, WorkerInteractor.pytest_collection_modifyitems)
    group = "_".join(sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                             for m in item.iter_markers("xdist_group")}))
    if group and not item.nodeid.endswith("@" + group):  # before pytest 9.2 xdist's own suffix takes
        item._id = NodeId.parse(f"{item.nodeid}@{group}")
