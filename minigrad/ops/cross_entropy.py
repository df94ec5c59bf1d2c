"""Softmax cross-entropy with PyTorch's F.cross_entropy signature and semantics.

Hard (class-index) targets run the fused kernel (kernels/cross_entropy.pyx: log-softmax + NLL, with
class weights and label smoothing, forward and backward); K-dim inputs move the class dim last (a
copy) and reuse it. Class-probability (soft) targets are rare and composed from log_softmax and
Tensor ops instead (so a target or weight Tensor that requires grad gets its gradient, as in torch).
"""
import math

import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels import cross_entropy as _k
from minigrad.kernels.validate import check_finite_scalar, check_float, check_index, check_int
from minigrad.ops._common import private_index

INT64_MIN, INT64_MAX = -2**63, 2**63 - 1   # ignore_index is compared with int64 targets

_REDUCTIONS = ("mean", "sum", "none")


def check_label_smoothing(op, label_smoothing):
    eps = check_finite_scalar(op, "label_smoothing", label_smoothing)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be between 0.0 and 1.0, got {eps}")
    return eps


class CrossEntropy(Function):
    """logits (N, V), targets (N,) int -> loss; saves logits, targets and per row the max m and
    l = log sum exp(logits - m) (N,). Optional keyword arguments: class_weight (V,) array of the
    logits' dtype (a constant, as torch's nll weight) and label_smoothing eps in [0, 1].

    loss_n = (1 - eps) w_t (-log p_t) + (eps / V) sum_c w_c (-log p_c), with -log p_c computed as
    (m_n - logits[n, c]) + l_n, in that order so a large common offset of the logits is not rounded
    into lse (0 where t_n == ignore_index; w = 1 without class_weight). 'mean' divides the sum by the
    total weight sum_n w_{t_n} of the non-ignored rows (their count without weights; torch's rule,
    also for the smoothing term); nan when that is 0, as PyTorch. Backward (derivation in the kernel):
        glogits[n, v] = s_n (A_n p_v - (eps / V) w_v - (1 - eps) w_t [v == t]),
        A_n = (1 - eps) w_t + (eps / V) sum_c w_c,
    i.e. s_n (softmax - onehot(t)) without weights and smoothing; s_n = g/denominator ('mean'), g
    ('sum'), g[n] ('none'), and 0 on ignored rows (nan on the others when a 'mean' denominator is 0
    but some row is not ignored, as torch). The targets are copied when the caller could still change
    them, so backward always sees the forward's targets.
    """

    @staticmethod
    def forward(ctx, logits, targets, ignore_index, reduction, class_weight=None, label_smoothing=0.0):
        op = "cross_entropy"
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction; use one of "
                             f"{_REDUCTIONS}")
        check_float(op, "logits", logits, ndim=2)
        N, V = logits.shape
        if V == 0:
            raise ValueError(f"{op}: logits {logits.shape} has no classes")
        ignore_index = check_int(op, "ignore_index", ignore_index, INT64_MIN, INT64_MAX)
        targets = private_index(check_index(op, "targets", targets, V, shape=(N,), ignore=ignore_index),
                                targets)
        plain = class_weight is None and type(label_smoothing) is float and label_smoothing == 0.0
        if not plain:
            label_smoothing = check_label_smoothing(op, label_smoothing)
            if class_weight is not None:
                check_float(op, "weight", class_weight, shape=(V,), dtype=logits.dtype)
        loss, row_max, row_logsum = (np.empty(N, logits.dtype) for _ in range(3))
        if plain:
            _k.cross_entropy_forward(logits, targets, ignore_index, loss, row_max, row_logsum)
        else:
            _k.cross_entropy_forward(logits, targets, ignore_index, loss, row_max, row_logsum,
                                     class_weight, label_smoothing)
        ctx.save_for_backward(logits, targets, row_max, row_logsum)
        ctx.ignore_index, ctx.reduction = ignore_index, reduction
        ctx.class_weight, ctx.label_smoothing = class_weight, label_smoothing
        if reduction == "none":
            return loss
        if reduction == "sum":
            return np.asarray(loss.sum(dtype=np.float64), logits.dtype)
        keep = targets != ignore_index
        ctx.count = int(np.count_nonzero(keep))
        if class_weight is None:
            ctx.denom = float(ctx.count)
        else:
            ctx.denom = float(class_weight[targets[keep]].sum(dtype=np.float64))
        total = loss.sum(dtype=np.float64)
        return np.asarray(total / ctx.denom if ctx.denom != 0.0 else math.nan, logits.dtype)

    @staticmethod
    def backward(ctx, gy):
        logits, targets, row_max, row_logsum = ctx.saved_tensors
        if ctx.reduction == "none":
            scale = np.ascontiguousarray(gy, logits.dtype)
        else:
            if ctx.reduction == "sum":
                s = float(gy)
            elif ctx.denom != 0.0:
                s = float(gy) / ctx.denom
            else:                            # every row ignored: 0 gradient; else torch's nan
                s = 0.0 if ctx.count == 0 else math.nan
            scale = np.full(logits.shape[0], s, logits.dtype)
        glogits = np.empty_like(logits)
        if ctx.class_weight is None and ctx.label_smoothing == 0.0:
            _k.cross_entropy_backward(logits, targets, ctx.ignore_index, row_max, row_logsum, scale,
                                      glogits)
        else:
            _k.cross_entropy_backward(logits, targets, ctx.ignore_index, row_max, row_logsum, scale,
                                      glogits, ctx.class_weight, ctx.label_smoothing)
        return glogits, None, None, None


