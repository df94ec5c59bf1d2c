"""Causal attention with grouped-query heads and a streaming softmax (kernels/attention.pyx).

`causal_attention(q, k, v, scale=None, layout="bhtd")`: q (B, Hq, T, hd), k and v (B, Hkv, T, hd)
with Hq % Hkv == 0 (`layout="bthd"` takes (B, T, H, hd), the layout a (B*T, H*hd) projection has,
without copies). Query head h reads kv head h // (Hq // Hkv). Only o and the row log-sum-exp
lse (B, Hq, T) are kept for backward, which recomputes the probabilities block by block.

One nogil kernel does the work: prange over (batch, head, query block) forward and over
(batch, kv head) backward, each thread making its own single-threaded BLAS calls for the block
products (hence `serial_blas()` around the calls). Block sizes: `BLOCK_ROWS` query rows x
`BLOCK_KEYS` keys (module attributes here, so tests can force many blocks on tiny inputs; None
keys: `kernels.attention.block_keys_for(BLOCK_ROWS, hd)`, 256 at hd 64).
"""
import math

import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels import attention as _k
from minigrad.kernels.validate import check_finite_scalar, check_float
from minigrad.threads import kernel_blas, serial_blas

BLOCK_ROWS = _k.BLOCK_ROWS
BLOCK_KEYS = None
_LAYOUTS = ("bhtd", "bthd")


def _as_bhtd(x, layout):
    """A (B, H, T, hd) view of an array stored in `layout`."""
    return x if layout == "bhtd" else x.transpose(0, 2, 1, 3)


def _check(q, k, v, layout, contiguous=True):
    op = "causal_attention"
    if layout not in _LAYOUTS:
        raise ValueError(f"{op}: layout must be one of {_LAYOUTS}, got {layout!r}")
    check_float(op, "q", q if contiguous or not isinstance(q, np.ndarray) else q[..., :0])
    for name, x in (("q", q), ("k", k), ("v", v)):
        if contiguous or not isinstance(x, np.ndarray):
            check_float(op, name, x, ndim=4, dtype=q.dtype)
        else:       # a view into a KV cache: only the last axis must have unit stride
            check_float(op, name, np.ascontiguousarray(x[..., :1]), ndim=4, dtype=q.dtype)
            if x.size and x.strides[-1] != x.itemsize:
                raise ValueError(f"{op}: {name} needs unit stride on its last axis")
    q4, k4, v4 = (_as_bhtd(x, layout) for x in (q, k, v))
    B, Hq, Tq, hd = q4.shape
    if k4.shape != v4.shape:
        raise ValueError(f"{op}: k {k.shape} and v {v.shape} must have the same shape")
    Bk, Hkv, Tk, hdk = k4.shape
    if Bk != B or hdk != hd or Tk < Tq or (Hq % Hkv if Hkv else Hq):
        raise ValueError(f"{op}: q {q.shape} and k/v {k.shape} ({layout}) do not fit: need equal batch "
                         "and head size, query heads a multiple of kv heads, and T_k >= T_q")
    return q4, k4, v4          # a zero batch, head count, length or head size: an empty output


def attention_forward_arrays(q4, k4, v4, scale, o4=None):
    """Forward on (B, H, T, hd) views; returns (o4, lse). o4: a (B, H, T, hd) view to write (any
    strides, unit last one), by default a new array in q's memory layout."""
    B, Hq, Tq, hd = q4.shape
    if o4 is None:
        o4 = np.empty_like(q4)                  # keeps q's memory layout
    lse = np.empty((B, Hq, Tq), q4.dtype)
    if q4.size:                                 # else an empty output (as torch); the kernel needs rows
        with kernel_blas():
            _k.attention_forward(q4, k4, v4, o4, lse, scale, *_blocks(hd))
    return o4, lse


class CausalAttention(Function):
    """q, k, v (layout) -> o (out_layout); saves q, k, v, o, lse. See the module docstring."""

    @staticmethod
    def forward(ctx, q, k, v, scale, layout, out_layout):
        q4, k4, v4 = _check(q, k, v, layout)
        if out_layout not in _LAYOUTS:
            raise ValueError(f"causal_attention: out_layout must be one of {_LAYOUTS}, got {out_layout!r}")
        if k4.shape[2] != q4.shape[2]:
            raise ValueError(f"causal_attention: q {q.shape} and k {k.shape} need the same length "
                             "(KV-cache decoding goes through attention_inference)")
        scale = _scale(scale, q4.shape[-1])
        B, H, T, hd = q4.shape
        o = np.empty((B, H, T, hd) if out_layout == "bhtd" else (B, T, H, hd), q4.dtype)
        _, lse = attention_forward_arrays(q4, k4, v4, scale, _as_bhtd(o, out_layout))
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.scale, ctx.layouts = scale, (layout, out_layout)
        return o

    @staticmethod
    def backward(ctx, go):
        q, k, v, o, lse = ctx.saved_tensors
        layout, out_layout = ctx.layouts
        gq, gk, gv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
        args = [_as_bhtd(x, layout) for x in (q, k, v)] + [_as_bhtd(o, out_layout)]
        grads = [_as_bhtd(x, layout) for x in (gq, gk, gv)]
        if q.size == 0:                 # an empty output (k, v too unless only Hq is 0): zero grads
            return gq, np.zeros_like(k), np.zeros_like(v), None, None, None
        with serial_blas():
            _k.attention_backward(*args, lse, _as_bhtd(np.ascontiguousarray(go), out_layout), *grads,
                                  ctx.scale, *_blocks(q.shape[-1]))
        return gq, gk, gv, None, None, None


def _blocks(hd):
    """(query rows, keys) per block for head size hd."""
    return BLOCK_ROWS, BLOCK_KEYS or _k.block_keys_for(BLOCK_ROWS, hd)


def default_scale(hd):
    """1 / sqrt(hd); with hd = 0 the scores are all 0 and any scale gives torch's result."""
    return 1.0 / math.sqrt(hd) if hd else 1.0


def _scale(scale, hd):
    if scale is None:
        return default_scale(hd)
    return check_finite_scalar("causal_attention", "scale", scale)


def causal_attention(q, k, v, scale=None, layout="bhtd", out_layout=None):
    """softmax(scale q k^T + causal mask) v; q (B, Hq, T, hd), k/v (B, Hkv, T, hd), Hq % Hkv == 0.

    scale defaults to 1/sqrt(hd). layout="bthd" takes (B, T, H, hd) instead; the output is in
    out_layout (default: layout), so a model can keep q, k, v head-major ("bhtd", where each head's
    rows are contiguous for the block GEMMs) and still get o as (B, T, H, hd) for its projection.
    """
    return CausalAttention.apply(q, k, v, scale, layout, layout if out_layout is None else out_layout)


def attention_inference(q, k, v, scale=None, layout="bhtd"):
    """No-grad attention for KV-cache decoding: numpy q (T_q new rows) against k, v of T_k >= T_q
    positions (views into a cache are fine); query row i sits at position T_k - T_q + i."""
    q4, k4, v4 = _check(q, k, v, layout, contiguous=False)
    o4, _ = attention_forward_arrays(q4, k4, v4, _scale(scale, q4.shape[-1]))
    return o4 if layout == "bhtd" else o4.transpose(0, 2, 1, 3)
