"""`trainyard rerun JOB` (and ``Client.rerun``) against a real server: the job's spec and code snapshot as they
were, -p params over its own, as a new job."""

import sys

import pytest

pytestmark = pytest.mark.slow

SCRIPT = ("import json, os\n"
          "print('lr', json.loads(os.environ['TRAINYARD_PARAMS'])['lr'], open('data.txt').read().strip())\n")


def test_rerun_runs_the_code_as_it_was_with_new_params_and_says_what_is_wrong(server, tmp_path):
    (tmp_path / "t.py").write_text(SCRIPT)
    (tmp_path / "data.txt").write_text("first\n")
    (tmp_path / "job.yaml").write_text(f"name: rerun-t\ncommand: [{sys.executable}, t.py]\nworkdir: .\n"
                                       "params: {lr: 0.1}\n")
    first = server.cli("run", "job.yaml", "--wait", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    old = first.stdout.strip()
    (tmp_path / "data.txt").write_text("changed\n")  # the rerun takes the snapshot of the first, not this folder

    again = server.cli("rerun", old, "-p", "lr=0.5", "--follow", cwd=tmp_path)

    assert again.returncode == 0, again.stderr
    assert "lr 0.5 first" in again.stdout
    c = server.client()
    new = c.jobs(name="rerun-t").items[0]
    assert new.id != old and c.get(new.id).spec.params == {"lr": 0.5}
    assert c.get(old).spec.params == {"lr": 0.1}

    plain = c.rerun(old)
    assert plain.wait().status.value == "succeeded" and "lr 0.1 first" in plain.logs()

    typo = server.cli("rerun", old, "-p", "lrr=1", "--wait")
    assert typo.returncode == 0 and "declares no param lrr" in typo.stderr
    bad = server.cli("rerun", old, "-p", "lr")
    assert bad.returncode == 2 and "-p" in bad.stderr and "key=value" in bad.stderr
    missing = server.cli("rerun", "j-0000000000")
    assert missing.returncode == 1 and "no such job: j-0000000000" in missing.stderr


def test_rerun_of_a_job_that_declares_no_params_warns_of_a_param_as_run_does(server, tmp_path):
    first = server.cli("run", "--wait", "--", sys.executable, "-c", "pass")
    assert first.returncode == 0, first.stderr
    job = first.stdout.strip()

    again = server.cli("rerun", job, "-p", "lr=0.01", "--wait")

    assert again.returncode == 0, again.stderr  # a warning, not a refusal: trainyard.params() still has it
    assert (f"warning: job {job} declares no param lr (its params: none), so its command cannot use it"
            in again.stderr), again.stderr
    assert server.client().get(again.stdout.strip()).spec.params == {"lr": 0.01}
