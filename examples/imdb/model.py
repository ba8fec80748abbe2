"""The text classifier every step shares: a bag of word embeddings, then a linear layer.

A saved model is one ``torch.save`` file: ``config`` (what builds the module),
``state_dict``, and ``init_digest``, a hash of the initial weights. Weight
averaging only makes sense between models that started from the same weights,
so the aggregator checks that digest before averaging.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch
from torch import nn

MODEL_FILE = "model.pt"


class BagOfEmbeddings(nn.Module):
    def __init__(self, vocab_size: int, dim: int = 16, classes: int = 2):
        super().__init__()
        self.config = {"vocab_size": vocab_size, "dim": dim, "classes": classes}
        self.embed = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.out = nn.Linear(dim, classes)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(ids, offsets))


def initial_model(vocab_size: int, dim: int, seed: int) -> BagOfEmbeddings:
    """The same (vocab_size, dim, seed) gives bit-identical weights in every trainer."""
    torch.manual_seed(seed)
    return BagOfEmbeddings(vocab_size, dim)


def digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def save(model: BagOfEmbeddings, path: Path, init_digest: str, **extra) -> None:
    """Write to ``path`` itself (the step's declared output), or ``path/model.pt`` if it is a folder."""
    path = Path(path)
    if path.is_dir():
        path = path / MODEL_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": model.config, "state_dict": model.state_dict(), "init_digest": init_digest,
                **extra}, path)


def entries(folder: Path) -> list[Path]:
    """The models in a fan-in folder (one entry per trainer), in item order: 0, 1, …, 10, not 0, 1, 10, 2."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"--models: {folder} is not a folder")
    found = [p for p in folder.iterdir() if not p.name.startswith(".")]
    if not found:
        raise FileNotFoundError(f"--models: {folder} is empty")
    return sorted(found, key=lambda p: (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name))


def load_file(path: Path) -> dict:
    """The saved dict; ``path`` is a model file or a folder holding ``model.pt``."""
    path = Path(path)
    if path.is_dir():
        path = path / MODEL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no model at {path}")
    return torch.load(path, map_location="cpu", weights_only=True)


def build(saved: dict) -> BagOfEmbeddings:
    model = BagOfEmbeddings(**saved["config"])
    model.load_state_dict(saved["state_dict"])
    return model.eval()


def batches(ids: np.ndarray, offsets: np.ndarray, order: np.ndarray, size: int):
    """(ids, offsets) tensors for each batch of reviews, taken in ``order``."""
    ends = np.append(offsets[1:], len(ids))
    for start in range(0, len(order), size):
        rows = order[start:start + size]
        pieces = [ids[offsets[r]:ends[r]] for r in rows]
        lengths = np.array([len(p) for p in pieces])
        batch_offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        yield rows, torch.from_numpy(np.concatenate(pieces).astype(np.int64)), torch.from_numpy(batch_offsets)


class Adam:
    """``torch.optim.Adam``'s update (no weight decay, no amsgrad), written out.

    Why not torch.optim: importing it loads ``torch._dynamo``, 2 to 4 seconds of
    start-up in every trainer, each of which then trains in well under a second.
    """

    def __init__(self, params, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = list(params)
        self.lr, (self.b1, self.b2), self.eps, self.t = lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        c1, c2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            m.mul_(self.b1).add_(p.grad, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(p.grad, p.grad, value=1 - self.b2)
            p.sub_(self.lr * (m / c1) / ((v / c2).sqrt() + self.eps))


@torch.no_grad()
def accuracy(model: nn.Module, ids: np.ndarray, offsets: np.ndarray, labels: np.ndarray) -> float:
    model.eval()
    correct = 0
    for rows, bids, boffs in batches(ids, offsets, np.arange(len(labels)), 1000):
        correct += int((model(bids, boffs).argmax(1).numpy() == labels[rows]).sum())
    return correct / max(len(labels), 1)
