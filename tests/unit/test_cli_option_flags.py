"""A bad value of a command's own flags (queue create's quota, cluster create's workers, token create's --expires)
is said as the flag that carried it ("error: --cpu: why", exit 2), not as a spec ("invalid spec / <options>
quota.cpu") the user never wrote; nothing is sent to a server."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from trainyard.cli.main import app


@pytest.fixture
def nowhere(monkeypatch, tmp_path):
    """A home with no server, and a server address where nothing listens: nothing is started, nothing answers."""
    monkeypatch.setenv("TRAINYARD_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINYARD_SERVER", "http://127.0.0.1:9")
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("argv, said", [
    (["queue", "create", "q", "--cpu", "x"], ["--cpu: 'x' is not a CPU quantity"]),
    (["queue", "create", "q", "--memory", "lots", "--jobs", "-1"],
     ["--memory: 'lots' is not a memory quantity", "--jobs: Input should be greater than or equal to 0"]),
    (["queue", "create", "q", "--gpu", "A100=x"], ["--gpu: 'A100=x': write TYPE=N"]),
    (["queue", "create", "q", "--max-priority", "bogus"], ["--max-priority: unknown priority class 'bogus'"]),
    (["queue", "create", "no spaces"], ["NAME: use letters, digits"]),
    (["queue", "create"], ["give a NAME or -f FILE"]),
    (["cluster", "create", "dask", "--worker-cpu", "x", "--idle-timeout", "zz"],
     ["--worker-cpu: 'x' is not a CPU quantity", "--idle-timeout: 'zz' is not a duration"]),
    (["cluster", "create", "dask", "--env", "-r/etc/passwd"], ["--env: '-r/etc/passwd': give package requirements"]),
    (["cluster", "create", "dask", "--env", "nosuch.txt"], ["--env: no such requirements file: nosuch.txt"]),
    (["cluster", "create", "dask", "--secret", "a b"], ["--secret: environment variable name 'a b'"]),
    # a rule of several flags names them as flags too, not as the spec's fields
    (["cluster", "create", "dask", "--min", "5", "--max", "2"], ["--min (5) is more than --max (2)"]),
    (["token", "create", "--name", "ci", "--expires", "1s"], ["--expires: '1s': at least a minute (1m)"]),
    (["audit", "--since", "yesterday"], ["--since: 'yesterday': write 1h, 2d"]),
])
def test_a_bad_flag_is_said_as_the_flag_not_as_a_spec(nowhere, argv, said):
    got = CliRunner().invoke(app, argv)
    assert got.exit_code == 2, got.output
    lines = got.stderr.splitlines()
    assert len(lines) == len(said) and all(line.startswith(f"error: {s}") for line, s in zip(lines, said)), lines
    assert "invalid spec" not in got.stderr and "<" not in got.stderr, got.stderr
