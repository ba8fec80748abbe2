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
