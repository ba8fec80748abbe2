"""A pipeline step's named inputs and outputs, through the real launcher process."""

from __future__ import annotations

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    PYTHON, make_config, report_server, run_launcher,
)


def test_named_inputs_and_outputs_are_substituted_and_uploaded(tmp_path, report_server):
    data = tmp_path / "data.txt"
    data.write_text("21")
    code = "import sys; open(sys.argv[2], 'w').write(str(2 * int(open(sys.argv[1]).read())))"
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, [PYTHON, "-c", code, "{{inputs.data}}", "{{outputs.model}}"],
                inputs={"data": str(data)}, env={"TRAINYARD_OUTPUT_NAMES": "model"},
                output_url=str(tmp_path / "store"))
    result = run_launcher(attempt)
    assert result["reason"] == "Succeeded", result
    assert [o["path"] for o in result["outputs"]] == ["model"]
    assert (tmp_path / "store" / "model").read_text() == "42"


def test_a_declared_output_left_unwritten_fails_the_attempt_naming_it(tmp_path, report_server):
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, ["bash", "-c", "echo hi > {{outputs.model}}"],
                env={"TRAINYARD_OUTPUT_NAMES": "model,metrics"})
    result = run_launcher(attempt)
    assert result["exit_code"] == 0 and result["reason"] == "MissingOutput"
    assert "'metrics' was not written" in result["message"] and "'model'" not in result["message"]
    assert "'metrics' was not written" in (attempt / "output.log").read_text()
