"""Activation modules: thin wrappers over the Tensor methods, for use in Sequential.

They take torch's constructor arguments: `GELU(approximate='none' | 'tanh')`, `ReLU(inplace=False)`,
`SiLU(inplace=False)`, `LeakyReLU(negative_slope=0.01, inplace=False)`, `Softmax(dim)`,
`LogSoftmax(dim)`. minigrad has no in-place activations, so `inplace=True` raises (rather than
silently leaving the input unchanged where torch would overwrite it).
"""
import warnings

from minigrad.kernels.validate import check_finite_scalar, check_int
from minigrad.nn.module import Module
from minigrad.ops.activations import leaky_relu


def _check_inplace(name, inplace):
    if inplace:
        raise ValueError(f"{name}: inplace=True is not supported (minigrad activations return a new "
                         "Tensor); use inplace=False")


class _Activation(Module):
    method = None

    def forward(self, x):
        return getattr(x, self.method)()


class _InplaceActivation(_Activation):
    def __init__(self, inplace=False):
        super().__init__()
        _check_inplace(type(self).__name__, inplace)
        self.inplace = False


class ReLU(_InplaceActivation):
    method = "relu"


class GELU(_Activation):
    """GELU; approximate='none' (default, as torch) is the exact erf form, 'tanh' the tanh one."""

    method = "gelu"

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return x.gelu(approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(_InplaceActivation):
    method = "silu"


class Tanh(_Activation):
    method = "tanh"


class Sigmoid(_Activation):
    method = "sigmoid"


class LeakyReLU(Module):
    """y = x where x > 0, negative_slope * x elsewhere (gradient negative_slope at 0, as torch)."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        _check_inplace("LeakyReLU", inplace)
        self.negative_slope = check_finite_scalar("LeakyReLU", "negative_slope", negative_slope)
        self.inplace = False

    def forward(self, x):
        return leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


def _softmax_dim(name, ndim, dim):
    """torch's legacy implicit dim when dim is None (with its deprecation warning): 0 for 0-, 1- and
    3-d inputs, else 1."""
    if dim is not None:
        return dim
    warnings.warn(f"{name}: implicit dimension choice has been deprecated; pass dim explicitly", UserWarning,
                  stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


class _SoftmaxAlong(Module):
    method = None

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim if dim is None else check_int(type(self).__name__, "dim", dim)

    def forward(self, x):
        return getattr(x, self.method)(_softmax_dim(type(self).__name__, x.ndim, self.dim))

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_SoftmaxAlong):
    """y = exp(x) / sum(exp(x)) along `dim` (max-shifted)."""

    method = "softmax"


class LogSoftmax(_SoftmaxAlong):
    """y = x - logsumexp(x) along `dim`."""

    method = "log_softmax"
