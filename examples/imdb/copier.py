"""Step 1: read the reviews, build one shared vocabulary, split the training set into shards.

    python copier.py --workers 5 --shards out/shards --heldout out/heldout --vocab out/vocab.json
    python copier.py --data ~/data/aclImdb ...        # the real reviews (or a Keras imdb.npz)

Writes ``--shards``/0 … ``--shards``/N-1 (one encoded split each, see
``textdata.py``), the encoded held-out set to ``--heldout``, and the
vocabulary (a JSON list, id = position) to ``--vocab``. Every shard is encoded
with the same vocabulary, so trainers agree on what each embedding row means
and their weights can be averaged. numpy only: this step never imports torch.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import loaders
from textdata import Encoded, build_vocab, encode, save_vocab


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="", help="aclImdb folder, imdb.npz, or a folder holding either; "
                                              "empty: the synthetic stand-in (not IMDB)")
    p.add_argument("--workers", type=int, required=True, help="number of training shards")
    p.add_argument("--seed", type=int, default=0, help="shuffles reviews into shards; seeds the synthetic corpus")
    p.add_argument("--max-vocab", type=int, default=20000, help="keep at most this many tokens")
    p.add_argument("--min-count", type=int, default=2, help="drop tokens seen fewer times in the training set")
    p.add_argument("--shards", type=Path, required=True, help="folder to write shard i into <shards>/<i>/")
    p.add_argument("--heldout", type=Path, required=True, help="folder for the encoded held-out set")
    p.add_argument("--vocab", type=Path, required=True, help="file for the vocabulary (JSON list)")
    args = p.parse_args(argv)
    if args.workers < 1:
        p.error(f"--workers must be at least 1, not {args.workers}")
    if args.max_vocab < 1 or args.min_count < 1:
        p.error("--max-vocab and --min-count must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    data = loaders.load(args.data, seed=args.seed)
    banner = "!! " if data.synthetic else ""
    print(f"{banner}data: {data.source}", flush=True)
    if len(data.train) < args.workers:
        raise SystemExit(f"--workers {args.workers}: only {len(data.train)} training reviews to share out")

    vocab = build_vocab(data.train.docs(), args.max_vocab, args.min_count)
    index = {tok: i for i, tok in enumerate(vocab)}
    print(f"vocabulary: {len(vocab)} tokens (seen at least {args.min_count}x in training, "
          f"at most {args.max_vocab})", flush=True)

    train_ids = [encode(doc, index) for doc in data.train.docs()]
    labels = np.asarray(data.train.labels)
    # the real aclImdb lists all positives first: shuffle so every shard gets both classes
    order = np.random.default_rng(args.seed).permutation(len(train_ids))
    for i in range(args.workers):
        rows = order[i::args.workers]
        shard = Encoded.from_docs([train_ids[r] for r in rows], labels[rows], len(vocab))
        shard.save(args.shards / str(i))
        print(f"shard {i}: {len(shard)} reviews, {shard.labels.mean():.0%} positive -> {args.shards / str(i)}")

    heldout = Encoded.from_docs([encode(doc, index) for doc in data.heldout.docs()], data.heldout.labels,
                                len(vocab))
    heldout.save(args.heldout)
    save_vocab(args.vocab, vocab)
    print(f"held-out: {len(heldout)} reviews -> {args.heldout}; vocabulary -> {args.vocab} "
          f"({time.perf_counter() - t0:.1f}s)")
    if data.synthetic:
        print("!! these are synthetic reviews (corpus.py), a stand-in for IMDB; pass --data for the real ones")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"error: {e}")
