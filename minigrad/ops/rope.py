"""Rotary position embedding (kernels/rope.pyx), interleaved or HF half-split pairs.

cos/sin tables (P, hd/2) are computed in float64 (angle = pos * theta_i, theta_i = base^(-2i/hd),
optionally rescaled as HF's rope_scaling: `rope_inv_freq`), cast to the input dtype and cached per
(P, hd, base, scaling, dtype), P being the table length rounded up to a power of two so KV-cache
decoding reuses one table.
"""
from collections import OrderedDict

import numpy as np

from minigrad.autograd.function import Function
from minigrad.kernels import rope as _k
from minigrad.kernels.validate import check_bool, check_finite_scalar, check_float, check_index, check_int

_TABLES = OrderedDict()
_MAX_TABLES = 32
MAX_TABLE_ROWS = 1 << 16    # beyond this largest position, compute rows per call instead of a table
_LAYOUTS = ("bhtd", "bthd")
# rope_type -> its parameters (HF's names); "default" (or no scaling) is plain RoPE
ROPE_SCALING_KEYS = {
    "linear": ("factor",),
    "dynamic": ("factor", "original_max_position_embeddings"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}
ROPE_LENGTH_KEY = "original_max_position_embeddings"


def check_rope_scaling(scaling, where="rope", base=None, default_length=None):
    """HF's rope_scaling / rope_parameters dict as a canonical one ({"rope_type", *its keys} with
    float factors and an int length), or None for plain RoPE (None, {}, rope_type "default").

    "type" is read as "rope_type"; a "rope_theta" key must equal `base` (when given) and is dropped;
    a missing original_max_position_embeddings is `default_length` (HF: max_position_embeddings).
    ValueError naming the key for an unknown type or key, a missing key or a bad value."""
    if scaling is None:
        return None
    if not isinstance(scaling, dict):
        raise TypeError(f"{where}: rope_scaling must be a dict or None, got {scaling!r}")
    params = dict(scaling)
    legacy = params.pop("type", "default")
    kind = params.pop("rope_type", legacy)
    theta = params.pop("rope_theta", None)
    if theta is not None and base is not None and check_finite_scalar(where, "rope_theta", theta) != base:
        raise ValueError(f"{where}: rope_scaling rope_theta {theta} differs from rope_base {base}")
    plain = kind in (None, "default")
    if not plain and kind not in ROPE_SCALING_KEYS:
        raise ValueError(f"{where}: rope_type {kind!r} is not implemented (supported: default, "
                         f"{', '.join(ROPE_SCALING_KEYS)})")
    keys = () if plain else ROPE_SCALING_KEYS[kind]
    unknown = sorted(set(params) - set(keys))
    if unknown:
        raise ValueError(f"{where}: rope_scaling of type {kind!r} has unknown keys {unknown} (takes {keys})")
    if plain:
        return None
    if ROPE_LENGTH_KEY in keys and params.get(ROPE_LENGTH_KEY) is None and default_length is not None:
        params[ROPE_LENGTH_KEY] = default_length
    out = {"rope_type": kind}
    for key in keys:
        if params.get(key) is None:
            raise ValueError(f"{where}: rope_scaling of type {kind!r} needs {key!r}")
        out[key] = (check_int(where, key, params[key], 1) if key == ROPE_LENGTH_KEY
                    else check_finite_scalar(where, key, params[key], positive=True))
    return out


def rope_inv_freq(hd, base, scaling=None):
    """theta_i = base^(-2i/hd) for i < hd/2 (float64), rescaled by a canonical `scaling`:
    linear: theta_i / factor (= positions / factor); dynamic: unchanged (HF's dynamic NTK keeps the
    base up to original_max_position_embeddings, the only lengths it is used for); llama3: see
    `_llama3_inv_freq`."""
    inv_freq = float(base) ** (-np.arange(0, hd // 2, dtype=np.float64) * 2.0 / hd)
    kind = scaling["rope_type"] if scaling else None
    if kind == "linear":
        return inv_freq / scaling["factor"]
    if kind == "llama3":
        return _llama3_inv_freq(inv_freq, **{k: v for k, v in scaling.items() if k != "rope_type"})
    return inv_freq


def _llama3_inv_freq(inv_freq, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings):
    """Llama 3.1's smooth interpolation, on wavelengths w_i = 2 pi / theta_i and L = original length:
    w_i < L / high_freq_factor: theta_i (kept); w_i > L / low_freq_factor: theta_i / factor;
    between: (1 - s) theta_i / factor + s theta_i with s = (L / w_i - low) / (high - low)."""
    L = original_max_position_embeddings
    wavelen = 2 * np.pi / inv_freq
    with np.errstate(divide="ignore", invalid="ignore"):     # high == low: no band in between
        smooth = (L / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    mixed = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    out = np.where(wavelen > L / low_freq_factor, inv_freq / factor, inv_freq)
    between = ~(wavelen < L / high_freq_factor) & ~(wavelen > L / low_freq_factor)
    return np.where(between, mixed, out)


def _scaling_key(scaling):
    """A hashable form of a canonical scaling for the table cache (None: plain RoPE's tables)."""
    if not scaling or scaling["rope_type"] == "dynamic":
        return None
    return tuple(scaling.items())


def rope_tables(n_positions, hd, base, dtype, scaling=None):
    """(cos, sin), each (P, hd/2) with P >= n_positions, cached per (P, hd, base, dtype, scaling);
    `scaling` canonical (check_rope_scaling) or None."""
    P = 1 << max(int(n_positions) - 1, 0).bit_length()
    key = (P, int(hd), float(base), np.dtype(dtype), _scaling_key(scaling))
    tables = _TABLES.get(key)
    if tables is None:
        tables = _cos_sin(np.arange(P), hd, base, dtype, scaling)
        _TABLES[key] = tables
        if len(_TABLES) > _MAX_TABLES:
            _TABLES.popitem(last=False)
    else:
        _TABLES.move_to_end(key)
    return tables


def _cos_sin(positions, hd, base, dtype, scaling=None):
    """cos, sin (len(positions), hd/2) of angle = pos * theta_i (rope_inv_freq), computed in float64."""
    inv_freq = rope_inv_freq(hd, base, scaling)
    angles = np.asarray(positions, np.float64)[:, None] * inv_freq[None, :]
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def _positions(positions, T):
    """positions: an int offset (-> offset .. offset+T-1) or T integers."""
    if isinstance(positions, (int, np.integer)):
        start = check_int("rope", "position offset", positions, 0, np.iinfo(np.int32).max - T)
        return np.arange(start, start + T, dtype=np.int64)
    pos = np.asarray(positions)
    pos = check_index("rope", "positions", pos, np.iinfo(np.int32).max, shape=(T,))
    return pos


def _as_heads(x, layout):
    """A 3-D view of x (B, H, T, hd) / (B, T, H, hd) and the axis holding the position."""
    B, A1, A2, hd = x.shape
    return x.reshape(B * A1, A2, hd), (1 if layout == "bhtd" else 0)


def _rotate(x3, y3, cos, sin, pos, pos_axis, interleaved, inverse=False):
    """y3 = R(+-pos) x3 on (A, M, hd) views (kernels/rope.pyx)."""
    if x3.size:
        kernel = _k.rope_backward if inverse else _k.rope_forward
        kernel(x3, y3, cos, sin, pos, pos_axis, interleaved)


def _setup(op, x_shape, hd, positions, T, base, dtype, scaling):
    if hd % 2:
        raise ValueError(f"{op}: head size must be even, got shape {x_shape}")
    base = check_finite_scalar(op, "base", base, positive=True)
    pos = _positions(positions, T)
    n = int(pos.max()) + 1 if pos.size else 1
    if scaling is not None:
        scaling = check_rope_scaling(scaling, op)
        _check_dynamic_length(op, scaling, n)
    if n > MAX_TABLE_ROWS and n > 2 * pos.size:
        # far positions: rows for exactly these T positions (same float64 maths as the tables),
        # not a table of every position up to n (2**31 positions: 64 GiB and minutes to fail)
        cos, sin = _cos_sin(pos, hd, base, dtype, scaling)
        return cos, sin, np.arange(pos.size, dtype=np.int64)
    cos, sin = rope_tables(n, hd, base, dtype, scaling)
    return cos, sin, pos


def _check_dynamic_length(op, scaling, n):
    """Dynamic NTK RoPE is plain RoPE up to its original length; beyond, HF changes the base with
    the sequence length (and keeps cached keys rotated by the old one): not implemented."""
    if scaling and scaling["rope_type"] == "dynamic" and n > scaling[ROPE_LENGTH_KEY]:
        raise ValueError(f"{op}: dynamic RoPE scaling beyond original_max_position_embeddings "
                         f"{scaling[ROPE_LENGTH_KEY]} (position {n - 1}) is not implemented")


class RoPE(Function):
    """x (B, H, T, hd) or (B, T, H, hd) -> each head vector rotated by its position's angles.

    Backward: the inverse rotation of the upstream grad (a rotation's transpose is its inverse).
    """

    @staticmethod
    def forward(ctx, x, positions, base, interleaved, layout, scaling):
        op = "rope"
        check_float(op, "x", x, ndim=4)
        if layout not in _LAYOUTS:
            raise ValueError(f"{op}: layout must be one of {_LAYOUTS}, got {layout!r}")
        T = x.shape[2] if layout == "bhtd" else x.shape[1]
        cos, sin, pos = _setup(op, x.shape, x.shape[3], positions, T, base, x.dtype, scaling)
        x3, pos_axis = _as_heads(x, layout)
        ctx.args = (cos, sin, pos, pos_axis, check_bool(op, "interleaved", interleaved))
        y = np.empty_like(x)
        _rotate(x3, y.reshape(x3.shape), *ctx.args)
        return y

    @staticmethod
    def backward(ctx, gy):
        gy = np.ascontiguousarray(gy)
        gx = np.empty_like(gy)
        g3 = gy.reshape(gy.shape[0] * gy.shape[1], *gy.shape[2:])    # (-1 fails on an empty gy)
        _rotate(g3, gx.reshape(g3.shape), *ctx.args, inverse=True)
        return gx, None, None, None, None, None


def rope(x, positions=0, base=10000.0, interleaved=False, layout="bhtd", scaling=None):
    """Rotary embedding of x (B, H, T, hd) (layout="bthd": (B, T, H, hd)).

    positions: an int offset or T ints. interleaved=True rotates pairs (2i, 2i+1); the default
    rotates (i, i + hd/2) as HF Llama does. scaling: an HF rope_scaling dict (check_rope_scaling).
    """
    return RoPE.apply(x, positions, base, interleaved, layout, scaling)


class SplitQKVRoPE(Function):
    """The packed projection y (B, T, (Hq + 2 Hkv) hd) = x @ [Wq; Wk; Wv].T -> rope(q), rope(k), v,
    each contiguous in `layout`: (B, T, heads, hd) ("bthd") or (B, heads, T, hd) ("bhtd"). One
    kernel pass reads y once and writes all three (no slicing copies). Backward writes the
    inverse-rotated gq, gk and the copied gv into one (B, T, (Hq + 2 Hkv) hd) gradient."""

    @staticmethod
    def forward(ctx, y, positions, n_head, n_kv_head, base, interleaved, layout, scaling):
        op = "split_qkv_rope"
        check_float(op, "y", y, ndim=3)
        if layout not in _LAYOUTS:
            raise ValueError(f"{op}: layout must be one of {_LAYOUTS}, got {layout!r}")
        B, T, W = y.shape
        heads = n_head + 2 * n_kv_head
        hd = W // heads if heads > 0 else 0
        if n_head < 1 or n_kv_head < 1 or hd * heads != W or hd == 0:
            raise ValueError(f"{op}: y {y.shape} is not (B, T, (n_head + 2 n_kv_head) * head_dim) with "
                             f"n_head {n_head}, n_kv_head {n_kv_head}")
        cos, sin, pos = _setup(op, y.shape, hd, positions, T, base, y.dtype, scaling)
        outs = tuple(np.empty((B, h, T, hd) if layout == "bhtd" else (B, T, h, hd), y.dtype)
                     for h in (n_head, n_kv_head, n_kv_head))
        ctx.args = (cos, sin, pos, check_bool(op, "interleaved", interleaved))
        ctx.layout, ctx.heads = layout, heads
        _k.qkv_rope_forward(y.reshape(B, T, heads, hd), *(_as_bthd(o, layout) for o in outs), *ctx.args)
        return outs

    @staticmethod
    def backward(ctx, gq, gk, gv):
        layout = ctx.layout
        B, T = (gq.shape[0], gq.shape[2]) if layout == "bhtd" else gq.shape[:2]
        hd = gq.shape[3]
        gy = np.empty((B, T, ctx.heads, hd), gq.dtype)
        grads = (_as_bthd(g if g.strides[3] == g.itemsize else np.ascontiguousarray(g), layout)
                 for g in (gq, gk, gv))
        _k.qkv_rope_backward(*grads, gy, *ctx.args)
        return gy.reshape(B, T, ctx.heads * hd), None, None, None, None, None, None, None


def _as_bthd(x, layout):
    """A (B, T, H, hd) view of a (B, H, T, hd) ("bhtd") or (B, T, H, hd) array."""
    return x.transpose(0, 2, 1, 3) if layout == "bhtd" else x


def split_qkv_rope(y, positions, n_head, n_kv_head, base=10000.0, interleaved=False, layout="bthd",
                   scaling=None):
    """(q, k, v) from a packed q/k/v projection y (B, T, (n_head + 2 n_kv_head) hd): q and k rotated
    (positions and scaling as in `rope`), all three (B, T, heads, hd), or (B, heads, T, hd) with
    layout="bhtd"."""
    op = "split_qkv_rope"
    n_head, n_kv_head = check_int(op, "n_head", n_head, 1), check_int(op, "n_kv_head", n_kv_head, 1)
    return SplitQKVRoPE.apply(y, positions, n_head, n_kv_head, base, interleaved, layout, scaling)
