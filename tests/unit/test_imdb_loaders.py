"""examples/imdb: the two real-data loaders agree, the stand-in corpus is deterministic, the copier shards.

The example's modules import each other by bare name (``import corpus``), as
scripts in one folder do; the fixture puts that folder on ``sys.path`` for
this module only and takes the bare names out of ``sys.modules`` afterwards.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import need_module

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "imdb"
MODULES = ("corpus", "textdata", "loaders", "copier", "model")

# split -> label -> texts. Every negation runs its full 3 words: the Keras form has no punctuation to end it sooner.
REVIEWS = {
    "train": {1: ["A wonderful film. The acting is superb!", "I loved it <br /><br />Great fun for everyone",
                  "Not bad at all, and the score is lovely"],
              0: ["This movie was not good at all. Boring!", "The plot isn't clever and the ending drags",
                  "Awful, dull and far too long"]},
    "test": {1: ["Superb acting and a great story"], 0: ["Boring plot, awful ending, not good"]},
}


class _Modules:
    """``imdb.loaders`` imports the example's ``loaders`` on first use (``model`` pulls in torch: seconds)."""

    def __getattr__(self, name: str):
        if name not in MODULES:
            raise AttributeError(name)
        return importlib.import_module(name)


@pytest.fixture(scope="module")
def imdb():
    saved = {name: sys.modules.pop(name) for name in MODULES if name in sys.modules}
    sys.path.insert(0, str(EXAMPLE))
    try:
        yield _Modules()
    finally:
        sys.path.remove(str(EXAMPLE))
        for name in MODULES:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def write_aclimdb(root: Path) -> Path:
    for split, by_label in REVIEWS.items():
        for label, texts in by_label.items():
            folder = root / "aclImdb" / split / ("pos" if label else "neg")
            folder.mkdir(parents=True)
            for i, text in enumerate(texts):
                (folder / f"{i}_{8 if label else 2}.txt").write_text(text, encoding="utf-8")
    unsup = root / "aclImdb" / "train" / "unsup"  # unlabelled reviews: must be ignored
    unsup.mkdir()
    (unsup / "0_0.txt").write_text("no label here", encoding="utf-8")
    return root / "aclImdb"


def write_keras_npz(folder: Path, imdb, with_word_index: bool = True) -> Path:
    """The same reviews as Keras stores them: word ranks (1 = most frequent), punctuation gone."""
    def plain_words(text: str) -> list[str]:
        return [w for w in imdb.textdata.words(text) if w[0].isalnum()]

    counts = Counter(w for by_label in REVIEWS.values() for texts in by_label.values()
                     for t in texts for w in plain_words(t))
    index = {w: rank for rank, (w, _) in enumerate(counts.most_common(), start=1)}
    arrays = {}
    for split, key in (("train", "train"), ("test", "test")):
        seqs = [[index[w] for w in plain_words(t)] for label in (1, 0) for t in REVIEWS[split][label]]
        x = np.empty(len(seqs), dtype=object)
        x[:] = seqs
        arrays[f"x_{key}"] = x
        arrays[f"y_{key}"] = np.array([label for label in (1, 0) for _ in REVIEWS[split][label]])
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "imdb.npz", **arrays)
    if with_word_index:
        (folder / "imdb_word_index.json").write_text(json.dumps(index), encoding="utf-8")
    return folder / "imdb.npz"


def pairs(split) -> list[tuple[tuple[str, ...], int]]:
    return sorted((tuple(doc), label) for doc, label in zip(split.docs(), split.labels))


def test_aclimdb_folder_and_keras_npz_load_into_the_same_tokens_and_labels(imdb, tmp_path):
    acl = imdb.loaders.load(write_aclimdb(tmp_path / "acl"))
    npz = imdb.loaders.load(write_keras_npz(tmp_path / "keras", imdb))

    assert pairs(acl.train) == pairs(npz.train)
    assert pairs(acl.heldout) == pairs(npz.heldout)
    assert sorted(acl.train.labels) == [0, 0, 0, 1, 1, 1] and len(acl.heldout) == 2
    assert not acl.synthetic and not npz.synthetic
    # negation is marked the same way from both sources
    assert ("this", "movie", "was", "not", "not_good", "not_at", "not_all", "boring") in dict(pairs(acl.train))


def test_keras_npz_without_word_index_keeps_index_tokens(imdb, tmp_path):
    data = imdb.loaders.load(write_keras_npz(tmp_path / "keras", imdb, with_word_index=False))
    first = next(data.train.docs())
    assert first and all(tok.startswith("w") and tok[1:].isdigit() for tok in first)
    assert data.train.labels == [1, 1, 1, 0, 0, 0]
    assert "index tokens" in data.source


