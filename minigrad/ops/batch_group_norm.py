"""batch_norm, group_norm, instance_norm (torch.nn.functional's signatures), composed of
differentiable Tensor ops: their backward comes from the tape, exact by construction.

Input (N, C, *) with C at dim 1. Statistics are the biased mean/variance; batch_norm (training) and
instance_norm (use_input_stats) update the given running_mean / running_var in place, outside the
graph, with the UNBIASED variance (n / (n - 1)) as torch does.
"""
import math

import numpy as np

from minigrad.autograd.grad_mode import no_grad
from minigrad.kernels.validate import check_finite_scalar
from minigrad.ops.conv import check_float_input
from minigrad.tensor import Tensor


def _check_input(op, x, min_ndim=2):
    arr = check_float_input(op, "input", x)
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    if arr.ndim < min_ndim:
        raise ValueError(f"{op}: expected an input with at least {min_ndim} dims (N, C, *), got shape "
                         f"{tuple(arr.shape)}")
    return arr


def _check_channel_tensor(op, name, t, C, dtype, required=False):
    if t is None:
        if required:
            raise ValueError(f"{op}: {name} must be defined in evaluation mode")
        return
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor or None, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{op}: {name} is {t.dtype} but input is {dtype}; they must match")
    if tuple(t.shape) != (C,):
        raise ValueError(f"{op}: {name} should contain {C} elements, got shape {tuple(t.shape)}")


def _check_channel_tensors(op, x, running_mean, running_var, weight, bias, need_running):
    """The four optional (C,) tensors of batch_norm / instance_norm; the running pair is required
    when normalising with it (need_running)."""
    C = x.shape[1]
    for name, t, required in (("running_mean", running_mean, need_running),
                              ("running_var", running_var, need_running),
                              ("weight", weight, False), ("bias", bias, False)):
        _check_channel_tensor(op, name, t, C, x.dtype, required)


def _running_normalize(input, running_mean, running_var, eps):
    """(input - running_mean) / sqrt(running_var + eps), per channel (evaluation mode)."""
    ndim = input.ndim
    return (input - _per_channel(running_mean, ndim)) * _per_channel((running_var + eps).rsqrt(), ndim)


def _update_running_pair(running_mean, running_var, mean, unbiased_var, momentum):
    """Both running statistics (each may be None) moved towards the (C,) batch mean / unbiased var."""
    if running_mean is not None:
        _update_running(running_mean, mean, momentum)
    if running_var is not None:
        _update_running(running_var, unbiased_var, momentum)


def _per_channel(t, ndim):
    """A (C,) tensor shaped (C, 1, ...) to broadcast against (N, C, *spatial) of `ndim` dims."""
    return t.reshape((t.shape[0],) + (1,) * (ndim - 2))


def _affine(y, weight, bias):
    if weight is not None:
        y = y * _per_channel(weight, y.ndim)
    if bias is not None:
        y = y + _per_channel(bias, y.ndim)
    return y


def _normalize(x, dims, eps):
    """(x - mean) / sqrt(var + eps) over `dims` (biased var); also returns the (detached) mean and
    biased var arrays (keepdim) for the running statistics."""
    mean = x.mean(dim=dims, keepdim=True)
    centred = x - mean
    var = (centred * centred).mean(dim=dims, keepdim=True)
    return centred * (var + eps).rsqrt(), mean.data, var.data


def _update_running(running, batch_stat, momentum):
    """running <- (1 - momentum) * running + momentum * batch_stat, in place, outside the graph."""
    new = (1 - momentum) * running.data + momentum * batch_stat.astype(running.dtype, copy=False)
    with no_grad():
        running.copy_(Tensor(new.astype(running.dtype, copy=False)))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,  # noqa: A002
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm over input (N, C, *): per channel, statistics over N and the
    spatial dims. training=True normalises with the batch's mean and biased variance and, when
    running_mean / running_var are given, updates them in place (momentum, unbiased variance);
    training=False normalises with running_mean / running_var (both required)."""
    op = "batch_norm"
    x = _check_input(op, input)
    C = x.shape[1]
    _check_channel_tensors(op, x, running_mean, running_var, weight, bias, not training)
    eps = check_finite_scalar(op, "eps", eps)
    dims = (0,) + tuple(range(2, x.ndim))
    if training:
        momentum = check_finite_scalar(op, "momentum", momentum)
        if eps <= 0:
            raise ValueError(f"{op}: eps must be positive during training, but got {eps}")
        n = x.size // C if C else 0
        if n <= 1:
            raise ValueError(f"{op}: expected more than 1 value per channel when training, got input of "
                             f"shape {tuple(x.shape)}")
        y, mean, var = _normalize(input, dims, eps)
        _update_running_pair(running_mean, running_var, mean.reshape(C), var.reshape(C) * (n / (n - 1)),
                             momentum)
    else:
        y = _running_normalize(input, running_mean, running_var, eps)
    return _affine(y, weight, bias)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """torch.nn.functional.group_norm: input (N, C, *) with C divisible by num_groups; each sample's
    channels are split into num_groups groups normalised over (C/G, *spatial) (biased variance);
    weight / bias (C,) optional, per channel."""
    op = "group_norm"
    x = _check_input(op, input)
    if isinstance(num_groups, (bool, np.bool_)) or not isinstance(num_groups, (int, np.integer)):
        raise TypeError(f"{op}: num_groups must be an int, got {num_groups!r}")
    G = int(num_groups)
    N, C = x.shape[:2]
    if G < 1 or C % G:
        raise ValueError(f"{op}: expected number of channels in input to be divisible by num_groups, but got "
                         f"input of shape {tuple(x.shape)} and num_groups={G}")
    for name, t in (("weight", weight), ("bias", bias)):
        _check_channel_tensor(op, name, t, C, x.dtype)
    eps = check_finite_scalar(op, "eps", eps)
    if N * C // G * math.prod(x.shape[2:]) == 1:     # torch's check (of N * C/G, not of a group's size)
        raise ValueError(f"{op}: expected more than 1 value per channel when training, got input of shape "
                         f"{tuple(x.shape)} and num_groups={G}")
    per_group = (C // G) * math.prod(x.shape[2:])
    y, _, _ = _normalize(input.reshape(N, G, per_group), (2,), eps)
    return _affine(y.reshape(x.shape), weight, bias)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,  # noqa: A002
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """torch.nn.functional.instance_norm: input (N, C, *spatial); each (sample, channel) normalised
    over its spatial dims. use_input_stats=False normalises with running_mean / running_var instead;
    with use_input_stats=True given running stats are updated with the batch mean of the instances'
    mean and unbiased variance (torch's rule)."""
    op = "instance_norm"
    x = _check_input(op, input, 3)
    C = x.shape[1]
    _check_channel_tensors(op, x, running_mean, running_var, weight, bias, not use_input_stats)
    eps = check_finite_scalar(op, "eps", eps)
    dims = tuple(range(2, x.ndim))
    if use_input_stats:
        momentum = check_finite_scalar(op, "momentum", momentum)
        n = math.prod(x.shape[2:])
        if n <= 1:
            raise ValueError(f"{op}: expected more than 1 spatial element when training, got input of shape "
                             f"{tuple(x.shape)}")
        y, mean, var = _normalize(input, dims, eps)
        N = x.shape[0]
        if N:      # the batch mean of the instances' statistics
            _update_running_pair(running_mean, running_var, mean.reshape(N, C).mean(0),
                                 (var.reshape(N, C) * (n / (n - 1))).mean(0), momentum)
    else:
        y = _running_normalize(input, running_mean, running_var, eps)
    return _affine(y, weight, bias)
