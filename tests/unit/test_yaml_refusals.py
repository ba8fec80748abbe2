"""YAML that was taken wrongly or crashed the reader: each is refused naming the file, the line and the field."""

import pytest

from trainyard.errors import InvalidSpec
from trainyard.spec.loader import parse_job_text
from trainyard.spec.queue import load_queues


def refused(text: str) -> dict:
    with pytest.raises(InvalidSpec) as e:
        parse_job_text(text, "job.yaml")
    [err] = e.value.errors
    return err


def test_a_key_given_twice_is_refused_at_its_second_line_not_merged_over_the_first():
    err = refused("name: j\ncommand: x\nresources:\n  memory: 64Gi\nretry: {max: 3}\nresources:\n  cpu: 2\n")
    assert (err["field"], err["line"], err["message"]) == ("resources", 6, "given twice (first at line 3)")
    nested = refused("name: j\ncommand: x\nresources:\n  cpu: 1\n  cpu: 2\n")
    assert (nested["field"], nested["line"]) == ("resources.cpu", 5)
    assert parse_job_text("name: j\ncommand: x\nresources: {cpu: 2}\n", "job.yaml").resources.cpu == 2


@pytest.mark.parametrize("head", ["kind: PyTorchJob\n", "# a PyTorchJob, one day\nname: j\ncommand: x\n"])
def test_a_deeply_nested_text_that_names_pytorchjob_is_refused_as_any_other(head):
    err = refused(head + "x: " + "[" * 900 + "]" * 900 + "\n")
    assert err["message"] == "not valid YAML: nested too deeply"


def test_a_queue_file_that_cannot_be_read_or_parsed_says_so_with_its_line(tmp_path):
    bad = tmp_path / "q.yaml"
    bad.write_text("name: q\n  cpu: [\n")
    with pytest.raises(InvalidSpec) as e:
        load_queues(bad)
    assert e.value.errors[0]["line"] == 2 and "not valid YAML" in e.value.errors[0]["message"]
    with pytest.raises(InvalidSpec) as e:
        load_queues(tmp_path / "missing.yaml")
    assert e.value.errors[0]["message"] == "cannot read: No such file or directory"
