"""Causal attention with grouped-query heads and a streaming softmax (kernels/attention.pyx).

`causal_attention(q, k, v, scale=None, layout="bhtd")`: q (B, Hq, T, hd), k and v (B, Hkv, T, hd)
with Hq % Hkv == 0 (`layout="bthd"` takes (B, T, H, hd), the layout a (B*T, H*hd) projection has,
without copies). Query head h reads kv head h // (Hq // Hkv). Only o and the row log-sum-exp
lse (B, Hq, T) are kept for backward, which recomputes the probabilities block by block.

Two drivers compute the same blocked maths (see docs/gpt.md for the measurements):
- "blas": per block of BLOCK_ROWS query rows, the score block S = Q_blk K^T, dP = dO_blk V^T and
  the products with V, K, Q go to BLAS (numpy matmul, batched over heads); the softmax, masking and
  dS = P (dP - D) run in Cython (nogil, prange over rows). Scratch: (heads, BLOCK_ROWS, T).
- "c": everything in one nogil kernel (BR x BC score blocks in per-thread scratch).
"""
import math

import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels import attention as _k
from minigrad.kernels.validate import check_finite_scalar, check_float
from minigrad.threads import serial_blas

BLOCK_ROWS = 64          # query rows per block in the "blas" driver
_settings = {"driver": "blas"}
_LAYOUTS = ("bhtd", "bthd")


def set_attention_driver(name):
    """Choose "blas" (default, faster here) or "c" for causal_attention."""
    if name not in ("blas", "c"):
        raise ValueError(f"causal_attention: driver must be 'blas' or 'c', got {name!r}")
    _settings["driver"] = name


def _as_bhtd(x, layout):
    """A (B, H, T, hd) view of an array stored in `layout`."""
    return x if layout == "bhtd" else x.transpose(0, 2, 1, 3)


def _check(q, k, v, layout, contiguous=True):
    op = "causal_attention"
    if layout not in _LAYOUTS:
        raise ValueError(f"{op}: layout must be one of {_LAYOUTS}, got {layout!r}")
    check_float(op, "q", q if contiguous or not isinstance(q, np.ndarray) else q[..., :0])
    for name, x in (("q", q), ("k", k), ("v", v)):
        if contiguous:
            check_float(op, name, x, ndim=4, dtype=q.dtype)
        else:
            check_float(op, name, np.ascontiguousarray(x[..., :1]), ndim=4, dtype=q.dtype)
            if x.strides[-1] != x.itemsize:
                raise ValueError(f"{op}: {name} needs unit stride on its last axis")
    q4, k4, v4 = (_as_bhtd(x, layout) for x in (q, k, v))
    B, Hq, Tq, hd = q4.shape
    if k4.shape != v4.shape:
        raise ValueError(f"{op}: k {k.shape} and v {v.shape} must have the same shape")
    Bk, Hkv, Tk, hdk = k4.shape
    if Bk != B or hdk != hd or Tk < Tq or Hkv == 0 or Hq % Hkv:
        raise ValueError(f"{op}: q {q.shape} and k/v {k.shape} ({layout}) do not fit: need equal batch "
                         "and head size, query heads a multiple of kv heads, and T_k >= T_q")
    if min(B, Hq, Tq, hd) == 0:
        raise ValueError(f"{op}: empty input q {q.shape}")
    return q4, k4, v4


def _blas_forward(q4, k4, v4, o4, lse, scale):
    B, Hq, Tq, hd = q4.shape
    Hkv, Tk = k4.shape[1:3]
    g, past = Hq // Hkv, Tk - Tq
    q5, o5 = q4.reshape(B, Hkv, g, Tq, hd), o4.reshape(B, Hkv, g, Tq, hd)
    k5, v5 = k4[:, :, None], v4[:, :, None]
    lse2 = lse.reshape(B * Hq, Tq)
    buf = np.empty(B * Hq * min(BLOCK_ROWS, Tq) * Tk, q4.dtype)
    for i0 in range(0, Tq, BLOCK_ROWS):
        i1 = min(i0 + BLOCK_ROWS, Tq)
        nr, nk = i1 - i0, i1 + past
        s = buf[:B * Hq * nr * nk].reshape(B, Hkv, g, nr, nk)
        np.matmul(q5[..., i0:i1, :], k5[..., :nk, :].swapaxes(-1, -2), out=s)
        _k.softmax_block_forward(s.reshape(B * Hq, nr, nk), lse2, i0, past, scale)
        np.matmul(s, v5[..., :nk, :], out=o5[..., i0:i1, :])


def _contig_block(x5, i0, i1, out):
    """Rows i0..i1 of (B, Hkv, g, T, hd) as a contiguous (B, Hkv, g*(i1-i0), hd) array."""
    B, Hkv, g = x5.shape[:3]
    blk = out[:x5[..., i0:i1, :].size].reshape(x5[..., i0:i1, :].shape)
    np.copyto(blk, x5[..., i0:i1, :])
    return blk.reshape(B, Hkv, g * (i1 - i0), x5.shape[-1])


