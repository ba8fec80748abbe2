"""What the launcher writes from a fetch run as the job: plain files in folders it makes, nothing else."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time

import pytest

from trainyard.launch.fetch_as_job import JobFetch, receive


def stream(*records: tuple[object, bytes]) -> io.BytesIO:
    return io.BytesIO(b"".join(json.dumps(head).encode() + b"\n" + data for head, data in records) + b"{}\n")


def test_files_land_in_folders_made_for_them(tmp_path):
    receive(stream(({"path": "train/a.txt", "size": 5}, b"alpha"), ({"path": "train/sub/b.txt", "size": 4}, b"beta")),
            tmp_path)
    assert (tmp_path / "train" / "a.txt").read_bytes() == b"alpha"
    assert (tmp_path / "train" / "sub" / "b.txt").read_bytes() == b"beta"


@pytest.mark.parametrize("head", [{"path": "../x", "size": 1}, {"path": "{tmp}/x", "size": 1},
                                  {"path": "a/../../x", "size": 1}, {"path": "a", "size": -1},
                                  {"path": "a", "size": "1"}])
def test_a_record_that_would_leave_the_folder_or_lies_is_refused(tmp_path, head):
    (tmp_path / "in").mkdir()
    head = {**head, "path": head["path"].replace("{tmp}", str(tmp_path))}
    with pytest.raises((OSError, ValueError)):
        receive(stream((head, b"x")), tmp_path / "in")
    assert not (tmp_path / "x").exists() and list((tmp_path / "in").iterdir()) == []


def test_a_link_already_where_a_file_would_go_is_not_followed(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a").symlink_to(tmp_path / "victim")
    with pytest.raises(OSError):
        receive(stream(({"path": "a", "size": 1}, b"x")), tmp_path / "in")
    assert not (tmp_path / "victim").exists()


def test_a_stream_cut_short_is_an_error_naming_the_file(tmp_path):
    with pytest.raises(OSError, match="stopped within a.txt"):
        receive(io.BytesIO(b'{"path": "a.txt", "size": 10}\nshort'), tmp_path)


class Scripted(JobFetch):
    """A fetch whose child is ``code`` (a misbehaving job's code could stand in its place)."""

    def __init__(self, code: str, cancelled=lambda: False) -> None:  # noqa: ANN001
        super().__init__(dict(os.environ), None, {}, cancelled)
        self.code = code

    def child(self, url: str) -> list[str]:
        return [sys.executable, "-c", self.code]


def place(tag, fill, folder):  # noqa: ANN001
    fill(folder)
    return folder


def test_a_child_that_never_answers_is_left_when_the_attempt_is_cancelled_and_is_killed(tmp_path):
    start = time.monotonic()
    fetch = Scripted("import os, time; print(os.getpid(), file=open(os.environ['PIDFILE'], 'w'), flush=True); "
                     "time.sleep(300)", cancelled=lambda: time.monotonic() - start > 1)
    fetch.env["PIDFILE"] = str(tmp_path / "pid")
    with pytest.raises(OSError, match="cancelled"):
        fetch.fetch("s3://b/x", lambda tag, fill: place(tag, fill, tmp_path))
    assert time.monotonic() - start < 10
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_child_that_stalls_mid_file_or_talks_without_end_fails_the_fetch(tmp_path):
    stalls = Scripted("import sys, time; print('{\"tag\": \"t\"}', flush=True); sys.stdin.readline(); "
                      "sys.stdout.write('{\"path\": \"a\", \"size\": 10}\\nabc'); sys.stdout.flush(); time.sleep(300)",
                      cancelled=lambda: (tmp_path / "stop").exists())
    threading.Timer(1.0, (tmp_path / "stop").touch).start()
    (tmp_path / "in").mkdir()
    with pytest.raises(OSError, match="cancelled"):
        stalls.fetch("s3://b/x", lambda tag, fill: place(tag, fill, tmp_path / "in"))
    endless = Scripted("import sys; sys.stdout.write('x' * (1 << 22)); sys.stdout.flush()")
    with pytest.raises(OSError, match="more than 65536 bytes in a line"):
        endless.fetch("s3://b/x", lambda tag, fill: place(tag, fill, tmp_path / "in"))
    says = Scripted("print('{\"error\": \"AccessDenied: no\"}')")
    with pytest.raises(OSError, match="AccessDenied: no"):
        says.fetch("s3://b/x", lambda tag, fill: place(tag, fill, tmp_path / "in"))
