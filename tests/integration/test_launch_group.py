"""``python -m trainyard.launch.group``: K real processes of one replica sharing its log, as the launcher runs it
(the log opened for appending, ``PYTHONUNBUFFERED=1``)."""

import os
import signal
import subprocess
import sys
import time

RANK_PRINTS = """
import os
rank = os.environ["LOCAL_RANK"]
for i in range(3000):
    print(f"rank {rank} line {i} " + "x" * 80)
"""


def start(tmp_path, k, code, *args):
    log = os.open(tmp_path / "logs.txt", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        return subprocess.Popen([sys.executable, "-m", "trainyard.launch.group", str(k), "--", sys.executable,
                                 "-c", code, *args], stdout=log, stderr=log,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", "NODE_RANK": "1"})
    finally:
        os.close(log)


def test_each_rank_prints_whole_lines_into_the_one_log(tmp_path):
    # given four ranks printing 3,000 lines each, unbuffered, into the replica's one log
    proc = start(tmp_path, 4, RANK_PRINTS)
    assert proc.wait(timeout=60) == 0
    # then every line of the log is one rank's line, whole, and none is lost
    lines = (tmp_path / "logs.txt").read_text().splitlines()
    expected = {f"rank {r} line {i} " + "x" * 80 for r in range(4) for i in range(3000)}
    glued = [x for x in lines if x not in expected]
    assert not glued, glued[:3]
    assert len(lines) == len(set(lines)) == len(expected)


def test_a_line_without_its_end_is_shown_while_the_rank_runs_and_kept_at_its_end(tmp_path):
    # given a rank that draws a progress bar (updates after a carriage return, no newline) and then waits
    code = "import sys, time; sys.stdout.write('\\rstep 5/10'); sys.stdout.flush(); time.sleep(30)"
    proc = start(tmp_path, 1, code)
    try:
        # then its update reaches the log while it runs, within a second or so
        deadline = time.monotonic() + 10
        while b"step 5/10" not in (tmp_path / "logs.txt").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "logs.txt").read_bytes() == b"\rstep 5/10"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    # and a last line without its newline is written when its rank ends
    proc = start(tmp_path, 1, "import sys; sys.stdout.write('done, no newline')")
    assert proc.wait(timeout=30) == 0
    assert (tmp_path / "logs.txt").read_bytes().endswith(b"done, no newline")


def test_one_failing_rank_stops_the_others_and_the_group_exits_with_its_code(tmp_path):
    # given three ranks of node 1, the second failing a second in (when the others have said they wait)
    code = "import os, sys, time\n" \
           "if os.environ['LOCAL_RANK'] == '1': time.sleep(1); print('rank 1 fails'); sys.exit(3)\n" \
           "print('rank', os.environ['RANK'], 'waits', flush=True); time.sleep(60)"
    began = time.monotonic()
    proc = start(tmp_path, 3, code)
    assert proc.wait(timeout=30) == 3
    # then the group ends with its code, soon: not after the others' minute
    assert time.monotonic() - began < 20
    log = (tmp_path / "logs.txt").read_text()
    # RANK is NODE_RANK * K + LOCAL_RANK
    assert "rank 1 fails" in log and "rank 3 waits" in log and "rank 5 waits" in log, log


def test_sigterm_to_the_group_reaches_every_rank_and_their_last_words_are_kept(tmp_path):
    code = "import os, signal, sys, time\n" \
           "signal.signal(signal.SIGTERM, lambda *a: (print('rank', os.environ['LOCAL_RANK'], 'stopped'), " \
           "sys.exit(0)))\nprint('up', flush=True)\ntime.sleep(60)"
    proc = start(tmp_path, 2, code)
    deadline = time.monotonic() + 20
    while (tmp_path / "logs.txt").read_text().count("up") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    log = (tmp_path / "logs.txt").read_text()
    assert "rank 0 stopped\n" in log and "rank 1 stopped\n" in log, log


def test_a_process_a_rank_left_behind_does_not_hold_the_group_open(tmp_path):
    k = 2
    # given ranks that each leave a child holding their output open for a minute
    code = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);" \
           "print('left one behind')"
    began = time.monotonic()
    proc = start(tmp_path, k, code)
    # then the group ends soon after its ranks, with their output
    assert proc.wait(timeout=30) == 0
    assert time.monotonic() - began < 15
    assert (tmp_path / "logs.txt").read_text().count("left one behind\n") == k
