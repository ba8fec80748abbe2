"""Which `trainyard run` takes the quick path (the standard library, the spec's text sent as it is):
only a plain `run SPEC.yaml --wait` or `--follow` whose spec has nothing to read or pack on this side."""

import pytest

from trainyard.cli.entry import quick
from trainyard.sdk.quick import NotQuick, _events, _self_contained


@pytest.mark.parametrize("argv", [
    ["run", "job.yaml"], ["run", "-f", "-w"], ["run", "job.yaml", "-w", "-p", "a=1"],
    ["run", "-w", "--wait"], ["ls", "-w", "x"], ["run", "--wait", "--"], ["run", "--dry-run", "-w"],
    ["run", "--follow", "--"], ["logs", "-f", "j-1"],
])
def test_anything_but_a_plain_run_spec_wait_or_follow_is_the_full_clis(argv):
    assert quick(argv) is None


@pytest.mark.parametrize("text", [
    "command: python train.py\nworkdir: .\n",
    "command: x\ninputs: {data: ./data.csv}\n",
    "command: x\nenv: {requirements: requirements.txt}\n",
    "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\n",
    "command: x\nservice: {port: 8000}\n",
    # the same keys however YAML spells them: quoted, in flow style, explicit, merged from an anchor
    "'workdir': .\ncommand: x\n",
    "{command: x, \"inputs\": {d: ./d.csv}}\n",
    "? workdir\n: .\ncommand: x\n",
    "base: &b {workdir: .}\njob:\n  <<: *b\n",
    "command: x\nenv:\n  \"requirements\": r.txt\n",
])
def test_a_spec_with_files_to_prepare_is_declined_however_yaml_spells_the_key(tmp_path, text):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(NotQuick):
        _self_contained(path)


@pytest.mark.parametrize("text", [
    '"work\\x64ir": .\ncommand: x\n',           # a character by its code
    '"\\u0069nputs": {d: ./d.csv}\ncommand: x\n',
    '"k\\U00000069nd": Service\n',
    '? "work\\\n   dir"\n: .\ncommand: x\n',      # an escaped line break joins the lines (an explicit key)
])
def test_a_key_spelled_with_escapes_is_declined(tmp_path, text):
    import yaml

    assert set(yaml.safe_load(text)) & {"workdir", "inputs", "kind"}  # what the server would read
    (tmp_path / "job.yaml").write_text(text)
    with pytest.raises(NotQuick):
        _self_contained(tmp_path / "job.yaml")


def test_escapes_that_spell_no_key_keep_the_quick_way(tmp_path):
    text = 'name: t\ncommand: [python, -c, "import sys\\nprint(\\"a\\tb\\\\x64\\")"]\n'
    (tmp_path / "job.yaml").write_text(text)
    assert _self_contained(tmp_path / "job.yaml") == text


def test_a_self_contained_spec_goes_as_its_own_text_and_other_files_do_not(tmp_path):
    text = "name: t\ncommand: [python, -c, pass]\nenv: {pip: [numpy]}\nresources: {cpu: 1}\n"
    (tmp_path / "job.yml").write_text(text)
    (tmp_path / "train.py").write_text("pass\n")
    assert _self_contained(tmp_path / "job.yml") == text
    with pytest.raises(NotQuick):
        _self_contained(tmp_path / "train.py")
    with pytest.raises(NotQuick):
        _self_contained(tmp_path / "missing.yaml")


class Lines:
    def __init__(self, text: str) -> None:
        self.lines = text.encode().splitlines(keepends=True)

    def readline(self) -> bytes:
        return self.lines.pop(0) if self.lines else b""


def test_the_quick_log_stream_reads_events_as_the_sse_spec_dispatches_them():
    # sse-starlette's framing: "\n" or "\r\n" line ends, a keep-alive comment between chunks, the end event
    body = ('id: 1\ndata: {"data": "one"}\n\n: keep-alive\n\n'
            'id: 2\r\ndata:{"data": "two"}\r\n\r\n'
            'event: end\ndata: {"status": "succeeded"}\n\n'
            'id: 3\ndata: unfinished')  # a frame without its blank line is not dispatched
    assert list(_events(Lines(body))) == [("message", "1", '{"data": "one"}'), ("message", "2", '{"data": "two"}'),
                                          ("end", "2", '{"status": "succeeded"}')]  # the last id stays
