"""Sweeps' ids and services' ids: new services' are svc-…, and `serve ID` and `download ID`, which take a sweep's id
for its best trial's job, refuse a service's (an s-… one from before, or an svc-…) saying it is a service's, where
they said "no such sweep"."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.support.inprocess import in_process
from trainyard.cli.main import app
from trainyard.spec.records import NodeInfo
from trainyard.spec.service import ServiceSpec
from trainyard.spec.submitted import STORED
from trainyard.spec.sweep import SweepSpec

NODES = [NodeInfo(name="a", cpu=4, memory=16 * 2**30, gpu=0, gpu_type=None, gpu_ids=[])]
SWEEP = {"name": "s", "job": {"command": "train --x {{params.x}}", "resources": {"cpu": 1}},
         "parameters": {"x": {"values": [1, 2]}}, "metric": {"name": "acc"}, "method": "grid", "parallel": 1}
OLD_ID = "s-0123456789"  # a service's id as they were made before services took svc-


@pytest.fixture
def server(tmp_path, monkeypatch):
    with in_process(f"sqlite:///{tmp_path / 'trainyard.db'}", tmp_path / "home", NODES) as p:
        for command in ("jobs", "services"):
            monkeypatch.setattr(f"trainyard.cli.{command}.client", lambda: p.sdk)
        yield p


def service(p, name: str) -> str:  # noqa: ANN001
    spec = ServiceSpec.model_validate({"name": name, "command": ["python", "app.py"], "service": {"replicas": 0}})
    return p.platform.serving.apply(spec).id


def cli(*argv: str):  # noqa: ANN201
    return CliRunner().invoke(app, list(argv))


def test_a_new_service_id_is_not_a_sweeps(server):
    sweep_id = server.platform.sweeps.sweeps.create(SweepSpec.model_validate(SWEEP, context=STORED), None,
                                                    owner=None, team=None)
    assert service(server, "web").startswith("svc-") and sweep_id.startswith("s-")


@pytest.mark.parametrize("old", [True, False], ids=["s- from before", "svc-"])
@pytest.mark.parametrize("argv", [["download"], ["serve", "--name", "m"]], ids=["download", "serve"])
def test_serve_and_download_of_a_services_id_say_it_is_a_service(server, monkeypatch, old, argv):
    # given a service, with an id of before (s-…, as sweeps' are) or of now
    if old:
        monkeypatch.setattr("trainyard.store.services.new_service_id", lambda: OLD_ID)
    service_id = service(server, "web")
    assert (service_id == OLD_ID) is old
    # when its id is given where a sweep's is taken
    got = cli(argv[0], service_id, *argv[1:])
    # then the refusal says whose id it is, not "no such sweep"
    assert got.exit_code == 1, got.output
    assert got.stderr == (f"error: {service_id} is service web's id, not a sweep's: a service has no outputs to "
                          f"{argv[0]}; give a job's id or a sweep's\n"), got.stderr
    # and the id stays the service's everywhere else
    assert server.sdk.services.get(service_id).name == "web"


@pytest.mark.parametrize("argv", [["download"], ["serve", "--name", "m"]], ids=["download", "serve"])
def test_an_s_id_nobody_has_is_still_no_such_sweep_and_a_sweeps_still_its_best_trials(server, argv):
    got = cli(argv[0], "s-9999999999", *argv[1:])
    assert got.exit_code == 1 and got.stderr == "error: no such sweep: s-9999999999\n", got.stderr
    got = cli(argv[0], "svc-9999999999", *argv[1:])
    assert got.exit_code == 1 and got.stderr == "error: no such service: svc-9999999999\n", got.stderr
    # a sweep's id goes on to its best trial (none finished yet here)
    sweep_id = server.platform.sweeps.sweeps.create(SweepSpec.model_validate(SWEEP, context=STORED), None,
                                                    owner=None, team=None)
    got = cli(argv[0], sweep_id, *argv[1:])
    assert got.exit_code == 1 and got.stderr.startswith(f"error: sweep {sweep_id} (s) has no finished trial yet"), \
        got.stderr
