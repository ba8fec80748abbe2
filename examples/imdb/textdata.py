"""Tokens, the shared vocabulary, and the on-disk form of an encoded split. numpy only.

A split (one shard, or the held-out set) is a folder holding ``data.npz``:
``ids`` (every review's token ids, concatenated, int32), ``offsets`` (where
each review starts in ``ids``, int64), ``labels`` (1 positive, 0 negative,
int64) and ``vocab_size``, so a trainer needs nothing but its shard.
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
        with open(folder / "data.npz", "wb") as f:  # a file object: np.savez would otherwise add a suffix
            np.savez(f, ids=self.ids, offsets=self.offsets, labels=self.labels,
                     vocab_size=np.int64(self.vocab_size))

    @classmethod
    def load(cls, path: Path) -> Encoded:
        """``path`` is a split folder or its ``data.npz``."""
        path = Path(path)
        file = path / "data.npz" if path.is_dir() else path
        if not file.is_file():
            raise FileNotFoundError(f"no encoded split at {path} (expected a folder with data.npz)")
        with np.load(file) as z:
            return cls(z["ids"], z["offsets"], z["labels"], int(z["vocab_size"]))


def save_vocab(path: Path, vocab: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(vocab) + "\n", encoding="utf-8")


def load_vocab(path: Path) -> list[str]:
    return json.loads(Path(path).read_text(encoding="utf-8"))
