"""The averaged model as the model server serves it: review text in, negative/positive out.

    cd examples/imdb
    python -m trainyard.serving.model_server --model /tmp/imdb-run/aggregator/model --name imdb \\
        --port 8080 --module serving:ReviewClassifier

The server reads the aggregator's file (``--vocab`` given: it holds the vocabulary), calls
``ReviewClassifier(**config, vocab=...)`` and loads the averaged weights into it. Text goes
through this example's own ``tokenize`` (negation marks included) and vocabulary, exactly as
the copier encoded the training reviews; ``predict``/``predict_proba`` on a list of strings is
the scikit-learn face the server asks of a text model.
"""

from __future__ import annotations

import numpy as np
import torch

from model import BagOfEmbeddings, batches
from textdata import encode, tokenize


class ReviewClassifier(BagOfEmbeddings):
    input_datatype = "BYTES"  # one review per row, as text
    classes_ = np.array(["negative", "positive"])  # the copier's labels: 0 negative, 1 positive

    def __init__(self, vocab_size: int, dim: int = 16, classes: int = 2, vocab: list[str] | None = None):
        super().__init__(vocab_size, dim, classes)
        if vocab is None:
            raise ValueError("the model file holds no vocabulary: average with `aggregator.py --vocab` "
                             "(pipeline.yaml does)")
        if len(vocab) != vocab_size:
            raise ValueError(f"the vocabulary has {len(vocab)} tokens, the model {vocab_size}")
        self.index = {tok: i for i, tok in enumerate(vocab)}

    @torch.no_grad()
    def predict_proba(self, texts: list[str]) -> np.ndarray:
        docs = [encode(tokenize(t), self.index) for t in texts]
        lengths = np.array([len(d) for d in docs], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        ids = np.concatenate(docs) if docs else np.zeros(0, np.int32)
        out = np.zeros((len(docs), len(self.classes_)))
        for rows, bids, boffs in batches(ids, offsets, np.arange(len(docs)), 1000):
            out[rows] = torch.softmax(self(bids, boffs), dim=1).numpy()
        return out

    def predict(self, texts: list[str]) -> np.ndarray:
        return self.classes_[self.predict_proba(texts).argmax(axis=1)]
