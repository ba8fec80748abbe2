"""Step 4: held-out accuracy of the averaged model and, for comparison, of one shard's model.

    python evaluate.py --averaged out/averaged.pt --single out/models/0 --heldout out/heldout \
        --vocab out/vocab.json --out out/report.json

Prints both accuracies, logs them as metrics (``averaged_accuracy``,
``single_accuracy``), and writes a JSON report to ``--out``. With
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
from textdata import Encoded, load_vocab

try:
    from trainyard import log_metrics
except ImportError:  # run by hand where trainyard is not installed
    def log_metrics(step: int | None = None, **values: float) -> None:
        print(f"[metrics] step={step} " + " ".join(f"{k}={v}" for k, v in values.items()), flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--averaged", type=Path, required=True, help="the aggregator's model")
    p.add_argument("--single", type=Path, required=True, help="one trainer's model, to compare with")
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    heldout = Encoded.load(args.heldout)
    averaged, single = bag.load_file(args.averaged), bag.load_file(args.single)
    for name, saved in (("--averaged", averaged), ("--single", single)):
        if saved["config"]["vocab_size"] != heldout.vocab_size:
            raise SystemExit(f"{name}: model has a vocabulary of {saved['config']['vocab_size']}, the held-out "
                             f"set {heldout.vocab_size}: they come from different copier runs")
    avg_net, single_net = bag.build(averaged), bag.build(single)
    acc_avg = bag.accuracy(avg_net, heldout.ids, heldout.offsets, heldout.labels)
    acc_single = bag.accuracy(single_net, heldout.ids, heldout.offsets, heldout.labels)

    print(f"held-out reviews: {len(heldout)}")
    print(f"averaged model ({len(averaged.get('averaged_from', []))} shards): accuracy {acc_avg:.4f}")
    print(f"single shard model ({args.single.name}):       accuracy {acc_single:.4f}")
    verdict = "beats" if acc_avg > acc_single else "does NOT beat"
    print(f"the averaged model {verdict} the single shard's model by {100 * (acc_avg - acc_single):+.1f} points")
    log_metrics(step=0, averaged_accuracy=acc_avg, single_accuracy=acc_single)

    report = {"heldout_reviews": len(heldout), "averaged_accuracy": acc_avg, "single_accuracy": acc_single,
              "gain": acc_avg - acc_single, "averaged_beats_single": acc_avg > acc_single,
              "averaged_from": averaged.get("averaged_from", []), "single_model": str(args.single),
              "single_reviews": single.get("reviews"), "averaged_reviews": averaged.get("reviews")}
    if args.vocab:
        report["telling_words"] = telling_words(avg_net, load_vocab(args.vocab))
        print("most positive words:", " ".join(report["telling_words"]["positive"]))
        print("most negative words:", " ".join(report["telling_words"]["negative"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"report -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
