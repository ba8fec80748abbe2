"""Step 2 (one per shard): train the bag-of-embeddings classifier on one shard and save it.

    python trainer.py --data out/shards/0 --epochs 3 --batch 100 --out out/models/0

Every trainer builds its model with ``torch.manual_seed(--seed)`` before
anything else touches the random state, so all of them start from the very
same weights: that is what makes averaging their weights afterwards
meaningful (one round of federated averaging). The saved file records a
digest of those initial weights, which the aggregator checks.

Metrics (``loss``, ``accuracy`` on the shard, per epoch) go through
``trainyard.log_metrics``, which is a print outside trainyard; the script
needs no server and not even trainyard installed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

import model as bag
from metrics import log_metrics
from textdata import Encoded


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="one shard folder written by copier.py")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=100, help="reviews per step")
    p.add_argument("--lr", type=float, default=0.2, help="Adam learning rate")
    p.add_argument("--dim", type=int, default=16, help="embedding size")
    p.add_argument("--seed", type=int, default=0, help="initial weights (same in every trainer) and batch order")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (the step asks for 1 core)")
    p.add_argument("--out", type=Path, required=True, help="where to save the model (a file; or a folder: "
                                                           "<out>/model.pt)")
    args = p.parse_args(argv)
    for name in ("epochs", "batch", "dim", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    if args.lr <= 0:
        p.error(f"--lr must be positive, not {args.lr}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    shard = Encoded.load(args.data)
    if len(shard) == 0:
        raise SystemExit(f"--data {args.data}: the shard is empty")
    net = bag.initial_model(shard.vocab_size, args.dim, args.seed)
    init_digest = bag.digest(net)
    print(f"shard {args.data}: {len(shard)} reviews, vocabulary {shard.vocab_size}; "
          f"epochs={args.epochs} batch={args.batch} lr={args.lr} seed={args.seed} init={init_digest}", flush=True)

    opt = bag.Adam(net.parameters(), lr=args.lr)
    order_rng = np.random.default_rng(args.seed)
    labels = torch.from_numpy(shard.labels)
    for epoch in range(1, args.epochs + 1):
        net.train()
        total, correct, seen = 0.0, 0, 0
        for rows, ids, offsets in bag.batches(shard.ids, shard.offsets, order_rng.permutation(len(shard)),
                                              args.batch):
            logits = net(ids, offsets)
            loss = nn.functional.cross_entropy(logits, labels[rows])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(rows)
            correct += int((logits.argmax(1) == labels[rows]).sum())
            seen += len(rows)
        log_metrics(step=epoch, loss=total / seen, accuracy=correct / seen)
        print(f"epoch {epoch}/{args.epochs}  loss {total / seen:.4f}  train accuracy {correct / seen:.4f}"
              f"  ({time.perf_counter() - t0:.1f}s)", flush=True)

    # no paths in the file: the same training gives the same bytes, wherever it ran (caching is by content)
    bag.save(net, args.out, init_digest, reviews=len(shard),
             hyper={k: getattr(args, k) for k in ("epochs", "batch", "lr", "dim", "seed")})
    print(f"saved -> {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"error: {e}")
