"""Read movie reviews as (tokens, label) pairs: the real IMDB data, or the synthetic stand-in.

Three sources give the same form, a ``Dataset`` with a ``train`` and a
``heldout`` split, each split a list of labels (1 positive, 0 negative) and
its reviews as token lists (``textdata.tokenize``), read lazily so the 50,000
real reviews never sit in memory as text at once:

- the ``aclImdb`` folder of the Large Movie Review Dataset (Maas et al., 2011):
  ``train/pos``, ``train/neg``, ``test/pos``, ``test/neg`` hold one ``.txt``
  per review; ``train/unsup`` is unlabelled and ignored. Held out: ``test``.
- the Keras ``imdb.npz`` (what ``keras.datasets.imdb`` downloads):
  ``x_train``/``x_test`` are reviews as word indices (the rank of the word in
  ``imdb_word_index.json``), ``y_train``/``y_test`` the labels. With
  ``imdb_word_index.json`` beside it the indices become words again; without
  it each index is kept as a token (``w123``), which a bag of words can still use.
- no path: ``corpus.py``'s generated reviews, a synthetic stand-in, not IMDB.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import corpus
from textdata import mark_negation, tokenize

NPZ_NAME, WORD_INDEX_NAME = "imdb.npz", "imdb_word_index.json"


@dataclass
class Split:
    labels: list[int]
    read: Callable[[int], list[str]]  # tokens of review i

    def __len__(self) -> int:
        return len(self.labels)

    def docs(self) -> Iterator[list[str]]:
        """Each review's tokens, in order; may be iterated again (it reads again)."""
        return (self.read(i) for i in range(len(self.labels)))


@dataclass
class Dataset:
    train: Split
    heldout: Split
    source: str  # says what this is, for the log: real IMDB, or the synthetic stand-in
    synthetic: bool = False


def load(path: str | Path | None, seed: int = 0) -> Dataset:
    """Whatever ``path`` holds (see the module docstring); empty or None: the synthetic stand-in."""
    if path is None or str(path).strip() == "":
        return load_synthetic(seed)
    p = Path(path).expanduser()
    if p.is_file() and p.suffix == ".npz":
        return load_keras_npz(p)
    if p.is_dir():
        if (p / "train" / "pos").is_dir():
            return load_aclimdb(p)
        if (p / "aclImdb" / "train" / "pos").is_dir():
            return load_aclimdb(p / "aclImdb")
        if (p / NPZ_NAME).is_file():
            return load_keras_npz(p / NPZ_NAME)
    if not p.exists():
        raise FileNotFoundError(f"--data: {p} does not exist")
    raise ValueError(f"--data: {p} is neither an aclImdb folder (with train/pos, train/neg, test/pos, "
                     f"test/neg), a folder holding aclImdb/ or {NPZ_NAME}, nor a Keras .npz file")


def load_aclimdb(root: Path) -> Dataset:
    def split(name: str) -> Split:
        files: list[Path] = []
        labels: list[int] = []
        for label, sub in ((1, "pos"), (0, "neg")):
            folder = root / name / sub
            if not folder.is_dir():
                raise FileNotFoundError(f"--data: {root} is not a complete aclImdb folder: {folder} is missing")
            found = sorted(folder.glob("*.txt"))
            files += found
            labels += [label] * len(found)
        if not files:
            raise ValueError(f"--data: no reviews (*.txt) under {root / name}")
        return Split(labels, lambda i: tokenize(files[i].read_text(encoding="utf-8", errors="replace")))

    return Dataset(split("train"), split("test"), f"IMDB reviews from the aclImdb folder {root}")


def load_keras_npz(file: Path, word_index: Path | None = None) -> Dataset:
    word_index = word_index or file.with_name(WORD_INDEX_NAME)
    # object arrays of Python lists: loading needs pickle, so only point this at a file you trust
    with np.load(file, allow_pickle=True) as z:
        missing = {"x_train", "y_train", "x_test", "y_test"} - set(z.files)
        if missing:
            raise ValueError(f"--data: {file} lacks {', '.join(sorted(missing))}; not a Keras imdb.npz")
        arrays = {k: z[k] for k in ("x_train", "y_train", "x_test", "y_test")}

    if word_index.is_file():
        words = {int(i): w for w, i in json.loads(word_index.read_text(encoding="utf-8")).items()}
        how = f"words from {word_index.name}"

        def tokens(seq) -> list[str]:
            return mark_negation(words.get(int(i), f"w{int(i)}") for i in seq)
    else:
        how = f"index tokens: no {WORD_INDEX_NAME} beside it"

        def tokens(seq) -> list[str]:
            return [f"w{int(i)}" for i in seq]

    def split(x: np.ndarray, y: np.ndarray) -> Split:
        if len(x) != len(y):
            raise ValueError(f"--data: {file} has {len(x)} reviews but {len(y)} labels in one split")
        return Split([int(v) for v in y], lambda i: tokens(x[i]))

    return Dataset(split(arrays["x_train"], arrays["y_train"]), split(arrays["x_test"], arrays["y_test"]),
                   f"IMDB reviews from the Keras file {file} ({how})")


def load_synthetic(seed: int = 0) -> Dataset:
    train, heldout = corpus.splits(seed)

    def split(reviews: list[corpus.Review]) -> Split:
        return Split([r.label for r in reviews], lambda i: tokenize(reviews[i].text))

    return Dataset(split(train), split(heldout),
                   f"SYNTHETIC stand-in, not IMDB: {len(train) + len(heldout)} generated reviews "
                   f"(corpus.py, seed {seed}); pass --data for the real reviews", synthetic=True)
