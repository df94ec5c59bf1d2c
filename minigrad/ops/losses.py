"""Loss functions with torch.nn.functional's names, signatures and reductions, composed from the
differentiable Tensor ops (so every input that is a float Tensor gets its gradient, as in torch).

reduction: 'mean' (default), 'sum' or 'none' ('batchmean' too for kl_div). torch's deprecated
size_average / reduce arguments raise. A target whose shape differs from the input's is broadcast
with a UserWarning, as torch does. Class `weight` of nll_loss and `weight` / `pos_weight` of
binary_cross_entropy_with_logits are constants (torch refuses them when they require grad).
"""
import math
import warnings

import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels.validate import check_finite_scalar, check_index, check_int
from minigrad.ops._common import as_tensor
from minigrad.ops.activations import float_input as _float_input
from minigrad.ops.activations import logsigmoid
from minigrad.ops.binary import where
from minigrad.tensor import Tensor

REDUCTIONS = ("mean", "sum", "none")


def check_reduction(op, reduction, allowed=REDUCTIONS):
    if not isinstance(reduction, str) or reduction not in allowed:
        raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction; use one of {allowed}")
    return reduction


def check_legacy(op, size_average, reduce):
    if size_average is not None or reduce is not None:
        raise ValueError(f"{op}: size_average and reduce are deprecated in PyTorch and not supported; "
                         "use reduction='mean' | 'sum' | 'none'")


def apply_reduction(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def _target(op, input, target, warn=True):
    """`target` as a Tensor (an array or list takes the input's dtype); warns when its shape differs
    from the input's (they broadcast, as in torch)."""
    if not isinstance(target, Tensor):
        target = Tensor(np.asarray(target, dtype=input.dtype))
    if warn and tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"{op}: target size {tuple(target.shape)} differs from input size "
                      f"{tuple(input.shape)}; they are broadcast, which is likely not what you want",
                      UserWarning, stacklevel=4)
    return target


def _constant(op, name, x, dtype, shape=None):
    """An optional weight as a constant float array of the input's dtype (None stays None)."""
    if x is None:
        return None
    arr = np.asarray(x.data if isinstance(x, Tensor) else x)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{op}: {name} must be a float Tensor, got {arr.dtype}")
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise ValueError(f"{op}: {name} has shape {tuple(arr.shape)}, expected {tuple(shape)}")
    return arr.astype(dtype, copy=False)


def _elementwise_loss(op, input, target, reduction, pointwise, weight=None, weighted_mean="weight"):
    """reduce(pointwise(input - target) [* weight]). With a weight (same shape as input, differentiable
    as in torch's Python code), 'mean' is sum / weight.sum() ('weight', mse / l1) or the plain mean
    ('numel', huber), torch's two rules."""
    input = _float_input(op, "input", input)
    diff = input - _target(op, input, target)
    loss = pointwise(diff)
    if weight is None:
        return apply_reduction(loss, reduction)
    weight = as_tensor(weight)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{op}: weight {tuple(weight.shape)} and input {tuple(input.shape)} must have "
                         "the same size")
    loss = loss * weight
    if reduction == "mean" and weighted_mean == "weight":
        return loss.sum() / weight.sum()
    return apply_reduction(loss, reduction)


def _square(d):
    return d * d


def _abs(d):
    return d.abs()


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """loss_i = (input_i - target_i)^2, reduced; with `weight`, w_i loss_i and 'mean' = sum / sum(w)."""
    check_legacy("mse_loss", size_average, reduce)
    check_reduction("mse_loss", reduction)
    return _elementwise_loss("mse_loss", input, target, reduction, _square, weight)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """loss_i = |input_i - target_i| (gradient 0 where they are equal, as torch), reduced as mse_loss."""
    check_legacy("l1_loss", size_average, reduce)
    check_reduction("l1_loss", reduction)
    return _elementwise_loss("l1_loss", input, target, reduction, _abs, weight)


def _huber_like(z_quadratic, z_linear, cutoff):
    """d -> where(|d| < cutoff, z_quadratic(d), z_linear(|d|)); the gradient at |d| == cutoff is the
    linear branch's, equal to the quadratic one's there (torch's choice too)."""
    def pointwise(d):
        a = d.abs()
        return where(a < cutoff, z_quadratic(d), z_linear(a))
    return pointwise


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """loss_i = 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target); beta = 0 is
    l1_loss (torch's rule)."""
    op = "smooth_l1_loss"
    check_legacy(op, size_average, reduce)
    check_reduction(op, reduction)
    beta = check_finite_scalar(op, "beta", beta)
    if beta < 0:
        raise ValueError(f"{op}: beta must be >= 0, got {beta}")
    if beta == 0.0:
        return _elementwise_loss(op, input, target, reduction, _abs)
    pointwise = _huber_like(lambda d: 0.5 * d * d / beta, lambda a: a - 0.5 * beta, beta)
    return _elementwise_loss(op, input, target, reduction, pointwise)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """loss_i = 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); = delta * smooth_l1(beta=delta).
    With `weight`: w_i loss_i, and 'mean' is their plain mean (torch's rule for huber)."""
    op = "huber_loss"
    check_reduction(op, reduction)
    delta = check_finite_scalar(op, "delta", delta, positive=True)
    pointwise = _huber_like(lambda d: 0.5 * d * d, lambda a: delta * (a - 0.5 * delta), delta)
    return _elementwise_loss(op, input, target, reduction, pointwise, weight, weighted_mean="numel")


