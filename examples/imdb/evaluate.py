"""Step 4: held-out accuracy of the averaged model, next to that of each shard's own model.

    python evaluate.py --averaged out/averaged.pt --models out/models --heldout out/heldout \
        --vocab out/vocab.json --out out/report.json

``--models`` is the same fan-in folder the aggregator read (one model per
trainer); ``--baseline`` (default ``0``) names the one whose accuracy is
reported as "the single shard's model". The others are scored too, so the
report shows the average against the best single shard as well. Prints the
accuracies, logs them as metrics (``averaged_accuracy``, ``single_accuracy``,
``best_single_accuracy``) and writes a JSON report to ``--out``. With
``--vocab`` it also lists the words that push the averaged model hardest
either way, a quick check that it learned sentiment and not noise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

import model as bag
from metrics import log_metrics
from textdata import Encoded, load_vocab


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--averaged", type=Path, required=True, help="the aggregator's model")
    p.add_argument("--models", type=Path, required=True, help="folder with one trainer's model per entry")
    p.add_argument("--baseline", default="0", help="entry of --models to report as the single shard's model")
    p.add_argument("--heldout", type=Path, required=True, help="the held-out split written by copier.py")
    p.add_argument("--vocab", type=Path, help="the vocabulary, to show the most telling words")
    p.add_argument("--out", type=Path, required=True, help="where to write the JSON report")
    return p.parse_args(argv)


@torch.no_grad()
def telling_words(net: bag.BagOfEmbeddings, vocab: list[str], n: int = 8) -> dict[str, list[str]]:
    """Words whose embedding moves the positive-minus-negative logit most, either way."""
    push = net.embed.weight @ (net.out.weight[1] - net.out.weight[0])
    order = torch.argsort(push, descending=True).tolist()
    return {"positive": [vocab[i] for i in order[:n]], "negative": [vocab[i] for i in order[::-1][:n]]}


def score(path: Path, what: str, heldout: Encoded) -> tuple[dict, float]:
    saved = bag.load_file(path)
    if saved["config"]["vocab_size"] != heldout.vocab_size:
        raise ValueError(f"{what} {path}: a vocabulary of {saved['config']['vocab_size']}, the held-out set "
                         f"{heldout.vocab_size}: they come from different copier runs")
    return saved, bag.accuracy(bag.build(saved), heldout.ids, heldout.offsets, heldout.labels)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    heldout = Encoded.load(args.heldout)
    averaged, acc_avg = score(args.averaged, "--averaged", heldout)
    singles = {p.name: score(p, "--models", heldout)[1] for p in bag.entries(args.models)}
    if args.baseline not in singles:
        raise ValueError(f"--baseline {args.baseline}: no such entry in {args.models} ({', '.join(singles)})")
    acc_single, best = singles[args.baseline], max(singles.values())

    print(f"held-out reviews: {len(heldout)}")
    print(f"averaged model ({len(singles)} shards): accuracy {acc_avg:.4f}")
    print(f"single shard model ({args.baseline}):       accuracy {acc_single:.4f}")
    print("every shard's own model: " + "  ".join(f"{k}: {v:.4f}" for k, v in singles.items()))
    verdict = "beats" if acc_avg > acc_single else "does NOT beat"
    print(f"the averaged model {verdict} the single shard's model by {100 * (acc_avg - acc_single):+.1f} points "
          f"(the best shard's by {100 * (acc_avg - best):+.1f})")
    log_metrics(step=0, averaged_accuracy=acc_avg, single_accuracy=acc_single, best_single_accuracy=best)

    report = {"heldout_reviews": len(heldout), "averaged_accuracy": acc_avg, "single_accuracy": acc_single,
              "baseline": args.baseline, "gain": acc_avg - acc_single,
              "averaged_beats_single": acc_avg > acc_single,
              "single_accuracies": singles, "best_single_accuracy": best,
              "averaged_from": averaged.get("averaged_from", []), "averaged_reviews": averaged.get("reviews")}
    if args.vocab:
        report["telling_words"] = telling_words(bag.build(averaged), load_vocab(args.vocab))
        print("most positive words:", " ".join(report["telling_words"]["positive"]))
        print("most negative words:", " ".join(report["telling_words"]["negative"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"report -> {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (FileNotFoundError, ValueError) as e:
        sys.exit(f"error: {e}")
