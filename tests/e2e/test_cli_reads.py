"""`ls`, `show` and `logs` read the API's JSON over a plain connection without loading httpx or the spec models,
and print what the full SDK's way prints, byte for byte, for every shape of job and every flag: through real
`trainyard` processes against a real server."""

import re
import sys

import pytest

from tests.conftest import host_server
from tests.support.waiting import until

pytestmark = pytest.mark.slow

# a proxy named in the environment sends the reads through the SDK (httpx honours it; the plain reads do not
# go where it is named), and NO_PROXY keeps httpx's requests to this server direct
THROUGH_THE_SDK = {"ALL_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}
HEAVY = {"httpx", "trainyard.sdk.client", "trainyard.spec.records", "trainyard.spec.job"}


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module: its jobs take ~25 s to make, and only the first test changes them (it runs
    first, in file order; the others read any state of them)."""
    srv = host_server(tmp_path_factory.mktemp("cli-reads") / "home")
    yield srv
    srv.stop_all()


@pytest.fixture(scope="module")
def jobs(server):
    """Jobs of every shape `show` and `ls` print: params in a list and in a shell command, a failure retried,
    a gang, metrics, a running job with resource samples and a pending one with its reason and position
    (the server is stopped after the module, with whatever still runs)."""
    c = server.client()
    made = {
        "ok": c.submit({"name": "ok", "command": py("import sys; print('hi', sys.argv[1:])") + ["{{params.who}}"],
                        "params": {"who": "a b"}, "resources": {"memory": "256Mi"}}),
        "shell": c.submit({"name": "shell", "command": "echo {{params.x}}; exit 3", "params": {"x": "it's"},
                           "retry": {"max": 1, "backoff": 0}}),
        "gang": c.submit({"name": "gang", "command": py("import os; print('rank', os.environ['RANK'])"),
                          "replicas": 2, "distributed": "torch", "resources": {"cpu": 0.5, "gpu": 1}}),
        "metrics": c.submit({"name": "metrics", "command": py(
            "import trainyard\nfor i in range(3): trainyard.log_metrics(step=i, loss=1 / (i + 1), acc=i * 0.3)")}),
    }
    for job in made.values():
        job.wait(timeout=120)
    made["busy"] = c.submit({"name": "busy", "command": py("import time; time.sleep(300)"), "resources": {"cpu": 2}})
    until(lambda: c.monitoring.job_usage(made["busy"].id), timeout=60)  # sampled: `show` has its resource table
    made["waits"] = c.submit({"name": "waits", "command": "true",
                              "resources": {"cpu": 2, "gpu": 2, "gpu_type": "A100"}})
    until(lambda: c.get(made["waits"].id).reason)
    return {name: job.id for name, job in made.items()}


def same(server, *args: str) -> str:
    """What `trainyard ARGS` printed, after checking that the plain reads printed what the SDK's way does
    (the age of a job and the run time of a running one aside, and so the widths of the columns: a second may
    pass between the two). The server's state may move between the two (a pending job's reason as the
    scheduler looks again, a last sample landing after the end): one of three rounds must agree, and a way
    that prints otherwise disagrees in all three."""
    def steady(text: str) -> str:
        if args[0] == "ls":
            text = re.sub(r"\b(\d+\.\ds|\d+[mhd]\d\d[smh])\b", "TIME", text)
        return re.sub(r" +", " ", re.sub(r"\b\d+[smhd] ago\b", "AGO", text))

    said = []
    for _ in range(3):
        plain = server.cli(*args, env={"COLUMNS": "120"})
        full = server.cli(*args, env={"COLUMNS": "120", **THROUGH_THE_SDK})
        said.append([(r.returncode, steady(r.stdout), steady(r.stderr)) for r in (plain, full)])
        if said[-1][0] == said[-1][1]:
            return plain.stdout + plain.stderr
    assert said[-1][0] == said[-1][1], args


def test_the_read_commands_print_what_the_sdks_way_prints(server, jobs):
    assert "hi ['a b']" in same(server, "logs", jobs["ok"])
    assert "ahead in queue" in same(server, "show", jobs["waits"])  # while busy runs
    assert "Error(exit 3)" in same(server, "ls")
    c = server.client()
    c.cancel(jobs["busy"])
    c.wait(jobs["busy"], timeout=60)  # ended: its duration and resource use hold still
    c.wait(jobs["waits"], timeout=60)  # started once busy let go: ended, so it holds still too
    assert "echo 'it'" in same(server, "show", jobs["shell"])  # shell-quoted
    assert same(server, "logs", jobs["gang"]).count("[r1] rank 1") == 1
    assert same(server, "logs", jobs["gang"], "--replica", "1") == "rank 1\n"
    assert "loss" in same(server, "show", jobs["metrics"])
    assert "resource use" in same(server, "show", jobs["busy"])
    for job in jobs.values():
        same(server, "show", job)
        same(server, "logs", job)
    same(server, "show", jobs["gang"])
    same(server, "logs", jobs["shell"], "-a", "2")
    same(server, "logs", jobs["shell"], "--attempt", "1", "-r", "0")
    for flags in (["-s", "failed", "--status", "succeeded"], ["-q", "default", "--name", "gang"], ["--since", "1h"],
                  ["--limit", "2"], ["-n", "1", "--all"], ["-o", "json"], ["--output", "table", "-a"]):
        same(server, "ls", *flags)
    more = same(server, "ls", "-n", "2")
    cursor = re.search(r"--after (\S+)", more)[1]
    same(server, "ls", "--after", cursor)


def test_the_read_commands_fail_as_they_did(server, jobs):
    assert "error:" in same(server, "show", "j-nope")
    assert "error:" in same(server, "logs", "j-nope")
    for bad in (["show", "a/b"], ["logs", "x y"], ["ls", "--status", "lost"], ["ls", "--since", "soon"],
                ["ls", "-n", "0"], ["ls", "-o", "xml"], ["show", jobs["ok"], "-o", "yaml"], ["logs"], ["show"],
                ["logs", jobs["ok"], "--attempt", "x"]):
        same(server, *bad)
    gone = {"TRAINYARD_SERVER": "http://127.0.0.1:9"}  # nothing listens there: said the SDK's way
    assert server.cli("ls", env=gone).stderr == server.cli("ls", env={**gone, **THROUGH_THE_SDK}).stderr
    assert server.cli("show", jobs["ok"], env={"TRAINYARD_TOKEN": "wrong"}).returncode == 1


def test_logs_of_an_attempt_or_replica_the_job_never_had_is_an_error_naming_it(server, jobs):
    """An empty log would read as one that printed nothing (`download --attempt N` says the same)."""
    said = same(server, "logs", jobs["shell"], "--attempt", "3")  # it had two: the first, and its retry
    assert f"job {jobs['shell']} has no attempt 3 (it has had 2)" in said
    assert server.cli("logs", jobs["shell"], "--attempt", "3").returncode == 1
    assert f"job {jobs['gang']} has no replica 2 (replicas 0 to 1)" in same(server, "logs", jobs["gang"], "-r", "2")
    assert "has no replica 1 (only replica 0)" in same(server, "logs", jobs["ok"], "--replica", "1")
    assert same(server, "logs", jobs["shell"], "-a", "2", "-r", "0") == "it's\n"  # those it had print as before

def test_the_plain_reads_load_neither_httpx_nor_the_models_and_the_sdks_way_does(server, jobs):
    def loaded(*args: str, **env: str) -> set[str]:
        r = server.cli(*args, env={"PYTHONPROFILEIMPORTTIME": "1", **env})
        assert r.returncode == 0, r.stderr
        return {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}

    for args in (["ls"], ["show", jobs["busy"]], ["logs", jobs["gang"]]):
        assert loaded(*args).isdisjoint(HEAVY), args
        assert HEAVY <= loaded(*args, **THROUGH_THE_SDK), args  # so the comparisons above compare two ways
