"""Step 3: average the trained models' weights into one model (one round of federated averaging).

    python aggregator.py --models out/models --out out/averaged.pt

``--models`` is a folder with one entry per trainer (``0``, ``1``, …), each a
model file or a folder holding ``model.pt``: what a pipeline's fan-in hands
over. Each weight is the mean over models, weighted by the number of reviews
each trained on (the shards differ by one review at most). Models that did not
start from the same initial weights, or do not share an architecture, are
refused: their average would be noise.

With ``--vocab`` (the copier's vocabulary) the saved model carries its vocabulary too, so
it is all the model server needs to read raw reviews (``serving.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

import model as bag
from textdata import load_vocab


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=Path, required=True, help="folder with one trained model per entry")
    p.add_argument("--out", type=Path, required=True, help="where to save the averaged model")
    p.add_argument("--vocab", type=Path, help="the copier's vocabulary, saved into the model for serving")
    return p.parse_args(argv)


def average(saved: list[dict], names: list[str]) -> dict[str, torch.Tensor]:
    first = saved[0]
    for name, s in zip(names[1:], saved[1:]):
        if s["config"] != first["config"]:
            raise SystemExit(f"model {name} has config {s['config']}, model {names[0]} {first['config']}: "
                             "only models of one architecture can be averaged")
        if s["init_digest"] != first["init_digest"]:
            raise SystemExit(f"model {name} started from other initial weights ({s['init_digest']} vs "
                             f"{first['init_digest']}): train every shard with the same --seed")
    weights = torch.tensor([float(s.get("reviews", 1)) for s in saved])
    weights /= weights.sum()
    return {key: sum(w * s["state_dict"][key].float() for w, s in zip(weights, saved))
            for key in first["state_dict"]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    paths = bag.entries(args.models)
    saved = [bag.load_file(p) for p in paths]
    names = [p.name for p in paths]
    state = average(saved, names)
    net = bag.BagOfEmbeddings(**saved[0]["config"])
    net.load_state_dict(state)
    reviews = sum(int(s.get("reviews", 0)) for s in saved)
    extra = {}
    if args.vocab:
        extra["vocab"] = load_vocab(args.vocab)
        if len(extra["vocab"]) != net.config["vocab_size"]:
            raise SystemExit(f"--vocab {args.vocab}: {len(extra['vocab'])} tokens, the models "
                             f"{net.config['vocab_size']}: they come from different copier runs")
    bag.save(net, args.out, saved[0]["init_digest"], reviews=reviews, averaged_from=names, **extra)
    print(f"averaged {len(saved)} models ({', '.join(names)}; {reviews} reviews in all, "
          f"init {saved[0]['init_digest']}) -> {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"error: {e}")
