"""PyTorch DDP on scikit-learn's bundled digits: one script for torchrun, Kubeflow and trainyard.

    torchrun --nproc-per-node 2 train.py --epochs 5              # by hand
    trainyard run job.yaml --follow                               # 2 replicas through trainyard
    trainyard run pytorchjob.yaml --follow                        # the same, from a Kubeflow manifest

It reads only what torchrun and a Kubeflow PyTorchJob both set (``MASTER_ADDR``,
``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``; ``LOCAL_RANK`` picks the GPU) and
runs as a single process when none is set. gloo on CPU, NCCL on GPU.

After each epoch rank 0 writes a checkpoint (atomically; the last 3 are kept)
to ``$TRAINYARD_CHECKPOINT_DIR`` under trainyard, else ``--checkpoint-dir``.
On start, rank 0 reads the latest and sends it to every rank, so all ranks
resume from the same epoch even without a shared disk. At the end rank 0
saves ``model.pt`` and ``metrics.json`` to the output dir and prints
``throughput samples_per_sec=…``: training samples (all ranks) per second of
training steps (checkpoints, evaluation and ``--sleep-per-epoch`` excluded).

Needs only torch and scikit-learn; ``trainyard`` is imported only under trainyard.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import socket
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: see teardown())
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler

CKPT_PREFIX, KEEP = "epoch-", 3
UNDER_TRAINYARD = bool(os.environ.get("TRAINYARD_JOB_ID"))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32, help="per process")
    p.add_argument("--lr", type=float, default=0.003, help="Adam learning rate")
    p.add_argument("--hidden", type=int, default=128, help="units in each of the two hidden layers")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sleep-per-epoch", type=float, default=0.0, help="seconds of idle after each epoch (tests)")
    p.add_argument("--checkpoint-dir", default="checkpoints", help="used when TRAINYARD_CHECKPOINT_DIR is not set")
    p.add_argument("--output-dir", default="outputs", help="used when TRAINYARD_OUTPUT_DIR is not set")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per process")
    return p.parse_args()


# -- process group -----------------------------------------------------------------


def setup() -> tuple[int, int, torch.device]:
    """Join the group that torchrun / the PyTorchJob describes; alone when none is described."""
    if "RANK" not in os.environ:  # plain `python train.py`: a group of one
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
    if torch.cuda.is_available():
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend=backend)  # env:// — MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    return dist.get_rank(), dist.get_world_size(), device


def load_data(seed: int, device: torch.device):
    """80% train / 20% held-out test, stratified; each pixel standardized with the train split's statistics."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
    mean, std = X_train.mean(0), X_train.std(0) + 1.0  # +1: some border pixels are always 0
    X_train, X_test = (X_train - mean) / std, (X_test - mean) / std
    t = lambda a, dtype: torch.tensor(a, dtype=dtype, device=device)  # noqa: E731
    return (t(X_train, torch.float32), t(y_train, torch.long)), (t(X_test, torch.float32), t(y_test, torch.long))


