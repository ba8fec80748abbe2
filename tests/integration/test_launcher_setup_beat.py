"""A launcher whose setup lasts (here: a server slow to give the job its secrets) tells the server it is alive
meanwhile, with reports that carry no phase, so the server's bound on silent starting replicas leaves it
alone; it hears a cancel in their answers, and stops them once its command runs."""

from __future__ import annotations

import subprocess
import time

from tests.integration.test_launcher_support import PYTHON, make_config, read_result, report_server  # noqa: F401

# the launcher as the engine starts it, its beat every 0.2 s instead of every 10 s (a code without beats runs as is)
FAST_BEATS = """import sys
try:
    import trainyard.launch.setup_beat as beat
    beat.SETUP_BEAT = 0.2
except ImportError:
    pass
from trainyard.launch.__main__ import main
sys.exit(main(sys.argv[1:]))
"""
SETUP = 1.5  # seconds the server takes to answer the secrets' request


def slow_secrets(beat_answer):
    def answer(body):
        if body == {}:  # the secrets' request; reports carry at least a pid
            time.sleep(SETUP)
            return 200, {"env": {"K": "v"}}
        return 200, beat_answer if "phase" not in body else {"cancel": False}
    return answer


def run(attempt_dir) -> dict:
    proc = subprocess.run([PYTHON, "-c", FAST_BEATS, str(attempt_dir)], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    return read_result(attempt_dir)


def test_a_launcher_reports_while_its_setup_lasts_and_no_more_once_its_command_runs(tmp_path, report_server):
    # given a server slow to give the job its secrets
    report_server.answer = slow_secrets({"cancel": False})
    make_config(tmp_path / "a", report_server.url, ["true"], secrets=["K"], token="t")
    # when the launcher runs the job
    result = run(tmp_path / "a")
    # then reports with no phase came while it set up, each with its pid, and every report after its first
    # with a phase has one (a beat in flight as the command started may land just after)
    reports = [r for r in report_server.snapshot() if r != {}]
    first = next(i for i, r in enumerate(reports) if "phase" in r)
    beats = [r for r in reports[:first] if "phase" not in r]
    assert result["reason"] == "Succeeded"
    assert len(beats) >= 3 and all(isinstance(r["pid"], int) for r in beats), reports
    assert sum("phase" not in r for r in reports[first + 1:]) <= 1, reports


def test_a_cancel_in_the_answer_to_a_setup_report_stops_the_setup_before_the_command_runs(tmp_path, report_server):
    # given a server that answers the launcher's setup reports with a cancel
    report_server.answer = slow_secrets({"cancel": True})
    marker = tmp_path / "ran"
    make_config(tmp_path / "a", report_server.url, ["touch", str(marker)], secrets=["K"], token="t")
    # when the launcher runs the job
    result = run(tmp_path / "a")
    # then it stopped in its setup: cancelled, the command never ran
    assert result["reason"] == "Cancelled" and "setup" in result["message"], result
    assert not marker.exists()
