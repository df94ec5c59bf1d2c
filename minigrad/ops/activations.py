"""torch.nn.functional's activations that minigrad composes from its differentiable ops:
leaky_relu, elu, logsigmoid, glu, prelu (relu, gelu, silu, ... are single Functions in elementwise.py)."""
import math

from minigrad.kernels.validate import check_finite_scalar
from minigrad.ops._common import normalize_dim
from minigrad.ops.binary import where
from minigrad.ops.elementwise import softplus
from minigrad.tensor import Tensor


def float_input(op, name, x):
    """`x` if it is a float Tensor, else a TypeError naming the op and the argument."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{op}: {name} must be a float32 or float64 Tensor, got {x.dtype}")
    return x


def _no_inplace(op, inplace):
    if inplace:
        raise ValueError(f"{op}: inplace=True is not supported (minigrad returns a new Tensor); use "
                         "inplace=False")


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, negative_slope * x elsewhere (gradient negative_slope at 0, as torch)."""
    _no_inplace("leaky_relu", inplace)
    x = float_input("leaky_relu", "input", input)
    slope = check_finite_scalar("leaky_relu", "negative_slope", negative_slope)
    return where(x > 0, x, x * slope)


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, alpha (exp(x) - 1) elsewhere (gradient alpha at 0, as torch). exp only sees
    min(x, 0), so a large x cannot overflow into the unused branch's gradient."""
    _no_inplace("elu", inplace)
    x = float_input("elu", "input", input)
    alpha = check_finite_scalar("elu", "alpha", alpha)
    return where(x > 0, x, (x.clamp(max=0.0).exp() - 1.0) * alpha)


def logsigmoid(input):
    """log(sigmoid(x)) = -softplus(-x) without overflow or cancellation for any x (gradient
    1 - sigmoid(x) = sigmoid(-x))."""
    return -softplus(-float_input("logsigmoid", "input", input), 1.0, math.inf)


def glu(input, dim=-1):
    """a * sigmoid(b), where a, b are the two halves of `input` along `dim` (its size must be even)."""
    x = float_input("glu", "input", input)
    if x.ndim == 0:
        raise ValueError("glu: does not support 0-d tensors (the halved dim must have even size)")
    axis = normalize_dim("glu", dim, x.ndim, x.shape)
    if x.shape[axis] % 2:
        raise ValueError(f"glu: halving dimension must be even, but dim {dim} of {tuple(x.shape)} has size "
                         f"{x.shape[axis]}")
    a, b = x.split(x.shape[axis] // 2, axis)
    return a * b.sigmoid()


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):  # noqa: A002
    """clamp(x, min_val, max_val); the gradient passes only strictly inside (min_val, max_val), as
    torch's hardtanh (clamp's includes the bounds)."""
    _no_inplace("hardtanh", inplace)
    x = float_input("hardtanh", "input", input)
    lo = check_finite_scalar("hardtanh", "min_val", min_val)
    hi = check_finite_scalar("hardtanh", "max_val", max_val)
    if lo > hi:
        raise ValueError(f"hardtanh: min_val {lo} cannot be greater than max_val {hi}")
    return where((x > lo) & (x < hi), x, x.detach().clamp(lo, hi))


def relu6(input, inplace=False):  # noqa: A002
    """min(max(x, 0), 6) (hardtanh(x, 0, 6), as torch)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def softmin(input, dim=None, *, dtype=None):  # noqa: A002
    """softmax(-x) along `dim`."""
    x = float_input("softmin", "input", input)
    if dim is None:
        raise ValueError("softmin: pass dim (torch's implicit choice is deprecated)")
    return (-x).softmax(dim, dtype=dtype)


def mish(input, inplace=False):  # noqa: A002
    """x tanh(softplus(x))."""
    _no_inplace("mish", inplace)
    x = float_input("mish", "input", input)
    return x * softplus(x).tanh()


def prelu(input, weight):  # noqa: A002
    """torch.prelu: x where x > 0, weight * x elsewhere; weight has 1 element or one per channel (dim 1
    of input; a 0-d or 1-D input has one channel, as torch)."""
    x = float_input("prelu", "input", input)
    w = float_input("prelu", "weight", weight)
    if w.ndim > 1:
        raise ValueError(f"prelu: weight must be 0-d or 1-D, got shape {tuple(w.shape)}")
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w.numel() not in (1, channels):
        raise ValueError(f"prelu: mismatch of parameter numbers and input channel size. Found parameter "
                         f"numbers = {w.numel()} and channel size = {channels}.")
    if w.numel() > 1 and x.ndim >= 2:
        w = w.reshape((1, -1) + (1,) * (x.ndim - 2))
    elif w.numel() == 1:
        w = w.reshape(())
    return where(x > 0, x, x * w)