def class_weight(op, weight, input, C):
    """A class `weight` (nll_loss, cross_entropy) as a private constant (C,) array of the input's dtype
    (None stays None). A Tensor must be a float Tensor of the input's dtype (torch raises too); a
    float numpy array adopts the input's dtype (a numpy constant); anything else raises."""
    if weight is None:
        return None
    if isinstance(weight, Tensor):
        if not weight.is_floating_point():
            raise TypeError(f"{op}: weight must be a float Tensor, got {weight.dtype}")
        if weight.data.dtype != input.data.dtype:
            raise TypeError(f"{op}: weight has dtype {weight.data.dtype} but input is {input.data.dtype}")
        arr = weight.data
    elif isinstance(weight, np.ndarray) and weight.dtype in (np.float32, np.float64):
        arr = weight
    else:
        got = weight.dtype if isinstance(weight, np.ndarray) else type(weight).__name__
        raise TypeError(f"{op}: weight must be a float Tensor, got {got}")
    if tuple(arr.shape) != (C,):
        raise ValueError(f"{op}: weight has shape {tuple(arr.shape)}, expected ({C},)")
    return np.array(arr, dtype=input.data.dtype, order="C", copy=True)


def class_rows(op, input, target):
    """input (C,), (N, C) or (N, C, d1, ...) with int target (), (N,) or (N, d1, ...) ->
    (rows (M, C) Tensor, target (M,) int array, batch shape): the class dim moved last and flattened."""
    input = _float_input(op, "input", input)
    t = target.data if isinstance(target, Tensor) else np.asarray(target)
    if t.dtype.kind == "f":
        raise TypeError(f"{op}: class-probability (float) targets are not supported; pass int class "
                        "indices")
    if input.ndim == 0:
        raise ValueError(f"{op}: input must be (C,), (N, C) or (N, C, d1, ...), got a 0-d tensor")
    batch = (input.shape[0],) + tuple(input.shape[2:]) if input.ndim > 1 else ()
    if tuple(t.shape) != batch:
        raise ValueError(f"{op}: input {tuple(input.shape)} needs target of shape {batch}, got "
                         f"{tuple(t.shape)}")
    rows = input
    if input.ndim == 1:
        rows = input.unsqueeze(0)
    elif input.ndim > 2:       # (N, C, d1, ...) -> (N, d1, ..., C) -> (N * d1 * ..., C)
        rows = input.permute(0, *range(2, input.ndim), 1).reshape(-1, input.shape[1])
    return rows, t.reshape(-1), batch


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """loss_n = -weight[t_n] * input[n, t_n] over the class dim 1 of log-probabilities `input`
    ((C,), (N, C) or (N, C, d1, ...); int target (), (N,) or (N, d1, ...)).

    Targets equal to ignore_index contribute 0 (any other outside [0, C) raises); 'mean' divides the
    sum by the total weight of the other targets (their count without `weight`); when that is 0 the
    loss is nan, as torch, with zero gradients if every target is ignored and nan ones at the
    others' targets otherwise. `weight` is a constant: a float Tensor of the input's dtype (or a
    float numpy array). 'none' has the target's shape.
    """
    op = "nll_loss"
    check_legacy(op, size_average, reduce)
    check_reduction(op, reduction)
    ignore_index = check_int(op, "ignore_index", ignore_index)
    rows, t, batch = class_rows(op, input, target)
    M, C = rows.shape
    t = check_index(op, "target", t, C, ignore=ignore_index)
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    w = class_weight(op, weight, input, C)
    w = keep.astype(input.dtype) if w is None else np.where(keep, w[safe], 0).astype(input.dtype)
    loss = rows[np.arange(M), safe] * Tensor(-w)
    if reduction == "none":
        return loss.reshape(batch)
    total = loss.sum()
    if reduction == "sum":
        return total
    denom = float(w.sum(dtype=np.float64))
    if denom != 0.0:
        return total / denom
    if not keep.any():                  # every target ignored: nan, zero gradients (torch)
        return total * 0.0 + math.nan
    # targets left but their weights sum to 0: torch's 0/0, with a nan gradient at those targets only
    return (loss * Tensor(np.where(keep, math.nan, 0.0).astype(input.dtype))).sum()


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """loss_i = w_i [(1 - y_i) x_i - (1 + (pos_weight - 1) y_i) logsigmoid(x_i)], torch's form of
    max(x, 0) - x y + log1p(exp(-|x|)) (stable for any x; gradient sigmoid(x) - y without pos_weight).

    `weight` broadcasts to the loss; `pos_weight` to the class (last) dim. The target may be soft
    (any float) and gets its gradient; weight and pos_weight are constants.
    """
    op = "binary_cross_entropy_with_logits"
    input, target = _binary_inputs(op, input, target, size_average, reduce, reduction)
    log_sig = logsigmoid(input)
    pw = _constant(op, "pos_weight", pos_weight, input.dtype)
    if pw is not None:
        log_sig = log_sig * (Tensor(pw - 1) * target + 1)
    loss = (1 - target) * input - log_sig
    w = _constant(op, "weight", weight, input.dtype)
    if w is not None:
        loss = loss * Tensor(w)
    return apply_reduction(loss, reduction)


