"""Gradient utilities: clip_grad_norm_, clip_grad_value_, parameters_to_vector and
vector_to_parameters (PyTorch's semantics)."""
import math

import numpy as np

from minigrad.tensor import Tensor


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _vector_norm(x, p):
    """torch.linalg.vector_norm(x, p) in float64: max |x| (inf), min |x| (-inf), the count of nonzeros
    (0), else (sum |x|^p)^(1/p). NaN anywhere gives NaN (Python's max() would skip it)."""
    x = np.abs(np.asarray(x, np.float64).reshape(-1))
    if not x.size:
        return 0.0
    if p == math.inf:
        return float(x.max())
    if p == -math.inf:
        return float(x.min())
    if p == 0:
        return float(np.count_nonzero(x))
    return float(np.sum(x ** p) ** (1.0 / p))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale all grads in place so their joint `norm_type`-norm is at most `max_norm`; return that norm.

    total = norm of the per-grad norms (accumulated in float64); every grad is multiplied by
    min(1, max_norm / (total + 1e-6)), as torch does. Returns the total norm (before clipping) as a 0-d
    Tensor of the grads' dtype. A nan/inf total raises RuntimeError (grads untouched) when
    `error_if_nonfinite`; otherwise, as in torch, the grads are scaled by the nan/zero coefficient and
    the non-finite norm is returned: check it (`math.isfinite(norm.item())`) to skip such a step.
    `foreach` (torch's choice of kernel, same result) is accepted and ignored.
    """
    grads = _grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not max_norm >= 0:       # a negative limit would flip every gradient's sign
        raise ValueError(f"clip_grad_norm_: max_norm must be >= 0, got {max_norm}")
    if not grads:
        return Tensor(np.zeros((), dtype=np.float32))
    if norm_type == 2.0:
        flat = [g.data.reshape(-1).astype(np.float64) for g in grads]
        total = math.sqrt(sum(float(f @ f) for f in flat))
    else:
        norms = np.array([_vector_norm(g.data, norm_type) for g in grads])
        total = _vector_norm(norms, norm_type)
    dtype = grads[0].data.dtype
    if not math.isfinite(total):
        if error_if_nonfinite:
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                               f"{total}, so they cannot be clipped (set error_if_nonfinite=False to "
                               "return the norm instead)")
    coef = max_norm / (total + 1e-6)
    if not coef >= 1.0:  # also true for nan, which then propagates into the grads as in torch
        for g in grads:
            g.data *= g.data.dtype.type(coef)
            g._bump_version()
    return Tensor(np.asarray(total, dtype=dtype))


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every grad element into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        np.clip(g.data, -clip_value, clip_value, out=g.data)
        g._bump_version()


def parameters_to_vector(parameters):
    """torch.nn.utils.parameters_to_vector: every parameter flattened and concatenated (1-D,
    differentiable). All must have one dtype."""
    from minigrad.ops.join import cat

    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    if not params:
        raise ValueError("parameters_to_vector: expected at least one parameter")
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec, parameters):
    """torch.nn.utils.vector_to_parameters: copy consecutive slices of the 1-D `vec` into the
    parameters (in place, under no_grad; each bumps its version). `vec` must have exactly as many
    elements as the parameters, and their dtype."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected a Tensor, got {type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vector_to_parameters: expected a 1-D vector, got shape {tuple(vec.shape)}")
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    total = sum(p.numel() for p in params)
    if vec.shape[0] != total:
        raise ValueError(f"vector_to_parameters: vector has {vec.shape[0]} elements, the parameters {total}")
    offset = 0
    for p in params:
        if vec.dtype != p.dtype:
            raise TypeError(f"vector_to_parameters: vector dtype {vec.dtype} differs from a parameter's "
                            f"{p.dtype}")
        n = p.numel()
        p.data[...] = vec.data[offset:offset + n].reshape(p.shape)
        p._bump_version()
        offset += n