def _soft_target_loss(op, input, target, weight, reduction, eps):
    """Class-probability targets (target of the input's shape), composed from log_softmax:
    loss = -sum_c w_c q_c log p_c with q = (1 - eps) target + eps / C; 'mean' divides by the number
    of rows (input.numel / C, torch's rule for probability targets; nan when empty)."""
    from minigrad.ops.losses import class_weight
    from minigrad.ops.reduce import log_softmax
    from minigrad.tensor import Tensor

    class_dim = 1 if input.ndim > 1 else 0
    C = input.shape[class_dim]
    if isinstance(target, Tensor):
        if not target.is_floating_point():
            raise TypeError(f"{op}: a target of the input's shape holds class probabilities and must be "
                            f"float, got {target.dtype}")
        if target.data.dtype != input.data.dtype:
            raise TypeError(f"{op}: target has dtype {target.data.dtype} but input is {input.data.dtype}")
    else:
        arr = np.asarray(target)
        if arr.dtype.kind != "f":
            raise TypeError(f"{op}: a target of the input's shape holds class probabilities and must be "
                            f"float, got {arr.dtype}")
        target = Tensor(arr.astype(input.data.dtype))
    q = target if eps == 0.0 else target * (1.0 - eps) + eps / C
    prod = log_softmax(input, class_dim) * q
    if weight is not None:
        if not isinstance(weight, Tensor):
            weight = Tensor(class_weight(op, weight, input, C))
        else:
            class_weight(op, weight, input, C)            # checks only; keeps the Tensor's gradient
        prod = prod * weight.reshape((C,) + (1,) * (input.ndim - 2) if input.ndim > 1 else (C,))
    if reduction == "none":
        return -prod.sum(axis=class_dim)
    total = -prod.sum()
    if reduction == "sum":
        return total
    rows = input.data.size // C
    return total / rows if rows else total * 0.0 + math.nan


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Softmax cross-entropy of logits against targets, PyTorch's F.cross_entropy.

    input: (C,), (N, C) or (N, C, d1, ..., dK) logits, class dim 1 (0 when unbatched).
    target: int class indices of shape (), (N,) or (N, d1, ..., dK) — values equal to ignore_index
        contribute nothing, any other outside [0, C) raises — or float class probabilities of the
        input's shape (then ignore_index must be negative, as torch).
    weight: optional (C,) class weights: the loss of a row with target t is scaled by weight[t] and
        'mean' divides by the sum of the weights of the non-ignored targets (torch's rule). A constant
        for class-index targets (torch refuses one that requires grad); differentiable for
        probability targets.
    label_smoothing: eps in [0, 1]: loss = (1 - eps) * nll + eps * mean_c(-log p_c), the second term
        also weighted per class by `weight` and 0 on ignored rows; for probability targets the
        target becomes (1 - eps) target + eps / C.
    reduction: 'mean' | 'sum' | 'none' ('none' has the target's batch shape). size_average / reduce
        are accepted only as None (torch's deprecated arguments).

    The common case — (N, C) logits, class-index targets, no weight, no smoothing — goes straight to
    the fused kernel; so do weights and smoothing (K-dim inputs after moving the class dim last).
    """
    from minigrad.tensor import Tensor

    t = target.data if isinstance(target, Tensor) else np.asarray(target)
    if (weight is None and type(label_smoothing) is float and label_smoothing == 0.0
            and size_average is None and reduce is None
            and getattr(input, "ndim", None) == 2 and t.ndim == 1):
        return CrossEntropy.apply(input, t, ignore_index, reduction)
    return _cross_entropy(input, target, t, weight, size_average, ignore_index, reduce, reduction,
                          label_smoothing)


def _cross_entropy(input, target, t, weight, size_average, ignore_index, reduce, reduction,
                   label_smoothing):
    from minigrad.ops import losses as _L
    from minigrad.ops.activations import float_input

    op = "cross_entropy"
    _L.check_legacy(op, size_average, reduce)
    reduction = _L.check_reduction(op, reduction)
    ignore_index = check_int(op, "ignore_index", ignore_index, INT64_MIN, INT64_MAX)
    eps = check_label_smoothing(op, label_smoothing)
    input = float_input(op, "input", input)
    if input.ndim == 0:
        raise ValueError(f"{op}: input must be (C,), (N, C) or (N, C, d1, ...), got a 0-d tensor")
    C = input.shape[1] if input.ndim > 1 else input.shape[0]
    if C == 0:
        raise ValueError(f"{op}: input {tuple(input.shape)} has no classes")
    if tuple(t.shape) == tuple(input.shape):                  # class probabilities (torch's test)
        if ignore_index >= 0:
            raise ValueError(f"{op}: ignore_index is not supported for class-probability (float) "
                             f"targets, got {ignore_index}")
        return _soft_target_loss(op, input, target, weight, reduction, eps)
    if t.dtype.kind == "f":
        batch = (input.shape[0],) + tuple(input.shape[2:]) if input.ndim > 1 else ()
        raise TypeError(f"{op}: target must hold integer class indices of shape {batch} or class "
                        f"probabilities of the input's shape {tuple(input.shape)}; got {t.dtype} "
                        f"{tuple(t.shape)}")
    w = _L.class_weight(op, weight, input, C)
    rows, t, batch = _L.class_rows(op, input, t)
    loss = CrossEntropy.apply(rows, t, ignore_index, reduction, class_weight=w, label_smoothing=eps)
    return loss.reshape(batch) if reduction == "none" else loss