def _binary_inputs(op, input, target, size_average, reduce, reduction):  # noqa: A002
    """The checked (input, target) of a binary cross-entropy: float input, target of its shape."""
    check_legacy(op, size_average, reduce)
    check_reduction(op, reduction)
    input = _float_input(op, "input", input)
    target = _target(op, input, target, warn=False)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"{op}: target size {tuple(target.shape)} must be the same as input size "
                         f"{tuple(input.shape)}")
    return input, target


_BCE_EPS = float(np.float32(1e-12))     # torch's constant is the float 1e-12f


class _BinaryCrossEntropy(Function):
    """loss = -(y max(log p, -100) + (1 - y) max(log(1 - p), -100)), elementwise. As torch:
    gp = g (p - y) / max(p (1 - p), 1e-12); gy = g (max(log(1 - p), -100) - max(log p, -100))."""

    @staticmethod
    def forward(ctx, p, y):
        with np.errstate(divide="ignore"):
            log_p, log_q = np.maximum(np.log(p), -100.0), np.maximum(np.log1p(-p), -100.0)
        ctx.save_for_backward(p, y, log_p, log_q)
        return -(y * log_p + (1 - y) * log_q)

    @staticmethod
    def backward(ctx, g):
        p, y, log_p, log_q = ctx.saved_tensors
        gp = g * (p - y) / np.maximum(p * (1 - p), _BCE_EPS) if ctx.needs_input_grad[0] else None
        gy = g * (log_q - log_p) if ctx.needs_input_grad[1] else None
        return gp, gy


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """loss_i = -w_i [y_i log(p_i) + (1 - y_i) log(1 - p_i)], each log clamped to >= -100 (torch's
    rule, so p = 0 or 1 gives a finite loss); `input` probabilities in [0, 1] (else ValueError).
    Gradient (p - y) / (p (1 - p)) where the logs are not clamped; the target gets
    log(1 - p) - log(p). `weight` (a constant) broadcasts to the loss."""
    op = "binary_cross_entropy"
    input, target = _binary_inputs(op, input, target, size_average, reduce, reduction)
    p = input.data
    if p.size and not (np.all(p >= 0) and np.all(p <= 1)):
        raise ValueError(f"{op}: all elements of input should be between 0 and 1")
    loss = _BinaryCrossEntropy.apply(input, target)
    w = _constant(op, "weight", weight, input.dtype)
    if w is not None:
        loss = loss * Tensor(w)
    return apply_reduction(loss, reduction)


def _xlogx(t):
    """t log t, 0 at t == 0 (torch's xlogy(t, t)); the gradient there is 0 (torch's is nan)."""
    zero = t == 0
    return where(zero, 0.0, t * where(zero, 1.0, t).log())


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise KL divergence with `input` log-probabilities: target (log target - input), i.e.
    xlogy(t, t) - t input, or exp(t) (t - input) with log_target=True.

    reduction 'batchmean' is the sum divided by input.shape[0] (the KL divergence's definition);
    'mean' divides by every element and warns, as torch.
    """
    op = "kl_div"
    check_legacy(op, size_average, reduce)
    check_reduction(op, reduction, REDUCTIONS + ("batchmean",))
    if not isinstance(log_target, (bool, np.bool_)):
        raise TypeError(f"{op}: log_target must be True or False, got {log_target!r}")
    if reduction == "mean":
        warnings.warn(f"{op}: reduction 'mean' divides the total loss by both the batch size and the "
                      "support size; 'batchmean' divides only by the batch size, and aligns with the KL "
                      "div math definition", UserWarning, stacklevel=2)
    input = _float_input(op, "input", input)
    target = _target(op, input, target, warn=False)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = _xlogx(target) - target * input
    if reduction != "batchmean":
        return apply_reduction(loss, reduction)
    total = loss.sum()
    return total / input.shape[0] if input.ndim else total
