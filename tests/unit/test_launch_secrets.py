"""A job's secret values masked in what leaves the node: log chunks and the kept copy of the whole log keep their
byte length (the server counts offsets in the file's bytes), and a value cut by a chunk or block is masked too."""

from __future__ import annotations

import pytest

from trainyard.errors import InvalidSpec
from trainyard.launch import tail
from trainyard.launch.secrets import Masks
from trainyard.spec.loader import parse_job

KEY = "sk-live-0123456789abcdef"


def test_every_value_and_each_line_of_one_is_masked_keeping_the_length():
    m = Masks([KEY, "-----BEGIN-----\nAAAAbbbbCCCC\n-----END-----", "ab"])
    data = f"key={KEY}; again {KEY}\nAAAAbbbbCCCC\nab is short: kept\n".encode()
    out = m.apply(data)
    assert len(out) == len(data) and KEY.encode() not in out and b"AAAAbbbbCCCC" not in out
    assert out.startswith(b"key=" + b"*" * len(KEY)) and b"ab is short: kept" in out
    assert not Masks([]) and not Masks(["abc"])  # nothing long enough to mask: no work on the log path


def test_a_non_ascii_value_is_masked_by_its_bytes():
    m = Masks(["pässwörd-ü"])
    data = "x pässwörd-ü y\n".encode()
    assert m.apply(data) == b"x " + b"*" * len("pässwörd-ü".encode()) + b" y\n"


@pytest.mark.parametrize("block", [1, 3, 7, 24, 25, 4096])
def test_the_kept_log_is_masked_across_blocks(tmp_path, block):
    src, dst = tmp_path / "output.log", tmp_path / "masked"
    text = ("a" * 11 + KEY + "\n" + KEY + KEY + "tail").encode()
    src.write_bytes(text)
    Masks([KEY]).copy(str(src), str(dst), block=block)
    assert dst.read_bytes() == text.replace(KEY.encode(), b"*" * len(KEY))


def test_log_chunks_are_masked_and_count_the_files_bytes(tmp_path):
    log = tmp_path / "output.log"
    log.write_bytes(f"one {KEY}\ntwo {KEY[:6]}".encode())
    text, n = tail.log_chunk(str(log), 0, final=False, masks=Masks([KEY]))
    assert text == "one " + "*" * len(KEY) + "\n" and n == len(text.encode())  # the unfinished line waits


def test_job_secrets_name_the_field_and_line():
    spec = parse_job("command: train\nsecrets: [WANDB_API_KEY]\n")
    assert spec.secrets == {"WANDB_API_KEY": "WANDB_API_KEY"}
    assert parse_job("command: t\nsecrets: {HF_TOKEN: hf-read}\n").secrets == {"HF_TOKEN": "hf-read"}
    for text, words in [("command: t\nsecrets: [LD_PRELOAD]\n", "set by trainyard itself"),
                        ("command: t\nsecrets: {A: 'no spaces'}\n", "secret name 'no spaces'"),
                        ("command: t\nsecrets: [A, A]\n", "named twice"),
                        ("command: t\nsecrets: {A: a}\nenv_vars: {A: '1'}\n", "set by both env_vars and secrets"),
                        ("command: t\nsecrets: {1A: a}\n", "not starting with a digit"),
                        # its value would reach the command through env(1)'s arguments, which any user may read
                        ("command: t\nsecrets: {LC_ALL: a}\n", "one the loader or shell reads"),
                        ("command: t\nsecrets: {BASH_ENV: a}\n", "one the loader or shell reads")]:
        with pytest.raises(InvalidSpec) as e:
            parse_job(text)
        (err,) = e.value.errors
        assert words in err["message"] and err["line"] is not None, err


def test_a_dump_that_cut_a_long_secret_short_shows_none_of_its_head():
    key = "sk-proj-" + "A1b2C3d4" * 20  # 168 characters: py-spy shows the first ~128 and "..."
    masks = Masks([key])
    dump = f'  File "train.py", line 3, in <module>\n      api_key: "{key[:123]}..."\n      n: 5\n'
    shown = masks.truncated(dump)
    assert key[:8] not in shown and '"' + "*" * 123 + '..."' in shown
    assert "n: 5" in shown and masks.truncated("loading...") == "loading..."
    # a value shown whole is masked whole, as always
    assert masks.truncated(f"x = {key}") == "x = " + "*" * len(key)


@pytest.mark.parametrize("before", [100, 1000 - 10, 1000 - len(KEY), 1000 - 1])
def test_a_value_on_a_long_line_cut_by_the_chunk_is_masked_whole_in_the_next(tmp_path, before):
    # a line longer than a chunk (a one-line JSON dump) goes in pieces: the piece that ends inside the value
    # ended its head in clear; a later read saw only its tail, which matched nothing
    log = tmp_path / "output.log"
    log.write_bytes(b"x" * before + KEY.encode() + b"y" * 3000)
    masks, sent, offset = Masks([KEY]), "", 0
    while True:
        text, n = tail.log_chunk(str(log), offset, final=False, cap=1000, masks=masks)
        if not n:
            break
        sent, offset = sent + text, offset + n
    assert offset == log.stat().st_size and sent == "x" * before + "*" * len(KEY) + "y" * 3000


def test_the_start_of_a_value_still_being_written_waits_for_the_rest(tmp_path):
    log = tmp_path / "output.log"
    log.write_bytes(b"token: " + KEY[:10].encode())
    text, n = tail.log_chunk(str(log), 0, final=False, masks=Masks([KEY]))
    assert text == "token: " and n == 7
    log.write_bytes(b"token: " + KEY.encode() + b" done")
    assert tail.log_chunk(str(log), 7, final=False, masks=Masks([KEY]))[0] == "*" * len(KEY) + " done"
    assert Masks([KEY]).held(b"no secret here") == 0


@pytest.mark.parametrize("shift", [-len(KEY), -10, -1, 0])
def test_exec_output_cut_inside_a_value_shows_none_of_it(shift):
    import subprocess
    import sys

    from trainyard.launch import execs

    fill = execs.CAP + shift
    code = f"import sys; sys.stdout.write('x' * {fill} + {KEY!r} + 'tail')"
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) as proc:
        out = execs._collect(proc, 30, Masks([KEY]))["output"]
    assert KEY[:3] not in out.replace("x", ""), out[-80:]  # the old code showed the value's head before the cut
    assert out.endswith("\n… (cut)") and out.startswith("x" * fill)
