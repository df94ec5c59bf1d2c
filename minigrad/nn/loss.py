"""Loss modules with torch.nn's names, arguments and reductions ('mean' | 'sum' | 'none')."""
import warnings

import numpy as np

from minigrad.kernels.validate import check_int
from minigrad.nn.module import Module
from minigrad.ops.cross_entropy import cross_entropy
from minigrad.tensor import Tensor

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(name, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: {reduction!r} is not a valid value for reduction; use one of "
                         f"{_REDUCTIONS}")
    return reduction


def _check_legacy(name, size_average, reduce):
    if size_average is not None or reduce is not None:
        raise ValueError(f"{name}: size_average and reduce are deprecated in PyTorch and not supported; "
                         "use reduction='mean' | 'sum' | 'none'")


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


class _PointwiseLoss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        _check_legacy(type(self).__name__, size_average, reduce)
        self.reduction = _check_reduction(type(self).__name__, reduction)

    def forward(self, input, target):
        if not isinstance(target, Tensor):
            target = Tensor(np.asarray(target, dtype=input.dtype))
        if tuple(target.shape) != tuple(input.shape):
            warnings.warn(f"{type(self).__name__}: target size {tuple(target.shape)} differs from input size "
                          f"{tuple(input.shape)}; they are broadcast, which is likely not what you want",
                          UserWarning, stacklevel=2)
        return _reduce(self.pointwise(input - target), self.reduction)


class MSELoss(_PointwiseLoss):
    """loss_i = (input_i - target_i)^2, then the mean (default), sum, or none of them."""

    @staticmethod
    def pointwise(diff):
        return diff * diff


class L1Loss(_PointwiseLoss):
    """loss_i = |input_i - target_i|, then the mean (default), sum, or none of them (gradient 0 where
    input == target, as torch)."""

    @staticmethod
    def pointwise(diff):
        return diff.abs()


class CrossEntropyLoss(Module):
    """loss_n = logsumexp(input[n]) - input[n, target_n] over the class dim 1, through F.cross_entropy.

    input (C,), (N, C) or (N, C, d1, ...); target int () / (N,) / (N, d1, ...). Targets equal to
    ignore_index contribute nothing; 'mean' divides by the number of the others (nan if none), 'none'
    returns the target's shape. Class weights, class-probability (float) targets and label smoothing
    are not supported (F.cross_entropy has none of them): they raise.
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__()
        name = "CrossEntropyLoss"
        if weight is not None:
            raise ValueError(f"{name}: class weights are not supported (F.cross_entropy has no weight); "
                             "use weight=None")
        _check_legacy(name, size_average, reduce)
        if label_smoothing != 0.0:
            raise ValueError(f"{name}: label_smoothing is not supported (F.cross_entropy has none); got "
                             f"{label_smoothing}, use 0.0")
        self.ignore_index = check_int(name, "ignore_index", ignore_index)
        self.reduction = _check_reduction(name, reduction)
        self.label_smoothing = 0.0

    def forward(self, input, target):
        name = "CrossEntropyLoss"
        t = target.data if isinstance(target, Tensor) else np.asarray(target)
        if t.dtype.kind == "f":
            raise TypeError(f"{name}: class-probability (float) targets are not supported; pass int class "
                            "indices")
        if input.ndim == 0:
            raise ValueError(f"{name}: input must be (C,), (N, C) or (N, C, d1, ...), got a 0-d tensor")
        batch = (input.shape[0],) + tuple(input.shape[2:]) if input.ndim > 1 else ()
        if tuple(t.shape) != batch:
            raise ValueError(f"{name}: input {tuple(input.shape)} needs target of shape {batch}, got "
                             f"{tuple(t.shape)}")
        logits = input
        if input.ndim == 1:
            logits = input.unsqueeze(0)
        elif input.ndim > 2:       # (N, C, d1, ...) -> (N, d1, ..., C) -> (N * d1 * ..., C)
            logits = input.permute(0, *range(2, input.ndim), 1).reshape(-1, input.shape[1])
        loss = cross_entropy(logits, t.reshape(-1), ignore_index=self.ignore_index, reduction=self.reduction)
        return loss.reshape(batch) if self.reduction == "none" else loss
