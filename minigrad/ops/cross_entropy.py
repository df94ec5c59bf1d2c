"""Fused softmax cross-entropy (kernels/cross_entropy.pyx)."""
import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels import cross_entropy as _k
from minigrad.kernels.validate import check_float, check_index, check_int
from minigrad.ops._common import private_index

_REDUCTIONS = ("mean", "sum", "none")


class CrossEntropy(Function):
    """logits (N, V), targets (N,) int -> loss; saves logits, targets and per row the max m and
    l = log sum exp(logits - m) (N,).

    loss_n = lse_n - logits[n, t_n] = (m_n - logits[n, t_n]) + l_n, in that order so a large common
    offset of the logits is not rounded into lse (0 where t_n == ignore_index); 'mean' divides the sum by the
    number of non-ignored rows (nan when there are none, as PyTorch). Backward:
        glogits[n] = w_n * (softmax(logits[n]) - onehot(t_n)),
    w_n = g/count ('mean'), g ('sum'), g[n] ('none'), and 0 on ignored rows. The targets are copied
    when the caller could still change them, so backward always sees the forward's targets.
    """

    @staticmethod
    def forward(ctx, logits, targets, ignore_index, reduction):
        op = "cross_entropy"
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        check_float(op, "logits", logits, ndim=2)
        N, V = logits.shape
        if V == 0:
            raise ValueError(f"{op}: logits {logits.shape} has no classes")
        ignore_index = check_int(op, "ignore_index", ignore_index)
        targets = private_index(check_index(op, "targets", targets, V, shape=(N,), ignore=ignore_index),
                                targets)
        loss, row_max, row_logsum = (np.empty(N, logits.dtype) for _ in range(3))
        _k.cross_entropy_forward(logits, targets, ignore_index, loss, row_max, row_logsum)
        ctx.save_for_backward(logits, targets, row_max, row_logsum)
        ctx.ignore_index, ctx.reduction = ignore_index, reduction
        if reduction == "none":
            return loss
        if reduction == "sum":
            return np.asarray(loss.sum(dtype=np.float64), logits.dtype)
        ctx.count = int(np.count_nonzero(targets != ignore_index))
        return np.asarray(loss.sum(dtype=np.float64) / ctx.count if ctx.count else np.nan, logits.dtype)

    @staticmethod
    def backward(ctx, gy):
        logits, targets, row_max, row_logsum = ctx.saved_tensors
        if ctx.reduction == "none":
            weight = np.ascontiguousarray(gy, logits.dtype)
        else:
            scale = 1.0 if ctx.reduction == "sum" else 1.0 / max(ctx.count, 1)
            weight = np.full(logits.shape[0], float(gy) * scale, logits.dtype)
        glogits = np.empty_like(logits)
        _k.cross_entropy_backward(logits, targets, ctx.ignore_index, row_max, row_logsum, weight, glogits)
        return glogits, None, None, None


def cross_entropy(logits, targets, ignore_index=-100, reduction="mean"):
    """Softmax cross-entropy of logits (N, V) against int targets (N,) (PyTorch's F.cross_entropy).

    Targets equal to ignore_index contribute nothing; any other target outside [0, V) raises.
    """
    from minigrad.tensor import Tensor

    t = targets.data if isinstance(targets, Tensor) else np.asarray(targets)
    return CrossEntropy.apply(logits, t, ignore_index, reduction)
