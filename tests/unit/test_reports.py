"""The launcher writes plain JSON; the server reads it as pydantic models. The two must agree."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    PYTHON, make_config, report_server, run_launcher, script,
)
from trainyard.spec.reports import LauncherReport, LaunchResult
from trainyard.status import Reason


@pytest.mark.parametrize("code, reason", [(0, Reason.SUCCEEDED), (3, Reason.ERROR)])
def test_what_the_launcher_writes_and_sends_parses_as_the_models(tmp_path, report_server, code, reason):
    store = tmp_path / "store"
    cmd = script(tmp_path, "job.py", f"""
import sys, trainyard
print("hello")
trainyard.log_metrics(step=1, loss=0.5)
(trainyard.output_dir() / "model.bin").write_bytes(b"m")
sys.exit({code})
""")
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, cmd, outputs=["*.bin"], output_url=f"file://{store}")

    written = run_launcher(attempt)

    result = LaunchResult.model_validate(written)
    assert (result.exit_code, result.kind) == (code, reason)
    assert [o.path for o in result.outputs] == ["model.bin"]
    reports = [LauncherReport.model_validate(body) for body in report_server.snapshot()]
    assert reports[-1].final == result and any(r.log for r in reports) and any(r.metrics for r in reports)


def test_a_bad_report_names_each_bad_field():
    body = {"phase": "exited", "log": {"offset": -1, "data": "x"}, "metrics": {"offset": True, "lines": [1]},
            "result": {"exit_code": "1", "reason": "Gremlins", "outputs": [{"path": "/etc/passwd", "size": 1,
                                                                            "digest": "sha256:0"}]}}
    with pytest.raises(ValidationError) as e:
        LauncherReport.model_validate(body)
    assert [err["loc"] for err in e.value.errors()] == [
        ("log", "offset"), ("metrics", "offset"), ("metrics", "lines", 0),
        ("result", "exit_code"), ("result", "reason"), ("result", "outputs", 0, "path")]


def test_a_nul_in_a_result_is_kept_printable_in_its_message_and_refused_in_a_digest():
    # PostgreSQL's text refuses a NUL: a report carrying one failed, and was resent, without end
    assert LaunchResult.model_validate({"message": "exec: a\x00b"}).message == "exec: a\ufffdb"
    with pytest.raises(ValidationError) as e:
        LaunchResult.model_validate({"outputs": [{"path": "m.bin", "size": 1, "digest": "sha256:\x00"}]})
    assert [err["loc"] for err in e.value.errors()] == [("outputs", 0, "digest")]


def test_a_result_only_counts_with_the_last_report_and_no_reason_reads_as_lost_contact():
    assert LauncherReport.model_validate({"phase": "running", "result": {"exit_code": 0}}).final is None
    assert LaunchResult.model_validate({"outputs": None}).kind is Reason.LOST
    assert LaunchResult.read(b'{"exit_code": 0, "reason": "Succ') is None


def test_the_report_route_s_prebuilt_answers_are_every_answer_there_is():
    from trainyard.api.routers.system import _ANSWERS
    from trainyard.spec.reports import ReportAnswer

    # a new field needs its answers built in system.py (stacks, execs: serialized there when there are some)
    assert set(ReportAnswer.model_fields) == {"cancel", "stacks", "execs"}
    assert {k: ReportAnswer.model_validate_json(v) for k, v in _ANSWERS.items()} == \
        {False: ReportAnswer(cancel=False), True: ReportAnswer(cancel=True)}


def test_a_launcher_s_stack_answers_are_bounded_and_strict():
    ok = LauncherReport.model_validate({"phase": "running", "stacks": [{"id": 3, "text": "a\x00b"}]})
    assert ok.stacks[0].text == "a\ufffdb" and ok.stacks[0].error is None
    for bad in ([{"id": "3"}], [{"id": 0}], [{"id": 1, "text": "x" * (256 * 1024 + 1)}],
                [{"id": 1, "error": "e" * 2001}], [{"id": i} for i in range(1, 10)]):
        with pytest.raises(ValidationError):
            LauncherReport.model_validate({"phase": "running", "stacks": bad})
