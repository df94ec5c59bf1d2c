"""Embedding: a lookup table of `num_embeddings` vectors of size `embedding_dim`."""
import numpy as np

from minigrad.kernels.validate import check_index
from minigrad.nn import init
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.tensor import Tensor


class Embedding(Module):
    """ids (...) integer -> (..., embedding_dim) rows of weight (num_embeddings, embedding_dim) ~ N(0, 1).

    Ids outside [0, num_embeddings) raise IndexError. Backward scatter-adds into the used rows.
    """

    def __init__(self, num_embeddings, embedding_dim, dtype=np.float32, generator=None):
        super().__init__()
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.weight = Parameter(np.empty((self.num_embeddings, self.embedding_dim), dtype=dtype))
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None):
        init.normal_(self.weight, 0.0, 1.0, generator)

    def forward(self, ids):
        arr = ids.data if isinstance(ids, Tensor) else np.asarray(ids)
        arr = check_index("Embedding", "ids", arr, self.num_embeddings)
        return self.weight[arr]

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"
