"""F.normalize and F.cosine_similarity, composed from the vector p-norm (`norm`), whose gradient is 0
(not nan) where the norm is 0, as torch's linalg.vector_norm."""

import numpy as np

from minigrad.kernels.validate import check_finite_scalar, check_number
from minigrad.ops._common import broadcast_error, normalize_dim
from minigrad.ops.activations import float_input
from minigrad.ops.gather_sort import norm


def _check_p(op, p):
    p = check_number(op, "p", p)
    if not (p > 0):
        raise ValueError(f"{op}: p must be > 0 (or inf), got {p}")
    return p


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """x / max(||x||_p, eps) along `dim` (torch's F.normalize; the gradient does not flow through the
    norm where it is below eps)."""
    op = "normalize"
    if out is not None:
        raise ValueError(f"{op}: out= is not supported (minigrad returns a new Tensor)")
    x = float_input(op, "input", input)
    p = _check_p(op, p)
    eps = check_finite_scalar(op, "eps", eps)
    axis = normalize_dim(op, dim, x.ndim, x.shape)
    return x / norm(x, p, axis, keepdim=True).clamp(min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))) over `dim`, x1 and x2 broadcast.

    As torch (ATen's cosine_similarity) each norm is clamped to eps outside the graph: the clamped
    value divides, but the gradient reaches the norm as if it were not clamped.
    """
    op = "cosine_similarity"
    x1, x2 = float_input(op, "x1", x1), float_input(op, "x2", x2)
    eps = check_finite_scalar(op, "eps", eps)
    if eps < 0:          # torch's error: a negative clamp lets a zero norm through (0 / 0 = nan)
        raise ValueError(f"{op}: eps must be >= 0, got {eps}")
    if x1.shape != x2.shape:                                # broadcast both, as torch
        try:
            shape = np.broadcast_shapes(x1.shape, x2.shape)
        except ValueError:
            raise broadcast_error(op, ",", x1.shape, x2.shape) from None
        x1, x2 = x1.expand(*shape), x2.expand(*shape)
    axis = normalize_dim(op, dim, x1.ndim, x1.shape)
    hats = []
    for x in (x1, x2):
        n = norm(x, 2.0, axis, keepdim=True)
        nd = n.detach()
        hats.append(x / (n - nd + nd.clamp(min=eps)))     # value max(n, eps), gradient that of n
    return (hats[0] * hats[1]).sum(axis)
