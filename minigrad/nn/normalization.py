"""LayerNorm (over torch's trailing normalized_shape) and RMSNorm (over the last dim), composed from
primitive Tensor ops.

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


def _normalized_shape(name, normalized_shape):
    """torch's normalized_shape (an int or a non-empty sequence of positive ints) as a tuple."""
    if isinstance(normalized_shape, (tuple, list)):
        if len(normalized_shape) == 0:
            raise ValueError(f"{name}: normalized_shape must not be empty")
        return tuple(check_int(name, "normalized_shape", d, 1) for d in normalized_shape)
    return (check_int(name, "normalized_shape", normalized_shape, 1),)


class LayerNorm(Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias, mean/var (biased) over the trailing dims
    `normalized_shape` (an int or a tuple, as torch); x (..., *normalized_shape) -> x's shape.

    weight (normalized_shape) = 1, bias (normalized_shape) = 0; `elementwise_affine=False` drops both,
    `bias=False` the bias. Composed of differentiable ops (their backward is layer norm's).
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=np.float32):
        super().__init__()
        self.normalized_shape = _normalized_shape("LayerNorm", normalized_shape)
        self.dim = self.normalized_shape[-1]
        self.eps = float(eps)
        shape = self.normalized_shape
        weight = Parameter(np.ones(shape, dtype=dtype)) if elementwise_affine else None
        self.register_parameter("weight", weight)
        self.register_parameter("bias", Parameter(np.zeros(shape, dtype=dtype))
                                if elementwise_affine and bias else None)

    def forward(self, x):
        shape = self.normalized_shape
        k = len(shape)
        if x.ndim < k or tuple(x.shape[x.ndim - k:]) != shape:
            raise ValueError(f"LayerNorm: expected input (..., {', '.join(map(str, shape))}), got shape "
                             f"{tuple(x.shape)}")
        dims = tuple(range(x.ndim - k, x.ndim))
        centred = x - x.mean(dim=dims, keepdim=True)
        var = (centred * centred).mean(dim=dims, keepdim=True)
        y = centred * (var + self.eps).rsqrt()
        if self.weight is not None:
            y = y * self.weight
        if self.bias is not None:
            y = y + self.bias
        return y

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"
                + ("" if self.weight is None or self.bias is not None else ", bias=False"))


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
