"""F.scaled_dot_product_attention: torch's signature and semantics, composed from matmul and softmax,
or the fused causal kernel (ops/attention.py) where that computes exactly the same thing."""
import math

import numpy as np

from minigrad.kernels.validate import check_bool, check_finite_scalar, check_number
from minigrad.ops.activations import float_input
from minigrad.ops.attention import causal_attention, default_scale
from minigrad.ops.binary import where
from minigrad.ops.dropout import dropout
from minigrad.tensor import Tensor

_OP = "scaled_dot_product_attention"


def _repeat_heads(x, rep):
    """torch's x.repeat_interleave(rep, dim=-3): each head repeated rep times, in place."""
    if rep == 1:
        return x
    *lead, h, s, e = x.shape
    return x.unsqueeze(-3).expand(*lead, h, rep, s, e).reshape(*lead, h * rep, s, e)


def _gqa(q, k, v, enable_gqa):
    """k, v with their heads (dim -3) repeated to q's when enable_gqa (torch's rule)."""
    if not enable_gqa or q.ndim < 3:
        return k, v
    hq, hk, hv = q.shape[-3], k.shape[-3], v.shape[-3]
    if hk == 0 or hv == 0 or hq % hk or hq % hv:
        raise ValueError(f"{_OP}: with enable_gqa the query heads ({hq}) must be a multiple of the key "
                         f"heads ({hk}) and value heads ({hv})")
    return _repeat_heads(k, hq // hk), _repeat_heads(v, hq // hv)


def _fused_causal_fits(q, k, v, enable_gqa):
    """True when F.causal_attention computes exactly this call: 4-D (B, H, L, E) inputs of one batch
    and head size, L == S (its causal mask is then torch's top-left one), v shaped as k, and the kv
    heads equal to the query heads (or dividing them under enable_gqa: query head h reads kv head
    h // (Hq // Hkv), torch's repeat_interleave)."""
    if not (q.ndim == k.ndim == v.ndim == 4) or k.shape != v.shape:
        return False
    (b, hq, lq, e), (bk, hk, s, ek) = q.shape, k.shape
    heads_ok = hk == hq or (enable_gqa and hk > 0 and hq % hk == 0)
    return b == bk and e == ek and lq == s and heads_ok and min(hq, lq, e) > 0


def _safe_softmax(scores):
    """softmax over the last dim; a row that is -inf everywhere (fully masked) gives zeros and no
    gradient, as torch's scaled_dot_product_attention (not nan)."""
    dead = np.isneginf(scores.data).all(axis=-1, keepdims=True)
    if not dead.any():
        return scores.softmax(-1)
    dead = Tensor(dead)
    return where(dead, 0.0, where(dead, 0.0, scores).softmax(-1))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """softmax(q k^T * scale + mask) v over q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev).

    scale defaults to 1 / sqrt(E). attn_mask broadcasts to (..., L, S): a bool one keeps where True,
    a float one is added to the scores. is_causal (no attn_mask allowed) keeps key j <= query i,
    aligned top-left when L != S, as torch. A fully masked row gives zeros. Leading dims broadcast;
    enable_gqa repeats the key/value heads (dim -3) to the query heads. dropout_p > 0 drops attention
    weights through F.dropout (minigrad's generator, so not torch's mask). With is_causal, 4-D inputs
    and L == S this runs the fused kernel F.causal_attention.
    """
    q, k, v = (float_input(_OP, n, x) for n, x in (("query", query), ("key", key), ("value", value)))
    is_causal, enable_gqa = check_bool(_OP, "is_causal", is_causal), check_bool(_OP, "enable_gqa", enable_gqa)
    dropout_p = check_number(_OP, "dropout_p", dropout_p)
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{_OP}: dropout_p must be in [0, 1], got {dropout_p}")
    if is_causal and attn_mask is not None:
        raise ValueError(f"{_OP}: pass attn_mask or is_causal=True, not both")
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise ValueError(f"{_OP}: query, key and value need at least 2 dims (..., L, E), got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{_OP}: query {tuple(q.shape)}, key {tuple(k.shape)} and value {tuple(v.shape)} "
                         "do not fit: need query and key of one embedding size E and key and value of "
                         "one length S")
    scale = default_scale(q.shape[-1]) if scale is None else check_finite_scalar(_OP, "scale", scale)
    if is_causal and dropout_p == 0.0 and _fused_causal_fits(q, k, v, enable_gqa):
        return causal_attention(q, k, v, scale=scale)
    k, v = _gqa(q, k, v, enable_gqa)
    scores = (q @ k.mT) * scale
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        attn_mask = Tensor(np.tri(L, S, dtype=bool))
    if attn_mask is not None:
        if not isinstance(attn_mask, Tensor):
            attn_mask = Tensor(np.asarray(attn_mask))
        try:
            shape = np.broadcast_shapes(attn_mask.shape, scores.shape)
        except ValueError:
            shape = None
        if shape != tuple(scores.shape):
            raise ValueError(f"{_OP}: attn_mask {tuple(attn_mask.shape)} does not broadcast to the "
                             f"scores' shape {tuple(scores.shape)} (..., L, S)")
        if attn_mask.dtype == np.bool_:
            scores = where(attn_mask, scores, -math.inf)
        elif attn_mask.is_floating_point():
            scores = scores + attn_mask
        else:
            raise TypeError(f"{_OP}: attn_mask must be bool or float, got {attn_mask.dtype}")
    attn = _safe_softmax(scores)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p)
    return attn @ v
