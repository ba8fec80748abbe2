"""`trainyard run --after` with a real server and real processes: a job waits for another, starts after it,
and one that can never start is cancelled saying why."""

import time

import pytest

from tests.e2e.helpers import until

pytestmark = pytest.mark.slow


def test_run_after_waits_for_the_job_then_runs_and_the_other_condition_is_cancelled(server, tmp_path):
    go = tmp_path / "go"  # the first job runs until the test has submitted the others
    first = server.cli("run", "--name", "train", "--", "sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done"
                       ).stdout.strip()
    evaluate = server.cli("run", "--name", "evaluate", "--after", first, "--", "echo", "evaluated").stdout.strip()
    cleanup = server.cli("run", "--name", "cleanup", "--after", f"{first}:failed", "--", "echo", "x").stdout.strip()
    shown = server.cli("show", evaluate, env={"COLUMNS": "200"}).stdout
    assert f"waits for {first} (" in shown and "to succeed" in shown, shown
    assert evaluate and cleanup
    sdk = server.client()
    started = time.time()
    go.write_text("")
    assert sdk.job(evaluate).wait(timeout=60).status.value == "succeeded"
    info = sdk.get(first)
    assert info.attempts[0].ended_at <= sdk.get(evaluate).attempts[0].started_at  # not before it
    assert "evaluated" in sdk.job(evaluate).logs()
    gone = until(lambda: (j := sdk.get(cleanup)).status.value == "cancelled" and j, timeout=10)
    assert gone.reason == f"never started: job {first} succeeded; this one was to start only once it failed " \
                          "(or was cancelled)" and not gone.attempts
    assert time.time() - started < 60


def test_dry_run_writes_after_into_the_spec_and_a_bad_one_is_named(server):
    spec = server.cli("run", "--dry-run", "--after", "j-0123456789", "--after", "j-abcdef0123:ended", "--", "true")
    assert "after:\n- {job: j-0123456789}\n- {job: j-abcdef0123, when: ended}" in spec.stdout, spec.stdout
    bad = server.cli("run", "--after", "j-0123456789:ok", "--", "true")
    assert bad.returncode == 2 and "--after (after.0.when)" in bad.stderr, bad.stderr
    missing = server.cli("run", "--after", "j-0123456789", "--", "true")
    assert missing.returncode == 2 and "after[0].job: no such job: j-0123456789" in missing.stderr, missing.stderr
