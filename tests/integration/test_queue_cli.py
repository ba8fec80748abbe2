"""`trainyard queue ls` and `queue show` against the API in this process (fake engine): what a queue's running
jobs hold is said against the limits its quota sets, and only those; a queue with none says so."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.support.inprocess import in_process
from tests.support.waiting import until
from trainyard.spec.records import NodeInfo

NODES = [NodeInfo(name="a", cpu=8, memory=32 * 2**30, gpu=2, gpu_type="A100", gpu_ids=["0", "1"])]


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """``(run, sdk)``: ``run(*args)`` is the CLI against an in-process server, as an admin."""
    from trainyard.cli.main import app

    with in_process(f"sqlite:///{tmp_path / 'trainyard.db'}", tmp_path / "home", NODES) as e:
        monkeypatch.setattr("trainyard.cli.queues.client", lambda: e.sdk)
        from trainyard.cli.output import console  # as to a pipe, whatever COLUMNS was when another test made it

        monkeypatch.setattr(console, "width", 400)

        def run(*args: str):  # noqa: ANN202
            out = CliRunner().invoke(app, list(args))
            assert out.exit_code == 0, out.output
            return out

        yield run, e.sdk


def test_a_queue_is_listed_against_only_the_limits_its_quota_sets(cli):
    # given a queue counting only running jobs (one of them running, holding a core), one with no quota, and one
    # counting cores and A100s
    run, sdk = cli
    run("queue", "create", "batch", "--jobs", "3")
    run("queue", "create", "free")
    run("queue", "create", "vision", "--cpu", "4", "--gpu", "A100=2")
    job = sdk.submit({"command": "x", "queue": "batch", "resources": {"cpu": 1}})
    until(lambda: job.refresh().status.value != "pending")

    # when they are listed, then each says what it holds of what its quota limits, and no ∞ for what it does not
    rows = {line.split()[0]: line for line in run("queue", "ls").stdout.splitlines()[1:]}
    assert "∞" not in "".join(rows.values()), rows
    assert "  1/3 jobs  " in rows["batch"], rows["batch"]
    assert "  no quota  " in rows["free"], rows
    assert "0/4 cpu, 0/2 A100" in rows["vision"], rows["vision"]
    # and -o json still holds every number
    listed = {q["queue"]["name"]: q for q in json.loads(run("queue", "ls", "-o", "json").stdout)}
    assert (listed["batch"]["usage"]["running"], listed["batch"]["usage"]["cpu"]) == (1, 1.0)
    assert listed["batch"]["queue"]["quota"] == {"cpu": None, "memory": None, "gpu": None, "jobs": 3}

    # when one is shown, then its quota says what it limits, and in use what its jobs hold (against a limit or not)
    batch, free = facts(run("queue", "show", "batch")), facts(run("queue", "show", "free"))
    assert (batch["quota"], batch["in use"]) == ("3 jobs", "1 cpu, 1/3 jobs"), batch
    assert (free["quota"], free["in use"]) == ("no quota", "nothing"), free


def facts(out) -> dict[str, str]:  # noqa: ANN001
    """`queue show`'s rows by name."""
    return {k: v.strip() for k, _, v in (line.partition("  ") for line in out.stdout.splitlines())}