def make_model(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


# -- checkpoints ---------------------------------------------------------------------


def checkpoint_dir(args: argparse.Namespace) -> Path:
    if os.environ.get("TRAINYARD_CHECKPOINT_DIR"):
        import trainyard

        return trainyard.checkpoint_dir()
    path = Path(args.checkpoint_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def output_dir(args: argparse.Namespace) -> Path:
    path = Path(os.environ.get("TRAINYARD_OUTPUT_DIR") or args.output_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_checkpoint(folder: Path, state: dict) -> None:
    """Rank 0 only. Written to a temp file and renamed, so a kill never leaves a torn checkpoint."""
    path = folder / f"{CKPT_PREFIX}{state['epoch']:04d}.pt"
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    for old in sorted(folder.glob(f"{CKPT_PREFIX}*.pt"))[:-KEEP]:
        old.unlink(missing_ok=True)


def load_latest(folder: Path, rank: int, model_args: dict) -> dict | None:
    """Rank 0 reads the newest checkpoint of this model; every rank gets the same state."""
    blob: list = [None]
    if rank == 0:
        for path in sorted(folder.glob(f"{CKPT_PREFIX}*.pt"), reverse=True):
            state = torch.load(path, map_location="cpu", weights_only=True)
            if state.get("model_args") == model_args:
                blob[0] = path.read_bytes()
                break
            print(f"ignoring {path.name}: it was trained with other settings", flush=True)
    dist.broadcast_object_list(blob, src=0)
    if blob[0] is None:
        return None
    return torch.load(io.BytesIO(blob[0]), map_location="cpu", weights_only=True)


# -- training ------------------------------------------------------------------------


def evaluate(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        acc = (model(X).argmax(1) == y).float().mean().item()
    model.train()
    return acc


def teardown() -> None:
    """Leave the group so that it is gone, worker threads and all, before the interpreter finalizes.

    A gloo worker thread drops its last reference to a finished collective
    after waking the caller, and that needs the GIL: if the interpreter is
    finalizing by then, the thread is ended mid-destructor and the process
    aborts (``terminate called without an active exception``, exit -6) though
    training went well. Destroying the group joins those threads, but only
    once nothing holds it: the DDP wrapper (gone with ``train``'s frame, its
    cycles collected here), and ``torch.distributed.nn``'s default arguments,
    which bind the live group when that module is first imported (DDP imports
    it) after ``init_process_group``; hence its import at the top.
    """
    dist.barrier()  # every rank is done with every collective
    gc.collect()
    dist.destroy_process_group()


def main() -> int:
    args = parse_args()
    torch.set_num_threads(args.threads)
    rank, world, device = setup()
    train(args, rank, world, device)
    teardown()
    return 0


def train(args: argparse.Namespace, rank: int, world: int, device: torch.device) -> None:
    say = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)
    log_metrics = None
    if UNDER_TRAINYARD and rank == 0:
        import trainyard

        log_metrics = trainyard.log_metrics
    (X_train, y_train), (X_test, y_test) = load_data(args.seed, device)
    say(f"digits: {len(y_train)} train / {len(y_test)} test; world size {world} ({dist.get_backend()} on "
        f"{device.type}); hidden={args.hidden} batch={args.batch_size}/process lr={args.lr} epochs={args.epochs}")

    torch.manual_seed(args.seed)
    model = make_model(args.hidden).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model_args = {"hidden": args.hidden, "seed": args.seed}
    ckpt_dir = checkpoint_dir(args)
    start = 1
    if (state := load_latest(ckpt_dir, rank, model_args)) is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"] + 1
        say(f"resuming from epoch {state['epoch']}")
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    sampler = DistributedSampler(range(len(y_train)), num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loss_fn = nn.CrossEntropyLoss()

    samples, train_seconds, acc = 0, 0.0, evaluate(model, X_test, y_test)
    for epoch in range(start, args.epochs + 1):
        sampler.set_epoch(epoch)  # a different shuffle each epoch, the same one after a resume
        order = torch.tensor(list(sampler), device=device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        total = torch.zeros(2, device=device)  # loss sum, samples
        for batch in order.split(args.batch_size):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(X_train[batch]), y_train[batch])
            loss.backward()
            optimizer.step()
            total += torch.stack([loss.detach() * len(batch), torch.tensor(float(len(batch)), device=device)])
        dist.all_reduce(total)  # also lines the ranks up, so the epoch's time is the slowest rank's
        train_seconds += time.perf_counter() - t0
        samples += int(total[1].item())
        loss_avg, acc = (total[0] / total[1]).item(), evaluate(model, X_test, y_test)
        say(f"epoch {epoch} loss {loss_avg:.4f} acc {acc:.4f}")
        if rank == 0:
            save_checkpoint(ckpt_dir, {"epoch": epoch, "model": model.state_dict(),
                                       "optimizer": optimizer.state_dict(), "model_args": model_args})
            if log_metrics:
                log_metrics(step=epoch, train_loss=loss_avg, test_accuracy=acc)
        if args.sleep_per_epoch:
            time.sleep(args.sleep_per_epoch)

    if rank == 0:
        out = output_dir(args)
        torch.save(model.state_dict(), out / "model.pt")
        summary = {"test_accuracy": acc, "epochs": args.epochs, "resumed_at": start, "world_size": world,
                   "samples_per_sec": samples / train_seconds if train_seconds else None, "args": vars(args)}
        (out / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n")
        say(f"test accuracy {acc:.4f}; wrote {out / 'model.pt'}")
        if train_seconds:
            say(f"throughput samples_per_sec={samples / train_seconds:.1f} samples={samples} "
                f"train_seconds={train_seconds:.3f} world_size={world} device={device.type}")


if __name__ == "__main__":
    sys.exit(main())
