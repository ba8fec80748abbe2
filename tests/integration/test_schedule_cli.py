"""Schedules through the SDK and the `trainyard schedule` CLI, in-process against the API with the fake engine,
on SQLite and PostgreSQL. The cron is 1 January's midnight, so the server's own loop never fires during a test:
every run here is a `trigger`."""

import json
import re
from datetime import datetime

import httpx
import pytest
from typer.testing import CliRunner

from tests.integration.test_api import env  # noqa: F401  (the fixture)
from trainyard import errors
from trainyard.cli.main import app
from trainyard.sdk.client import Client
from trainyard.spec.schedule import iso

pytestmark = pytest.mark.postgres

FAR = "0 0 1 1 *"  # At 00:00 on January 1
COMMAND = "python train.py --until {{params.scheduled_at}}"


class Recording(httpx.BaseTransport):
    """The app's transport, keeping the body of each schedule created through it."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner, self.created = inner, []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/api/v1/schedules":
            self.created.append(json.loads(request.read()))
        return self.inner.handle_request(request)


def first_of_january(tz: str) -> float:
    """The next midnight of 1 January in ``tz``, as the server computes it (from now)."""
    from zoneinfo import ZoneInfo

    now = datetime.now(ZoneInfo(tz))
    return datetime(now.year + 1, 1, 1, tzinfo=ZoneInfo(tz)).timestamp()


def local(ts: float, short: bool = False) -> str:
    return datetime.fromtimestamp(ts).astimezone().strftime("%m-%d %H:%M:%S" if short else "%Y-%m-%d %H:%M:%S %Z")


def job_folder(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('training')\n")
    return code


# -- the SDK ---------------------------------------------------------------------------------------


def test_a_schedule_goes_through_create_list_get_pause_trigger_resume_and_delete(env, tmp_path):  # noqa: F811
    tc, _, _, platform = env
    wire = Recording(tc._transport)
    sdk = Client("http://testserver", token="s3cret", transport=wire)
    job_folder(tmp_path)
    spec = {"name": "nightly", "cron": FAR, "timezone": "Europe/Paris",
            "job": {"command": COMMAND, "workdir": "code", "params": {"lr": 0.1}}}

    made = sdk.schedule(spec, base_dir=tmp_path)
    assert re.fullmatch(r"sc-[0-9a-f]{10}", made.id) and made.name == "nightly" and not made.suspended
    assert made.next_at == first_of_january("Europe/Paris") and made.explain == "At 00:00 on January 1"
    assert made.runs == [] and made.active == []
    # what went over the wire: the job's own params, not the placeholder of the time each run is given,
    # and the code snapshot, uploaded once
    [body] = wire.created
    assert body["spec"]["job"]["params"] == {"lr": 0.1}
    assert body["snapshot"] and platform.artifacts.has_snapshot(body["snapshot"])

    assert [s.id for s in sdk.schedules.list()] == [made.id]
    assert sdk.schedules.get("nightly").id == made.id and sdk.schedules.get(made.id).name == "nightly"

    paused = sdk.schedules.pause("nightly")
    assert paused.suspended and paused.next_at is None
    assert sdk.schedules.get(made.id).suspended

    # a trigger fires a paused schedule too: a job of its owner, given the time it was due
    run = sdk.schedules.trigger(made.id)
    assert run.outcome == "started" and run.manual and run.job_id
    job = sdk.get(run.job_id)
    assert job.spec.params == {"lr": 0.1, "scheduled_at": iso(run.at, "Europe/Paris")}
    assert job.spec.argv()[-1] == f"python train.py --until {iso(run.at, 'Europe/Paris')}"
    assert job.snapshot == body["snapshot"]
    # concurrency forbid: while that job has not ended, the next fire is skipped, naming it
    again = sdk.schedules.trigger("nightly")
    assert (again.outcome, again.job_id) == ("skipped", None) and run.job_id in again.message

    resumed = sdk.schedules.resume("nightly")
    assert not resumed.suspended and resumed.next_at == made.next_at
    shown = sdk.schedules.get("nightly")
    assert [(r.outcome, r.job_id) for r in shown.runs] == [("skipped", None), ("started", run.job_id)]
    assert shown.active == [run.job_id]

    sdk.schedules.delete("nightly")
    with pytest.raises(errors.ScheduleNotFound):
        sdk.schedules.get(made.id)
    assert sdk.schedules.list() == []
    assert sdk.get(run.job_id).id == run.job_id  # the jobs it started are left as they are


def test_a_bad_schedule_is_refused_before_anything_is_sent(env):  # noqa: F811
    tc, _, _, _ = env
    wire = Recording(tc._transport)
    sdk = Client("http://testserver", token="s3cret", transport=wire)
    with pytest.raises(errors.InvalidSpec) as e:
        sdk.schedule({"name": "n", "cron": "0 3 * *", "job": {"command": COMMAND}})
    assert [err["field"] for err in e.value.errors] == ["cron"]
    assert wire.created == [] and sdk.schedules.list() == []
    with pytest.raises(errors.ScheduleNotFound):
        sdk.schedules.trigger("no-such-schedule")


# -- the CLI ---------------------------------------------------------------------------------------


@pytest.fixture
def cli(env, monkeypatch):  # noqa: F811
    """``cli("ls")`` runs `trainyard schedule ls` in-process against ``env``'s app: (exit code, output,
    with runs of spaces and line breaks made one space, so a wrapped cell still reads whole)."""
    _, sdk, _, _ = env
    monkeypatch.setattr("trainyard.cli.schedules.client", lambda: sdk)
    monkeypatch.setenv("COLUMNS", "200")
    from trainyard.cli import output  # made once per process: another test of this worker may have made it narrow

    monkeypatch.setattr(output.console, "width", 200)
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str]:
        result = runner.invoke(app, ["schedule", *args], prog_name="trainyard")
        return result.exit_code, " ".join(result.output.split())

    return run


def test_create_with_a_cron_schedules_a_plain_job_file(env, cli, tmp_path):  # noqa: F811
    _, sdk, _, _ = env
    job_folder(tmp_path)
    job = tmp_path / "job.yaml"
    job.write_text(f"name: retrain\ncommand: {COMMAND}\nworkdir: code\n")

    code, out = cli("create", str(job), "--cron", FAR, "--timezone", "Europe/Paris")
    assert code == 0, out
    info = sdk.schedules.get("retrain")
    assert out == (f"schedule retrain ({info.id}): At 00:00 on January 1 (Europe/Paris), "
                   f"next at {local(first_of_january('Europe/Paris'))}")
    assert (info.spec.cron, info.spec.timezone, info.spec.concurrency.value) == (FAR, "Europe/Paris", "forbid")
    assert info.spec.job.command == COMMAND

    code, out = cli("create", str(job), "--cron", "@daily", "--name", "retrain-json", "--concurrency", "allow",
                    "-o", "json")
    assert code == 0, out
    shown = json.loads(out)
    assert (shown["name"], shown["spec"]["cron"], shown["spec"]["concurrency"]) == ("retrain-json", "@daily", "allow")


def test_a_pipeline_is_scheduled_from_its_file_or_a_schedule_file_naming_it(env, cli, tmp_path):  # noqa: F811
    _, sdk, _, platform = env
    job_folder(tmp_path)
    (tmp_path / "etl.yaml").write_text(
        "name: etl\nparams: {scheduled_at: '', rows: 10}\n"
        "steps:\n  extract: {command: 'python train.py {{params.scheduled_at}}', workdir: code}\n")
    # a pipeline file wrapped with --cron, from another folder: read, checked and its workdir uploaded as a run's
    code, out = cli("create", str(tmp_path / "etl.yaml"), "--cron", FAR)
    assert code == 0, out
    wrapped = sdk.schedules.get("etl")
    assert wrapped.spec.job is None and wrapped.spec.pipeline["steps"]["extract"]["workdir"] == "code"
    # a schedule file naming the pipeline beside it, with params for it
    (tmp_path / "nightly.yaml").write_text(f"name: etl-nightly\ncron: '{FAR}'\npipeline: etl.yaml\n"
                                          "params: {rows: 99}\n")
    code, out = cli("create", str(tmp_path / "nightly.yaml"))
    assert code == 0, out
    run = sdk.schedules.trigger("etl-nightly")
    assert run.outcome == "started" and run.run_id, run
    started = sdk.pipelines.get(run.run_id)
    assert started.params == {"scheduled_at": iso(run.at, "UTC"), "rows": 99}
    # a bad param is refused naming it, before anything is made
    (tmp_path / "bad.yaml").write_text(f"name: bad\ncron: '{FAR}'\npipeline: etl.yaml\nparams: {{nope: 1}}\n")
    code, out = cli("create", str(tmp_path / "bad.yaml"))
    assert code != 0 and "nope" in out, out
    assert [s.name for s in sdk.schedules.list()] == ["etl-nightly", "etl"]  # newest first



def test_a_param_the_pipeline_does_not_declare_is_said_at_the_schedules_line(env, cli, tmp_path):  # noqa: F811
    _, sdk, _, _ = env
    (tmp_path / "etl.yaml").write_text("name: etl\nparams: {rows: 10}\nsteps:\n  extract: {command: echo}\n")
    (tmp_path / "bad.yaml").write_text(f"name: bad\ncron: '{FAR}'\npipeline: etl.yaml\n"
                                       "params:\n  rows: 5\n  rwos: 1\n")

    code, out = cli("create", str(tmp_path / "bad.yaml"))

    assert code == 2, out
    assert (f"{tmp_path / 'bad.yaml'}:6 params.rwos: unknown param of {tmp_path / 'etl.yaml'} (declared: rows); "
            "did you mean 'rows'?") in out, out
    assert sdk.schedules.list() == []

def test_create_of_a_schedule_file(env, cli, tmp_path):  # noqa: F811
    _, sdk, _, _ = env
    job_folder(tmp_path)
    path = tmp_path / "nightly.yaml"
    path.write_text(f"name: nightly\ncron: '{FAR}'\nsuspend: true\njob:\n  command: {COMMAND}\n  workdir: code\n")
    code, out = cli("create", str(path))
    assert code == 0, out
    assert out == f"schedule nightly ({sdk.schedules.get('nightly').id}): At 00:00 on January 1 (UTC), paused"


def test_ls_and_show_say_the_cron_in_words_and_paused_after_a_pause(env, cli):  # noqa: F811
    _, sdk, _, _ = env
    made = sdk.schedule({"name": "hourly-eval", "cron": FAR, "job": {"command": COMMAND}})

    code, out = cli("ls")
    assert code == 0, out
    assert f"hourly-eval {FAR} {local(made.next_at, True)} - 0 local At 00:00 on January 1 (UTC)" in out, out
    assert "paused" not in out

    code, out = cli("pause", "hourly-eval")
    assert (code, out) == (0, f"schedule hourly-eval ({made.id}) paused")
    code, out = cli("ls")
    assert f"hourly-eval {FAR} paused - 0 local At 00:00 on January 1 (UTC)" in out, out
    code, out = cli("show", made.id)
    assert code == 0 and "next: paused" in out and "At 00:00 on January 1" in out and "no fires yet" in out, out

    code, out = cli("resume", made.id)
    assert (code, out) == (0, f"schedule hourly-eval ({made.id}) resumed, next at {local(made.next_at)}")
    code, out = cli("ls", "-o", "json")
    assert code == 0 and [(s["name"], s["suspended"]) for s in json.loads(out)] == [("hourly-eval", False)]


def test_trigger_prints_the_job_it_started_and_show_lists_the_runs(env, cli):  # noqa: F811
    _, sdk, _, _ = env
    made = sdk.schedule({"name": "evals", "cron": FAR, "job": {"command": COMMAND}})

    code, out = cli("trigger", "evals")
    assert code == 0, out
    job_id = re.fullmatch(r"schedule evals: started job (j-\S+)", out).group(1)
    assert sdk.get(job_id).spec.params["scheduled_at"] == iso(sdk.schedules.get("evals").runs[0].at, "UTC")
    code, out = cli("ls")
    assert f"{local(made.next_at, True)} started {job_id} 1 local" in out, out  # LAST, with its job; ACTIVE

    # no job this time (concurrency forbid): said, and the exit status says so too
    code, out = cli("trigger", "evals")
    assert code == 1 and out.startswith("schedule evals: skipped (") and job_id in out, out

    code, out = cli("ls")
    assert f"{local(made.next_at, True)} skipped 1 local" in out, out  # the newest run; its one job still active
    code, out = cli("show", "evals")
    assert code == 0, out
    assert f"schedule evals ({made.id})" in out and "concurrency: forbid" in out and f"active: {job_id}" in out
    rows = out.split("AT OUTCOME JOB MESSAGE")[1]
    assert re.search(rf"skipped - {job_id} still running \(concurrency: forbid\) manual .* started {job_id} manual",
                     rows), rows
    code, out = cli("show", "evals", "-o", "json")
    assert [r["outcome"] for r in json.loads(out)["runs"]] == ["skipped", "started"]


def test_rm_deletes_and_a_missing_schedule_is_said_with_exit_status_1(cli, env):  # noqa: F811
    _, sdk, _, _ = env
    sdk.schedule({"name": "gone", "cron": FAR, "job": {"command": COMMAND}})
    assert cli("rm", "gone") == (0, "schedule gone deleted")
    assert sdk.schedules.list() == []
    code, out = cli("show", "gone")
    assert code == 1 and out.startswith("error:") and "gone" in out, out


def test_a_bad_cron_on_the_command_line_is_refused_naming_cron_and_nothing_is_made(env, cli, tmp_path,  # noqa: F811
                                                                                   monkeypatch):
    _, sdk, _, _ = env
    monkeypatch.setattr("trainyard.cli.schedules.client", lambda: pytest.fail("a bad spec was sent to the server"))
    job = tmp_path / "job.yaml"
    job.write_text(f"name: retrain\ncommand: {COMMAND}\n")
    code, out = cli("create", str(job), "--cron", "61 * * * *")
    assert code == 2 and "command line --cron (cron): '61 * * * *' is not a cron expression (Bad minute)" in out, out
    code, out = cli("create", str(job), "--cron", "*/5 * * * * *")  # seconds first: every five seconds
    assert code == 2 and "command line --cron (cron): '*/5 * * * * *' has 6 fields; a cron has five" in out, out
    # a job file given without --cron says how to schedule it
    code, out = cli("create", str(job))
    assert code == 2 and "--cron" in out and "cron: field required" in out, out
    # the options of a wrapped job go with --cron only
    code, out = cli("create", str(job), "--name", "x")
    assert code == 2 and "--name" in out and "--cron" in out, out
    assert sdk.schedules.list() == []
