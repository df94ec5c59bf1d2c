"""Conv1d and Conv2d (torch.nn's signatures, attributes, init, state_dict keys and repr)."""
import math

import numpy as np

from minigrad.kernels.validate import check_int
from minigrad.nn import init
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.ops.conv import conv1d, conv2d, ntuple
from minigrad.tensor import to_args

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def module_dtype(op, dtype, device):
    """A layer's parameter dtype: float32 (default) or float64; device None or the CPU."""
    dtype = to_args(op, (), dtype, device)
    dtype = np.dtype(np.float32 if dtype is None else dtype)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"{op}: dtype must be float32 or float64, got {dtype}")
    return dtype


def mode_pad(x, pairs, mode):
    """x (..., *L) padded by pairs ((lo, hi), ...) over the last len(pairs) dims with torch's
    'reflect', 'replicate' or 'circular' rule, as differentiable index gathers (the backward adds
    the grads of repeated positions, as torch's)."""
    d = len(pairs)
    for a, (lo, hi) in enumerate(pairs):
        if not lo and not hi:
            continue
        n = x.shape[x.ndim - d + a]
        pos = np.arange(-lo, n + hi)
        if mode == "circular":
            if lo > n or hi > n:
                raise ValueError(f"Conv: circular padding ({lo}, {hi}) wraps around more than once in a dim "
                                 f"of size {n}")
            idx = pos % n
        elif mode == "replicate":
            idx = np.clip(pos, 0, n - 1)
        else:
            if lo >= n or hi >= n:
                raise ValueError(f"Conv: reflect padding ({lo}, {hi}) must be smaller than the input dim "
                                 f"({n})")
            idx = np.abs(pos)
            idx = np.where(idx > n - 1, 2 * (n - 1) - idx, idx)
        x = x[(Ellipsis, idx) + (slice(None),) * (d - 1 - a)]
    return x


class _ConvNd(Module):
    _d = 0
    _fn = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None, generator=None):
        super().__init__()
        name, d = type(self).__name__, self._d
        dtype = module_dtype(name, dtype, device)
        self.in_channels = check_int(name, "in_channels", in_channels, 0)
        self.out_channels = check_int(name, "out_channels", out_channels, 0)
        groups = check_int(name, "groups", groups)
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if self.in_channels % groups:
            raise ValueError(f"{name}: in_channels must be divisible by groups, got {in_channels} and "
                             f"{groups}")
        if self.out_channels % groups:
            raise ValueError(f"{name}: out_channels must be divisible by groups, got {out_channels} and "
                             f"{groups}")
        self.groups = groups
        self.kernel_size = ntuple(name, "kernel_size", kernel_size, d, 1)
        self.stride = ntuple(name, "stride", stride, d, 1)
        self.dilation = ntuple(name, "dilation", dilation, d, 1)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = ntuple(name, "padding", padding, d, 0)
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode={padding_mode!r}")
        self.padding_mode = padding_mode
        if self.padding == "same":
            pairs = []
            for k, dl in zip(self.kernel_size, self.dilation):
                total = dl * (k - 1)
                pairs.append((total // 2, total - total // 2))
            self._pad_pairs = tuple(pairs)
        elif self.padding == "valid":
            self._pad_pairs = ((0, 0),) * d
        else:
            self._pad_pairs = tuple((p, p) for p in self.padding)
        shape = (self.out_channels, self.in_channels // groups) + self.kernel_size
        self.weight = Parameter(np.empty(shape, dtype=dtype))
        if bias:
            self.bias = Parameter(np.empty(self.out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None):
        """torch's init: weight ~ kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
        bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels/groups * prod(kernel_size)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), generator=generator)
        if self.bias is not None:
            fan_in, _ = init.calculate_fan_in_and_fan_out(self.weight)
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound, generator)

    def _conv_forward(self, x, weight, bias):
        fn = type(self)._fn
        if self.padding_mode != "zeros":
            return fn(mode_pad(x, self._pad_pairs, self.padding_mode), weight, bias, self.stride, 0,
                      self.dilation, self.groups)
        return fn(x, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, x):
        return self._conv_forward(x, self.weight, self.bias)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """torch.nn.Conv1d: (N, C_in, L) or (C_in, L) -> (N, C_out, L_out); weight
    (out_channels, in_channels/groups, k), bias (out_channels,)."""

    _d = 1
    _fn = staticmethod(conv1d)


class Conv2d(_ConvNd):
    """torch.nn.Conv2d: (N, C_in, H, W) or (C_in, H, W) -> (N, C_out, H_out, W_out); weight
    (out_channels, in_channels/groups, kh, kw), bias (out_channels,)."""

    _d = 2
    _fn = staticmethod(conv2d)