def _blas_backward(q4, k4, v4, o4, lse, go4, gq4, gk4, gv4, scale):
    B, Hq, Tq, hd = q4.shape
    Hkv, Tk = k4.shape[1:3]
    g, past = Hq // Hkv, Tk - Tq
    q5, go5, gq5 = (x.reshape(B, Hkv, g, Tq, hd) for x in (q4, go4, gq4))
    k5, v5 = k4[:, :, None], v4[:, :, None]
    lse2 = lse.reshape(B * Hq, Tq)
    dd = np.ascontiguousarray(np.einsum("bhtd,bhtd->bht", go4, o4)).reshape(B * Hq, Tq)
    br = min(BLOCK_ROWS, Tq)
    s_buf, dp_buf = (np.empty(B * Hq * br * Tk, q4.dtype) for _ in range(2))
    rows_buf = np.empty(B * Hq * br * hd, q4.dtype)
    part = np.empty(B * Hkv * Tk * hd, q4.dtype)
    for i0 in range(0, Tq, BLOCK_ROWS):
        i1 = min(i0 + BLOCK_ROWS, Tq)
        nr, nk = i1 - i0, i1 + past
        s = s_buf[:B * Hq * nr * nk].reshape(B, Hkv, g, nr, nk)
        dp = dp_buf[:B * Hq * nr * nk].reshape(B, Hkv, g, nr, nk)
        np.matmul(q5[..., i0:i1, :], k5[..., :nk, :].swapaxes(-1, -2), out=s)
        np.matmul(go5[..., i0:i1, :], v5[..., :nk, :].swapaxes(-1, -2), out=dp)
        _k.softmax_block_backward(s.reshape(B * Hq, nr, nk), dp.reshape(B * Hq, nr, nk),
                                  lse2, dd, i0, past, scale)
        np.matmul(dp, k5[..., :nk, :], out=gq5[..., i0:i1, :])
        p4, ds4 = s.reshape(B, Hkv, g * nr, nk), dp.reshape(B, Hkv, g * nr, nk)
        acc = part[:B * Hkv * nk * hd].reshape(B, Hkv, nk, hd)
        np.matmul(p4.swapaxes(-1, -2), _contig_block(go5, i0, i1, rows_buf), out=acc)
        gv4[:, :, :nk] += acc
        np.matmul(ds4.swapaxes(-1, -2), _contig_block(q5, i0, i1, rows_buf), out=acc)
        gk4[:, :, :nk] += acc


def attention_forward_arrays(q4, k4, v4, scale, driver=None):
    """Forward on (B, H, T, hd) views; returns (o in q's layout as a (B, H, T, hd) view, lse)."""
    B, Hq, Tq, hd = q4.shape
    o4 = np.empty_like(q4)                      # keeps q's memory layout
    lse = np.empty((B, Hq, Tq), q4.dtype)
    if (driver or _settings["driver"]) == "c":
        _k.attention_forward(q4, k4, v4, o4, lse, scale)
    else:
        with serial_blas():
            _blas_forward(q4, k4, v4, o4, lse, scale)
    return o4, lse


class CausalAttention(Function):
    """q, k, v (layout) -> o (layout); saves q, k, v, o, lse. See the module docstring."""

    @staticmethod
    def forward(ctx, q, k, v, scale, layout):
        q4, k4, v4 = _check(q, k, v, layout)
        if k4.shape[2] != q4.shape[2]:
            raise ValueError(f"causal_attention: q {q.shape} and k {k.shape} need the same length "
                             "(KV-cache decoding goes through attention_inference)")
        scale = _scale(scale, q4.shape[-1])
        o4, lse = attention_forward_arrays(q4, k4, v4, scale)
        o = np.ascontiguousarray(o4 if layout == "bhtd" else o4.transpose(0, 2, 1, 3))
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.scale, ctx.layout = scale, layout
        return o

    @staticmethod
    def backward(ctx, go):
        q, k, v, o, lse = ctx.saved_tensors
        layout = ctx.layout
        c_driver = _settings["driver"] == "c"
        gq = np.zeros_like(q) if c_driver else np.empty_like(q)
        gk, gv = np.zeros_like(k), np.zeros_like(v)
        args = [_as_bhtd(x, layout) for x in (q, k, v, o)]
        grads = [_as_bhtd(x, layout) for x in (np.ascontiguousarray(go), gq, gk, gv)]
        if c_driver:
            _k.attention_backward(*args, lse, *grads, ctx.scale)
        else:
            with serial_blas():
                _blas_backward(*args, lse, *grads, ctx.scale)
        return gq, gk, gv, None, None


def _scale(scale, hd):
    if scale is None:
        return 1.0 / math.sqrt(hd)
    return check_finite_scalar("causal_attention", "scale", scale)


def causal_attention(q, k, v, scale=None, layout="bhtd"):
    """softmax(scale q k^T + causal mask) v; q (B, Hq, T, hd), k/v (B, Hkv, T, hd), Hq % Hkv == 0.

    scale defaults to 1/sqrt(hd). layout="bthd" takes and returns (B, T, H, hd) instead.
    """
    return CausalAttention.apply(q, k, v, scale, layout)


def attention_inference(q, k, v, scale=None, layout="bhtd"):
    """No-grad attention for KV-cache decoding: numpy q (T_q new rows) against k, v of T_k >= T_q
    positions (views into a cache are fine); query row i sits at position T_k - T_q + i."""
    q4, k4, v4 = _check(q, k, v, layout, contiguous=False)
    o4, _ = attention_forward_arrays(q4, k4, v4, _scale(scale, q4.shape[-1]),
                                     driver="c" if q4.shape[2] < 8 else None)
    return o4 if layout == "bhtd" else o4.transpose(0, 2, 1, 3)
