"""LayerNorm and RMSNorm over the last dimension, composed from primitive Tensor ops.

(The model issues add fused kernels; the classes, parameter names and maths stay the same.)
"""
import numpy as np

from minigrad.kernels.validate import check_int
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter


def _norm_dim(name, dim):
    """The normalised size: an int, or torch's normalized_shape with one entry (the last dim)."""
    if isinstance(dim, (tuple, list)):
        if len(dim) != 1:
            raise ValueError(f"{name}: only the last dim can be normalised, got {tuple(dim)}")
        dim = dim[0]
    return check_int(name, "dim", dim, 1)


def _check_last_dim(name, x, dim):
    if x.ndim < 1 or x.shape[-1] != dim:
        raise ValueError(f"{name}: expected input (..., {dim}), got shape {tuple(x.shape)}")


class LayerNorm(Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias, mean/var (biased) over the last dim.

    weight (dim,) = 1, bias (dim,) = 0; `elementwise_affine=False` drops both, `bias=False` the bias.
    """

    def __init__(self, dim, eps=1e-5, elementwise_affine=True, bias=True, dtype=np.float32):
        super().__init__()
        self.dim = _norm_dim("LayerNorm", dim)
        self.eps = float(eps)
        weight = Parameter(np.ones(self.dim, dtype=dtype)) if elementwise_affine else None
        self.register_parameter("weight", weight)
        self.register_parameter("bias", Parameter(np.zeros(self.dim, dtype=dtype))
                                if elementwise_affine and bias else None)

    def forward(self, x):
        _check_last_dim("LayerNorm", x, self.dim)
        centred = x - x.mean(axis=-1, keepdims=True)
        var = (centred * centred).mean(axis=-1, keepdims=True)
        y = centred * (var + self.eps).rsqrt()
        if self.weight is not None:
            y = y * self.weight
        if self.bias is not None:
            y = y + self.bias
        return y

    def extra_repr(self):
        return f"({self.dim},), eps={self.eps}, elementwise_affine={self.weight is not None}"


class RMSNorm(Module):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dim; weight (dim,) = 1.

    `eps=None` is torch's default meaning, the machine epsilon of the input's dtype (np.finfo);
    minigrad's own default stays 1e-5 (pass `eps=None` to match torch.nn.RMSNorm(dim) exactly).
    `elementwise_affine=False` drops the weight.
    """

    def __init__(self, dim, eps=1e-5, elementwise_affine=True, dtype=np.float32):
        super().__init__()
        self.dim = _norm_dim("RMSNorm", dim)
        self.eps = None if eps is None else float(eps)
        weight = Parameter(np.ones(self.dim, dtype=dtype)) if elementwise_affine else None
        self.register_parameter("weight", weight)

    def forward(self, x):
        _check_last_dim("RMSNorm", x, self.dim)
        eps = float(np.finfo(x.dtype).eps) if self.eps is None else self.eps
        y = x * ((x * x).mean(axis=-1, keepdims=True) + eps).rsqrt()
        return y if self.weight is None else y * self.weight

    def extra_repr(self):
        return f"({self.dim},), eps={self.eps}, elementwise_affine={self.weight is not None}"