def test_a_folder_holding_either_form_is_found(imdb, tmp_path):
    write_aclimdb(tmp_path / "a")
    write_keras_npz(tmp_path / "k", imdb)
    assert "aclImdb" in imdb.loaders.load(tmp_path / "a").source
    assert "Keras" in imdb.loaders.load(tmp_path / "k").source


@pytest.mark.parametrize("make, message", [
    (lambda root: root, "does not exist"),
    (lambda root: (root.mkdir(), root)[1], "neither an aclImdb folder"),
])
def test_bad_data_paths_are_named(imdb, tmp_path, make, message):
    path = make(tmp_path / "nothing")
    with pytest.raises((FileNotFoundError, ValueError), match=message) as err:
        imdb.loaders.load(path)
    assert "--data" in str(err.value)


def test_an_incomplete_aclimdb_folder_names_what_is_missing(imdb, tmp_path):
    root = write_aclimdb(tmp_path)
    for f in (root / "test" / "neg").iterdir():
        f.unlink()
    (root / "test" / "neg").rmdir()
    with pytest.raises(FileNotFoundError, match="test/neg is missing"):
        imdb.loaders.load(root)


def test_no_path_means_the_synthetic_stand_in_and_says_so(imdb):
    data = imdb.loaders.load("", seed=3)
    assert data.synthetic and "SYNTHETIC stand-in, not IMDB" in data.source
    assert len(data.train) == 5000 and len(data.heldout) == 2000
    assert 0.4 < sum(data.train.labels) / len(data.train) < 0.6


def test_the_synthetic_corpus_is_the_same_for_a_seed_and_differs_between_seeds(imdb):
    assert imdb.corpus.generate(50, seed=1) == imdb.corpus.generate(50, seed=1)
    assert imdb.corpus.generate(50, seed=1) != imdb.corpus.generate(50, seed=2)


def test_copier_shards_real_data_with_one_shared_vocabulary(imdb, tmp_path):
    root = write_aclimdb(tmp_path / "acl")
    out = tmp_path / "out"
    assert imdb.copier.main(["--data", str(root), "--workers", "2", "--min-count", "1",
                             "--shards", str(out / "shards"), "--heldout", str(out / "heldout"),
                             "--vocab", str(out / "vocab.json")]) == 0

    vocab = imdb.textdata.load_vocab(out / "vocab.json")
    shards = [imdb.textdata.Encoded.load(out / "shards" / str(i)) for i in range(2)]
    heldout = imdb.textdata.Encoded.load(out / "heldout")
    assert sorted(p.name for p in (out / "shards").iterdir()) == ["0", "1"]
    assert [len(s) for s in shards] == [3, 3] and len(heldout) == 2
    assert sorted(np.concatenate([s.labels for s in shards]).tolist()) == [0, 0, 0, 1, 1, 1]
    assert all(s.vocab_size == len(vocab) == heldout.vocab_size for s in shards)
    assert "not_good" in vocab and all(s.ids.max() < len(vocab) for s in shards)


def test_copier_writes_the_same_bytes_twice(imdb, tmp_path):
    """The pipeline caches by content: an unchanged copier run must not look like new data downstream."""
    root = write_aclimdb(tmp_path / "acl")
    runs = []
    for n in (1, 2):
        out = tmp_path / f"out{n}"
        imdb.copier.main(["--data", str(root), "--workers", "2", "--shards", str(out / "shards"),
                          "--heldout", str(out / "heldout"), "--vocab", str(out / "vocab.json")])
        runs.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert runs[0] == runs[1] and len(runs[0]) == 2 * 4 + 4 + 1


def test_copier_refuses_more_workers_than_reviews(imdb, tmp_path):
    root = write_aclimdb(tmp_path / "acl")
    with pytest.raises(SystemExit, match="--workers 7: only 6 training reviews"):
        imdb.copier.main(["--data", str(root), "--workers", "7", "--shards", str(tmp_path / "s"),
                          "--heldout", str(tmp_path / "h"), "--vocab", str(tmp_path / "v.json")])


@pytest.mark.slow  # torch.optim takes seconds to import; the trainer avoids it, this test cannot
def test_the_written_out_adam_matches_torch_optim_adam(imdb):
    torch = need_module("torch", "pip install 'trainyard[torch]'")
    torch.manual_seed(0)
    ours, theirs = imdb.model.BagOfEmbeddings(50, 4), imdb.model.BagOfEmbeddings(50, 4)
    theirs.load_state_dict(ours.state_dict())
    opt_ours = imdb.model.Adam(ours.parameters(), lr=0.1)
    opt_theirs = torch.optim.Adam(theirs.parameters(), lr=0.1)
    ids, offsets, labels = torch.randint(0, 50, (40,)), torch.arange(0, 40, 4), torch.randint(0, 2, (10,))
    for _ in range(5):
        for net, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(ids, offsets), labels).backward()
            opt.step()
    for key, value in ours.state_dict().items():
        assert torch.allclose(value, theirs.state_dict()[key], atol=1e-6), key
