"""Pooling layers (torch.nn's names, arguments, attributes and repr): MaxPool1d/2d, AvgPool1d/2d,
AdaptiveAvgPool1d/2d, AdaptiveMaxPool1d/2d. They have no parameters; see minigrad/ops/pooling.py."""
from minigrad.nn.module import Module
from minigrad.ops import pooling as P


class _MaxPoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None and stride != () and stride != [] else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = bool(return_indices)
        self.ceil_mode = bool(ceil_mode)

    def forward(self, x):
        return type(self)._fn(x, self.kernel_size, self.stride, self.padding, self.dilation,
                              ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """torch.nn.MaxPool1d: (N, C, L) or (C, L) -> (N, C, L_out); stride defaults to kernel_size."""

    _fn = staticmethod(P.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """torch.nn.MaxPool2d: (N, C, H, W) or (C, H, W) -> (N, C, H_out, W_out)."""

    _fn = staticmethod(P.max_pool2d)


def _single(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class AvgPool1d(Module):
    """torch.nn.AvgPool1d: (N, C, L) or (C, L) -> (N, C, L_out)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None and stride != () and stride != [] else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = bool(ceil_mode)
        self.count_include_pad = bool(count_include_pad)

    def forward(self, x):
        return P.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """torch.nn.AvgPool2d: (N, C, H, W) or (C, H, W) -> (N, C, H_out, W_out)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None and stride != () and stride != [] else kernel_size
        self.padding = padding
        self.ceil_mode = bool(ceil_mode)
        self.count_include_pad = bool(count_include_pad)
        self.divisor_override = divisor_override

    def forward(self, x):
        return P.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """torch.nn.AdaptiveAvgPool1d: (N, C, L) or (C, L) -> (N, C, output_size)."""

    def forward(self, x):
        return P.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    """torch.nn.AdaptiveAvgPool2d: (N, C, H, W) or (C, H, W) -> (N, C, *output_size); None keeps a dim."""

    def forward(self, x):
        return P.adaptive_avg_pool2d(x, self.output_size)


class _AdaptiveMaxPool(_AdaptivePool):
    _fn = None

    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = bool(return_indices)

    def forward(self, x):
        return type(self)._fn(x, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """torch.nn.AdaptiveMaxPool1d: (N, C, L) or (C, L) -> (N, C, output_size)."""

    _fn = staticmethod(P.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    """torch.nn.AdaptiveMaxPool2d: (N, C, H, W) or (C, H, W) -> (N, C, *output_size)."""

    _fn = staticmethod(P.adaptive_max_pool2d)
