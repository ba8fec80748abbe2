"""What a job hands back is bounded by what the store would hold: a sparse file at its size, a file under several
names once per name (a pipeline's declared outputs may be names of one file, so each name is kept). Through the
real launcher process."""

from __future__ import annotations

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    make_config, report_server, run_launcher,
)

NAMES = "cd \"$TRAINYARD_OUTPUT_DIR\"; truncate -s 64M big.bin; for i in 1 2 3; do ln -s big.bin copy$i.bin; done; " \
        "ln big.bin hard.bin"


def test_a_sparse_file_under_many_names_counts_once_per_name_against_the_bound(tmp_path, report_server):
    # 64 MiB that cost the job nothing, five names: 320 MiB in the store, past a 256 MiB bound (the old code
    # uploaded all five, unbounded)
    attempt, store = tmp_path / "attempt", tmp_path / "store"
    make_config(attempt, report_server.url, ["sh", "-c", NAMES], output_url=f"file://{store}", outputs_max=256 << 20)

    result = run_launcher(attempt)

    assert result["reason"] == "OutputsTooLarge" and not store.exists(), result
    assert "5 files of 320.0 MiB in all" in result["message"], result["message"]


def test_each_name_of_a_file_is_an_output_within_the_bound(tmp_path, report_server):
    attempt, store = tmp_path / "attempt", tmp_path / "store"
    names = 'cd "$TRAINYARD_OUTPUT_DIR"; echo w > final.bin; ln -s final.bin best.bin; ln final.bin latest.bin'
    make_config(attempt, report_server.url, ["sh", "-c", names], output_url=f"file://{store}", outputs_max=1 << 20)

    result = run_launcher(attempt)

    assert result["reason"] == "Succeeded", result
    assert sorted(o["path"] for o in result["outputs"]) == ["best.bin", "final.bin", "latest.bin"]
    assert {p.name: p.read_text() for p in store.iterdir()} == {n: "w\n" for n in ("best.bin", "final.bin",
                                                                                   "latest.bin")}


def test_outputs_past_the_bound_fail_the_attempt_and_nothing_is_uploaded(tmp_path, report_server):
    attempt, store = tmp_path / "attempt", tmp_path / "store"
    make_config(attempt, report_server.url, ["sh", "-c", 'truncate -s 3M "$TRAINYARD_OUTPUT_DIR/sparse.bin"'],
                output_url=f"file://{store}", outputs_max=2 << 20)

    result = run_launcher(attempt)

    assert result["exit_code"] == 0 and result["reason"] == "OutputsTooLarge", result
    assert result["outputs"] == [] and not store.exists()
    assert "3.0 MiB in all, over this server's bound of 2.0 MiB per replica (outputs_max)" in result["message"]
    assert "outputs_max" in (attempt / "output.log").read_text()


def test_a_failed_command_keeps_its_reason_when_its_outputs_are_too_large(tmp_path, report_server):
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, ["sh", "-c", 'truncate -s 3M "$TRAINYARD_OUTPUT_DIR/x"; exit 3'],
                output_url=f"file://{tmp_path / 'store'}", outputs_max=1 << 20)

    result = run_launcher(attempt)

    assert result["reason"] == "Error(exit 3)" and "outputs_max" in result["message"], result
