"""Embedding: a lookup table of `num_embeddings` vectors of size `embedding_dim`."""
import numpy as np

from minigrad.kernels.validate import check_int
from minigrad.nn import init
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.ops.embedding import check_padding_idx, embedding


class Embedding(Module):
    """ids (...) integer -> (..., embedding_dim) rows of weight (num_embeddings, embedding_dim) ~ N(0, 1).

    Ids outside [0, num_embeddings) raise IndexError. Backward scatter-adds into the rows used
    (none into `padding_idx`, whose row starts at zero).
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, dtype=np.float32, generator=None):
        super().__init__()
        self.num_embeddings = check_int("Embedding", "num_embeddings", num_embeddings, 0)
        self.embedding_dim = check_int("Embedding", "embedding_dim", embedding_dim, 0)
        if padding_idx is not None:
            padding_idx = check_padding_idx("Embedding", padding_idx, self.num_embeddings)
        self.padding_idx = padding_idx
        self.weight = Parameter(np.empty((self.num_embeddings, self.embedding_dim), dtype=dtype))
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None):
        init.normal_(self.weight, 0.0, 1.0, generator)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0

    def forward(self, ids):
        return embedding(ids, self.weight, self.padding_idx)

    def extra_repr(self):
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"
