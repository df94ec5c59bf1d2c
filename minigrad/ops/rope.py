"""Rotary position embedding (kernels/rope.pyx), interleaved or HF half-split pairs.

cos/sin tables (P, hd/2) are computed in float64 (angle = pos * base^(-2i/hd)), cast to the
input dtype and cached per (P, hd, base, dtype), P being the table length rounded up to a power
of two so KV-cache decoding reuses one table.
"""
import operator
from collections import OrderedDict

import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels import rope as _k
from minigrad.kernels.validate import check_finite_scalar, check_float, check_index

_TABLES = OrderedDict()
_MAX_TABLES = 32
_LAYOUTS = ("bhtd", "bthd")


def rope_tables(n_positions, hd, base, dtype):
    """(cos, sin), each (P, hd/2) with P >= n_positions, cached per (P, hd, base, dtype)."""
    P = 1 << max(int(n_positions) - 1, 0).bit_length()
    key = (P, int(hd), float(base), np.dtype(dtype))
    tables = _TABLES.get(key)
    if tables is None:
        inv_freq = float(base) ** (-np.arange(0, hd // 2, dtype=np.float64) * 2.0 / hd)
        angles = np.arange(P, dtype=np.float64)[:, None] * inv_freq[None, :]
        tables = (np.cos(angles).astype(dtype), np.sin(angles).astype(dtype))
        _TABLES[key] = tables
        if len(_TABLES) > _MAX_TABLES:
            _TABLES.popitem(last=False)
    else:
        _TABLES.move_to_end(key)
    return tables


def _positions(positions, T):
    """positions: an int offset (-> offset .. offset+T-1) or T integers."""
    if isinstance(positions, (int, np.integer)):
        start = operator.index(positions)
        if start < 0:
            raise ValueError(f"rope: position offset must be >= 0, got {start}")
        return np.arange(start, start + T, dtype=np.int64)
    pos = np.asarray(positions)
    pos = check_index("rope", "positions", pos, np.iinfo(np.int32).max, shape=(T,))
    return pos


class RoPE(Function):
    """x (B, H, T, hd) or (B, T, H, hd) -> each head vector rotated by its position's angles.

    Backward: the inverse rotation of the upstream grad (a rotation's transpose is its inverse).
    """

    @staticmethod
    def forward(ctx, x, positions, base, interleaved, layout):
        op = "rope"
        check_float(op, "x", x, ndim=4)
        if layout not in _LAYOUTS:
            raise ValueError(f"{op}: layout must be one of {_LAYOUTS}, got {layout!r}")
        hd = x.shape[3]
        if hd % 2:
            raise ValueError(f"{op}: head size must be even, got x {x.shape}")
        base = check_finite_scalar(op, "base", base, positive=True)
        T, H = (x.shape[2], x.shape[1]) if layout == "bhtd" else (x.shape[1], x.shape[2])
        pos = _positions(positions, T)
        cos, sin = rope_tables(int(pos.max()) + 1 if pos.size else 1, hd, base, x.dtype)
        row_div = 1 if layout == "bhtd" else H
        ctx.args = (cos, sin, pos, row_div, bool(interleaved))
        y = np.empty_like(x)
        if x.size:
            _k.rope_forward(x.reshape(-1, hd), y.reshape(-1, hd), *ctx.args)
        return y

    @staticmethod
    def backward(ctx, gy):
        gy = np.ascontiguousarray(gy)
        gx = np.empty_like(gy)
        if gy.size:
            hd = gy.shape[3]
            _k.rope_backward(gy.reshape(-1, hd), gx.reshape(-1, hd), *ctx.args)
        return gx, None, None, None, None


def rope(x, positions=0, base=10000.0, interleaved=False, layout="bhtd"):
    """Rotary embedding of x (B, H, T, hd) (layout="bthd": (B, T, H, hd)).

    positions: an int offset or T ints. interleaved=True rotates pairs (2i, 2i+1); the default
    rotates (i, i + hd/2) as HF Llama does.
    """
    return RoPE.apply(x, positions, base, interleaved, layout)
