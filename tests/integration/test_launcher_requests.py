"""A launcher asked for its command's stacks (``ReportAnswer.stacks``) dumps them with py-spy, and one asked to
run a command (``ReportAnswer.execs``) runs it beside its own, answering each once with a later report;
`trainyard.launch.stacks.dump` names what it could not dump, `trainyard.launch.execs.run` bounds what it runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.integration.test_launcher_support import (  # noqa: F401  (report_server is a fixture)
    PYTHON, make_config, read_result, report_server, script, start_launcher,
)
from tests.support.waiting import until

STUCK = """
import pathlib, sys, threading, time
def prefetch_batches():
    while True:
        time.sleep(0.05)
def wait_for_allreduce(flag):
    while not pathlib.Path(flag).exists():
        time.sleep(0.05)
threading.Thread(target=prefetch_batches, name="prefetcher", daemon=True).start()
print("started", flush=True)
wait_for_allreduce(sys.argv[1])
"""


def answered(tmp_path, report_server, kind: str, n: int, **config) -> tuple[Path, dict[int, dict]]:  # noqa: ANN001
    """Run a launcher of STUCK until the server has ``n`` answers of ``kind`` ("stacks", "execs"), then let its
    command end; the attempt dir and the answers by id (checked: each request answered once)."""
    flag = tmp_path / "flag"
    attempt = tmp_path / "attempt"
    make_config(attempt, report_server.url, [*script(tmp_path, "job.py", STUCK), str(flag)], **config)
    proc = start_launcher(attempt)
    sent = lambda: [a for r in report_server.reports for a in r.get(kind, [])]  # noqa: E731
    try:
        until(lambda: len(sent()) >= n, timeout=30)
    finally:
        flag.touch()
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out.decode()
    assert read_result(attempt)["exit_code"] == 0
    got = {a["id"]: a for a in sent()}
    assert len(got) == len(sent()) == n  # once each, asked again or not
    return attempt, got

def test_a_launcher_dumps_each_request_once_and_answers_with_its_next_report(tmp_path, report_server):
    asked = {"n": 0}

    def answer(body: dict) -> tuple[int, dict]:
        if body.get("phase") == "running" and not body.get("stacks"):
            asked["n"] += 1
            ask = [{"id": 7}] if asked["n"] < 4 else [{"id": 7}, {"id": 8, "locals": True}]  # 7 again: once
            return 200, {"cancel": False, "stacks": ask}
        return 200, {"cancel": False}

    report_server.answer = answer
    attempt, answers = answered(tmp_path, report_server, "stacks", 2)

    assert sorted(answers) == [7, 8]
    for a in answers.values():
        assert a["error"] is None, a
        assert "wait_for_allreduce (" in a["text"] and "job.py" in a["text"]
        assert '"prefetcher"' in a["text"] and "prefetch_batches (" in a["text"]
    # 8 asked for local variables: wait_for_allreduce's argument is one
    assert "flag: " not in answers[7]["text"] and "Arguments:" not in answers[7]["text"]
    assert f"flag: {str(tmp_path / 'flag')!r}".replace("'", '"') in answers[8]["text"]


def _dump_beside(children: str, masked: list[str]) -> dict:
    """``stacks.dump`` in a process of its own (its descendants are what it dumps), after starting ``children``."""
    code = (f"import json, subprocess, sys, time\n{children}\ntime.sleep(0.5)\n"
            "from trainyard.launch.secrets import Masks\nfrom trainyard.launch.stacks import dump\n"
            f"print(json.dumps(dump(Masks({masked!r}))))\n"
            "import psutil\nfor p in psutil.Process().children(): p.kill()\n")
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_secrets_are_masked_and_processes_that_are_not_python_are_named():
    secret = "tok-9f8e7d6c5b4a"
    child = (f"import threading, time; threading.Thread(target=time.sleep, args=(60,), name={secret!r}, "
             "daemon=True).start(); time.sleep(60)")
    spawn = f"subprocess.Popen([sys.executable, '-c', {child!r}])\nsubprocess.Popen(['sleep', '60'])"
    got = _dump_beside(spawn, [secret])
    assert got["error"] is None
    assert secret not in got["text"] and "*" * len(secret) in got["text"]
    assert "not Python: " in got["text"] and "(sleep)" in got["text"]


def test_a_tree_without_python_says_so():
    got = _dump_beside("subprocess.Popen(['sleep', '60'])", [])
    assert got["text"] == "" and got["error"].startswith("no Python process in the command's tree (only ")
    assert "(sleep)" in got["error"]


def test_without_py_spy_the_answer_says_how_to_get_it(monkeypatch):
    from trainyard.launch import stacks

    monkeypatch.setattr(stacks, "py_spy", lambda: None)
    assert stacks.dump() == {"text": "", "error": "py-spy is not installed where this replica runs "
                                                  "(pip install py-spy)"}
    monkeypatch.undo()
    assert stacks.py_spy() is not None  # a dependency of trainyard: installed beside its interpreter


def test_a_launcher_runs_a_command_beside_its_own_in_its_work_dir_with_its_environment(tmp_path, report_server):
    asks = [{"id": 1, "argv": ["sh", "-c", "pwd; echo $MARK; exit 4"], "timeout": 10},
            {"id": 2, "argv": ["sleep", "30"], "timeout": 1},
            {"id": 3, "argv": ["no-such-program-here"], "timeout": 10}]

    def answer(body: dict) -> tuple[int, dict]:
        return 200, {"cancel": False, "execs": asks if body.get("phase") == "running" else []}

    report_server.answer = answer
    attempt, got = answered(tmp_path, report_server, "execs", 3, env={"MARK": "m-42"})

    assert got[1]["exit_code"] == 4 and got[1]["error"] is None
    assert got[1]["output"].splitlines() == [str(attempt / "work"), "m-42"]
    assert got[2]["exit_code"] is None and got[2]["error"] == "still running after 1s: stopped"
    assert got[3]["exit_code"] is None and got[3]["error"].startswith("cannot run 'no-such-program-here': ")


def beside(work, group=None, spaces: tuple | None = None) -> tuple:  # noqa: ANN001
    """A ``launch.execs.Where`` for a plain command in ``work`` (in ``group``, a ``launch.cgroup.Group``; in the
    namespaces ``spaces``, a ``launch.nsjoin.Spaces``)."""
    return None, None, str(work), {"PATH": "/usr/bin:/bin"}, (group,) if group is not None else (), spaces


def test_a_command_s_output_is_cut_and_masked_and_its_whole_group_stopped(tmp_path):
    from trainyard.launch import execs
    from trainyard.launch.secrets import Masks

    big = execs.run(["sh", "-c", "echo tok-9f8e7d6c5b4a; head -c 1000000 /dev/zero | tr '\\0' x"], 30,
                    beside(tmp_path), Masks(["tok-9f8e7d6c5b4a"]))
    assert big["exit_code"] == 0 and big["output"].startswith("*" * 16 + "\n")
    assert big["output"].endswith("\n… (cut)") and len(big["output"]) < execs.CAP + 20
    marker = tmp_path / "survivor"
    slow = execs.run(["sh", "-c", f"(sleep 3; touch {marker}) & sleep 30"], 1,
                     beside(tmp_path))
    assert slow["error"] == "still running after 1s: stopped"
    import time

    time.sleep(3.5)
    assert not marker.exists()  # the backgrounded child went with the group
    assert execs.run(["true"], 5, None)["error"] == "the replica's command is not running here"


def test_the_launcher_s_reaping_of_orphans_leaves_a_command_s_exit_status_to_it(tmp_path):
    # the launcher's main loop reaps every exited child but its command's; a command run beside it waits for
    # its own in another thread, and read 0 whenever the loop took its status first. In a process of its own:
    # reaping in the test's would touch the worker's children.
    code = f"""
import threading
from trainyard.launch import execs, procs
stop = threading.Event()
def reap():
    while not stop.is_set():
        procs.reap_orphans(keep=None)
threading.Thread(target=reap, daemon=True).start()
codes = [execs.run(["sh", "-c", "sleep 0.01; exit 5"], 10, {beside(tmp_path)!r})["exit_code"] for _ in range(30)]
stop.set()
print(codes)
"""
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([5] * 30)


def test_the_launcher_s_last_reaping_leaves_a_command_s_exit_status_to_it(tmp_path):
    # when the job's command has ended, the launcher kills and reaps every descendant left; one whose Popen
    # waits in another thread (a command run beside the job, py-spy) keeps its status for that Popen
    code = """
import time
from trainyard.launch import procs
with procs.Owned(["sh", "-c", "exit 7"]) as proc:
    while open(f"/proc/{proc.pid}/stat").read().split(")")[-1].split()[0] != "Z":  # exited, not reaped
        time.sleep(0.01)
    procs.reap_all(None, timeout=0.3)
    print(proc.wait(5))
"""
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "7"
