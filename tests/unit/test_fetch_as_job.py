"""What the launcher writes from a fetch run as the job: plain files in folders it makes, nothing else."""

from __future__ import annotations

import io
import json

import pytest

from trainyard.launch.fetch_as_job import receive


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
