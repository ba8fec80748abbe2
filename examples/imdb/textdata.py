"""Tokens, the shared vocabulary, and the on-disk form of an encoded split. numpy only.

A split (one shard, or the held-out set) is a folder: ``ids.npy`` (every
review's token ids, concatenated, int32), ``offsets.npy`` (where each review
starts in ``ids``, int64), ``labels.npy`` (1 positive, 0 negative, int64) and
``meta.json`` (``vocab_size``, ``reviews``), so a trainer needs nothing but its
shard. Plain ``.npy`` files rather than an ``.npz``: a zip stamps the time in,
and the same split should be the same bytes, for content-addressed caching.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[.,!?;:()]")
_NEGATORS = frozenset({"not", "no", "never", "nothing", "nor", "hardly", "without"})
_NEGATION_SCOPE = 3  # words after a negator that get the `not_` mark, unless punctuation ends it first


def words(text: str) -> list[str]:
    """Lowercased words and punctuation; IMDB's ``<br />`` line breaks count as a full stop."""
    return _TOKEN.findall(text.lower().replace("<br />", " . "))


def mark_negation(tokens: Iterable[str]) -> list[str]:
    """Drop punctuation, and write the few words after a negator as ``not_word``.

    A bag of words cannot tell "good" from "not good"; with the mark it can, at
    the cost of a second token per word. Punctuation only bounds the scope.
    """
    out: list[str] = []
    left = 0
    for tok in tokens:
        if not tok[0].isalnum():
            left = 0
            continue
        if tok in _NEGATORS or tok.endswith("n't"):
            out.append(tok)
            left = _NEGATION_SCOPE
        elif left:
            out.append("not_" + tok)
            left -= 1
        else:
            out.append(tok)
    return out


def tokenize(text: str) -> list[str]:
    return mark_negation(words(text))


def build_vocab(docs: Iterable[list[str]], max_size: int, min_count: int) -> list[str]:
    """The ``max_size`` most frequent tokens seen at least ``min_count`` times (ties by token, so stable)."""
    counts: Counter[str] = Counter()
    for doc in docs:
        counts.update(doc)
    kept = [(n, tok) for tok, n in counts.items() if n >= min_count]
    kept.sort(key=lambda nt: (-nt[0], nt[1]))
    return [tok for _, tok in kept[:max_size]]


def encode(doc: list[str], index: dict[str, int]) -> np.ndarray:
    """Token ids; tokens outside the vocabulary are dropped (they carry nothing the model knows)."""
    return np.fromiter((index[t] for t in doc if t in index), dtype=np.int32)


@dataclass
class Encoded:
    ids: np.ndarray
    offsets: np.ndarray
    labels: np.ndarray
    vocab_size: int

    @classmethod
    def from_docs(cls, docs: list[np.ndarray], labels: Iterable[int], vocab_size: int) -> Encoded:
        lengths = np.array([len(d) for d in docs], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(docs) else lengths
        ids = np.concatenate(docs).astype(np.int32) if docs else np.zeros(0, np.int32)
        return cls(ids, offsets, np.asarray(list(labels), dtype=np.int64), vocab_size)

    def __len__(self) -> int:
        return len(self.labels)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("ids", "offsets", "labels"):
            np.save(folder / f"{name}.npy", getattr(self, name))
        meta = {"vocab_size": self.vocab_size, "reviews": len(self)}
        (folder / "meta.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> Encoded:
        folder = Path(folder)
        if not (folder / "meta.json").is_file():
            raise FileNotFoundError(f"no encoded split at {folder} (expected meta.json, ids.npy, offsets.npy, "
                                    "labels.npy: a folder written by copier.py)")
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        arrays = [np.load(folder / f"{name}.npy") for name in ("ids", "offsets", "labels")]
        return cls(*arrays, vocab_size=int(meta["vocab_size"]))


def save_vocab(path: Path, vocab: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(vocab) + "\n", encoding="utf-8")


def load_vocab(path: Path) -> list[str]:
    return json.loads(Path(path).read_text(encoding="utf-8"))
