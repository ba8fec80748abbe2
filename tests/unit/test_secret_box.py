"""The servers' key file: made once (0600), its first key seals, every key opens, a value is re-sealed under the
first key only when it is not already, and a file that is not keys is named in the error."""

from __future__ import annotations

import stat

import pytest
from cryptography.fernet import Fernet

from trainyard.errors import SecretKeyError
from trainyard.services.secret_box import SecretBox


def test_the_key_is_made_once_private_and_opens_what_it_sealed(tmp_path):
    box = SecretBox(tmp_path / "home" / "secrets.key")
    sealed = box.seal("pässword")
    assert "pässword" not in sealed and box.open(sealed, "x") == "pässword"
    assert stat.S_IMODE(box.key_file.stat().st_mode) == 0o600
    assert SecretBox(box.key_file).open(sealed, "x") == "pässword"  # another server on the same file


def test_a_new_first_key_seals_the_old_still_opens_and_reseal_moves_only_old_values(tmp_path):
    path = tmp_path / "secrets.key"
    box = SecretBox(path)
    old = box.seal("v")
    new_key = Fernet.generate_key()
    path.write_bytes(new_key + b"\n# the key before\n" + path.read_bytes())
    assert box.reload() == 2 and box.open(old, "x") == "v"
    moved = box.reseal(old, "x")
    assert moved != old and Fernet(new_key).decrypt(moved.encode()) == b"v"
    assert box.reseal(moved, "x") == moved  # already under the first key: left as it is
    path.write_bytes(new_key + b"\n")
    assert box.reload() == 1 and box.open(moved, "x") == "v"
    with pytest.raises(SecretKeyError, match="cannot be opened with this server's keys"):
        box.open(old, "secret a of team t")


@pytest.mark.parametrize("text", [b"", b"# only a comment\n", b"not a key\n"])
def test_a_key_file_without_keys_is_named(tmp_path, text):
    path = tmp_path / "secrets.key"
    path.write_bytes(text)
    with pytest.raises(SecretKeyError, match=str(path)):
        SecretBox(path).seal("v")
