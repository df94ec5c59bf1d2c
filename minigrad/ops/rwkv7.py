"""RWKV-7 ("x070") fused ops: the WKV7 recurrence, the whole time-mix block, the channel-mix,
and LayerNorm. Each is one autograd node whose forward and backward run GEMMs in numpy/BLAS
and everything else in Cython kernels (minigrad/kernels/{wkv7,rwkv7_time_mix,token_shift,
channel_mix,layer_norm}.pyx). Maths and backward derivations: docs/rwkv7_kernels.md.

Public API (also `minigrad.functional`): `wkv7`, `rwkv7_time_mix`, `rwkv7_channel_mix`,
`layer_norm`. Channels are head-major (c = h*N + n); WKV state S[b, h, i, j], i = value index.
"""
import numpy as np

from minigrad.autograd import Function
from minigrad.autograd.grad_mode import is_grad_enabled
from minigrad.blas import gemm, gemm_batch
from minigrad.kernels import channel_mix as _cm
from minigrad.kernels import layer_norm as _ln
from minigrad.kernels import rwkv7_time_mix as _tm
from minigrad.kernels import token_shift as _ts
from minigrad.kernels import wkv7 as _wkv
from minigrad.kernels.validate import check_finite_scalar, check_float, check_int
from minigrad.ops._common import rows

WKV7_CHUNK = 32            # backward checkpoint interval (steps; docs/rwkv7_kernels.md)
GROUP_NORM_EPS = 64e-5     # ln_x eps: 1e-5 * head_size_divisor**2 with divisor 8 (official)

# Positional order of the time-mix parameters (official names, suffix after `blocks.{i}.att.`).
TIME_MIX_PARAMS = ("x_r", "x_w", "x_k", "x_v", "x_a", "x_g", "w0", "w1", "w2", "a0", "a1", "a2",
                   "v0", "v1", "v2", "g1", "g2", "k_k", "k_a", "r_k", "receptance.weight",
                   "key.weight", "value.weight", "output.weight", "ln_x.weight", "ln_x.bias")
VALUE_RESIDUAL_PARAMS = ("v0", "v1", "v2")
LERP_PARAMS = ("x_r", "x_w", "x_k", "x_v", "x_a", "x_g")   # the six token-shift lerps, in order


def _recording(ctx):
    return is_grad_enabled() and any(ctx.needs_input_grad)


def _zeros_or(arr, shape, dtype):
    return np.zeros(shape, dtype) if arr is None else arr


def _empty_rows(C, dtype):
    """A (0, C) array: the kernels' "absent" marker for optional (M, C) operands."""
    return np.empty((0, C), dtype)


# ----------------------------------------------------------------------------------------------
# WKV7
# ----------------------------------------------------------------------------------------------

def _check_wkv7(r, w, k, v, a, b, state):
    op = "wkv7"
    check_float(op, "r", r, ndim=4)
    shape, dt = r.shape, r.dtype
    for name, arr in (("w", w), ("k", k), ("v", v), ("a", a), ("b", b)):
        check_float(op, name, arr, shape=shape, dtype=dt)
    B, T, H, N = shape
    if T < 1 or N < 1:
        raise ValueError(f"wkv7: need T >= 1 and N >= 1, got r of shape {tuple(shape)}")
    if state is not None:
        check_float(op, "state", state, shape=(B, H, N, N), dtype=dt)


def _wkv7_forward(r, w, k, v, a, b, state, save, chunk=WKV7_CHUNK):
    """Run the kernel; returns y, final_state and what the backward needs (None unless saving):
    the chunk checkpoints (B*H*ceil(T/chunk)*N*N) and the vectors S_{t-1} a_t (B, T, H, N)."""
    B, T, H, N = r.shape
    chunk = min(chunk, T)   # a chunk longer than the sequence is the whole sequence
    s0 = _zeros_or(state, (B, H, N, N), r.dtype)
    y = np.empty_like(r)
    sT = np.empty((B, H, N, N), r.dtype)
    nchunk = -(-T // chunk)
    ckpt = np.empty(B * H * nchunk * N * N if save else 0, r.dtype)
    sa = np.empty_like(r) if save else np.empty((0, 0, 0, 0), r.dtype)
    _wkv.wkv7_forward(r, w, k, v, a, b, s0, y, sT, ckpt, sa, chunk)
    return y, sT, ((ckpt, sa) if save else None)


def _wkv7_backward(r, w, k, v, a, b, saved, gy, gsT, chunk=WKV7_CHUNK):
    """saved: from _wkv7_forward. Returns [dr, dw, dk, dv, da, db] (like r) and ds0 (B, H, N, N)."""
    grads = [np.empty_like(r) for _ in range(6)]
    chunk = min(chunk, r.shape[1])    # as in _wkv7_forward
    ds0 = np.empty(r.shape[:1] + r.shape[2:] + r.shape[3:], r.dtype)
    gsT = np.ascontiguousarray(gsT, dtype=r.dtype)
    _wkv.wkv7_backward(r, w, k, v, a, b, *saved, np.ascontiguousarray(gy, dtype=r.dtype), gsT,
                       *grads, ds0, chunk)
    return grads, ds0


class WKV7(Function):
    """(y, final_state) = wkv7(r, w, k, v, a, b, state); see `wkv7`."""

    @staticmethod
    def forward(ctx, r, w, k, v, a, b, state, chunk):
        _check_wkv7(r, w, k, v, a, b, state)
        save = _recording(ctx)
        y, sT, saved = _wkv7_forward(r, w, k, v, a, b, state, save, chunk)
        if save:
            ctx.save_for_backward(r, w, k, v, a, b, *saved)
            ctx.chunk = chunk
        return y, sT

    @staticmethod
    def backward(ctx, gy, gsT):
        r, w, k, v, a, b, ckpt, sa = ctx.saved_tensors
        grads, ds0 = _wkv7_backward(r, w, k, v, a, b, (ckpt, sa), gy, gsT, ctx.chunk)
        return (*grads, ds0 if ctx.needs_input_grad[6] else None, None)


def wkv7(r, w, k, v, a, b, state=None, chunk=WKV7_CHUNK):
    """RWKV-7 WKV recurrence. r, w, k, v, a, b: (B, T, H, N); state: (B, H, N, N) or None (zeros).

    Per head: S_t = S_{t-1} diag(w_t) + v_t k_t^T + (S_{t-1} a_t) b_t^T,  y_t = S_t r_t
    (w is the decay multiplier in (0, 1)). Returns (y (B, T, H, N), final_state (B, H, N, N)).
    Gradients reach every input and the initial state; final_state may carry an upstream grad.
    The backward keeps the state every `chunk` steps and recomputes inside the chunk.
    """
    return WKV7.apply(r, w, k, v, a, b, state, check_int("wkv7", "chunk", chunk, 1))


# ----------------------------------------------------------------------------------------------
# Time mix
# ----------------------------------------------------------------------------------------------

def _check_time_mix(x, shift_state, wkv_state, v_first, p, layer_id, N):
    op = "rwkv7_time_mix"
    check_float(op, "x", x, ndim=3)
    B, T, C = x.shape
    dt = x.dtype
    if T < 1:
        raise ValueError(f"{op}: x must have T >= 1, got shape {tuple(x.shape)}")
    if N < 1 or C % N:
        raise ValueError(f"{op}: head_size {N} must divide C = {C} (x of shape {tuple(x.shape)})")
    H = C // N
    if shift_state is not None:
        check_float(op, "shift_state", shift_state, shape=(B, C), dtype=dt)
    if wkv_state is not None:
        check_float(op, "wkv_state", wkv_state, shape=(B, H, N, N), dtype=dt)
    if layer_id > 0:
        if v_first is None:
            raise ValueError(f"{op}: layer_id {layer_id} > 0 needs v_first (B, T, C)")
        check_float(op, "v_first", v_first, shape=(B, T, C), dtype=dt)
    lora = {}
    for name in TIME_MIX_PARAMS:
        arr = p[name]
        if layer_id == 0 and name in VALUE_RESIDUAL_PARAMS:
            continue
        if name in LERP_PARAMS or name in ("w0", "a0", "v0", "k_k", "k_a"):
            check_float(op, name, arr, shape=(1, 1, C), dtype=dt)
        elif name.endswith("1"):
            check_float(op, name, arr, shape=(C, None), dtype=dt)
            lora[name[0]] = arr.shape[1]
        elif name.endswith("2"):
            check_float(op, name, arr, shape=(lora[name[0]], C), dtype=dt)
        elif name == "r_k":
            check_float(op, name, arr, shape=(H, N), dtype=dt)
        elif name.startswith("ln_x"):
            check_float(op, name, arr, shape=(C,), dtype=dt)
        else:
            check_float(op, name, arr, shape=(C, C), dtype=dt)
    return B, T, C, H


def time_mix_forward(x, shift_state, wkv_state, v_first, p, layer_id, N, save=False):
    """The time-mix forward on checked arrays (`_check_time_mix`), no autograd: x (B, T, C),
    shift_state (B, C) / wkv_state (B, H, N, N) or None, v_first (B, T, C) for layer_id > 0, p the
    {official name: array} params. Returns (out (B, T, C), new_shift (B, C), new_wkv (B, H, N, N),
    v (M, C): this block's value, layer 0's v_first, and what the backward needs when `save`, else None).
    RWKV7TimeMix.forward and the decoder (models/rwkv7_decode.py) both run it."""
    B, T, C = x.shape
    H = C // N
    M, dt = B * T, x.dtype
    vres_on = layer_id > 0
    shift = _zeros_or(shift_state, (B, C), dt)
    mu = np.concatenate([p[n].reshape(1, C) for n in LERP_PARAMS])
    xs = np.empty((6, B, T, C), dt)
    _ts.token_shift_forward(x, shift, mu, xs)
    xr, xw, xk, xv, xa, xg = xs.reshape(6, M, C)

    r = gemm(xr, p["receptance.weight"], trans_b=True)
    k = gemm(xk, p["key.weight"], trans_b=True)
    v = gemm(xv, p["value.weight"], trans_b=True)
    hw = gemm(xw, p["w1"])
    _tm.tanh_forward(hw)
    zw = gemm(hw, p["w2"])
    ha = gemm(xa, p["a1"])
    za = gemm(ha, p["a2"])
    hg = gemm(xg, p["g1"])
    _tm.sigmoid_forward(hg)
    g = gemm(hg, p["g2"])
    if vres_on:
        hv = gemm(xv, p["v1"])
        zv = gemm(hv, p["v2"])
        vf = v_first.reshape(M, C)
        v0 = p["v0"].reshape(C)
        vres = np.empty_like(v)
    else:
        hv = None
        zv = vf = _empty_rows(C, dt)
        v0 = np.zeros(C, dt)
        vres = v
    w, kk, kmod, aw, bw = (np.empty_like(k) for _ in range(5))
    _tm.time_mix_prepare_forward(k, v, zw, za, zv, vf, p["w0"].reshape(C), p["a0"].reshape(C),
                                 v0, p["k_k"].reshape(C), p["k_a"].reshape(C), H,
                                 w, kk, kmod, vres, aw, bw)
    a = za   # prepare_forward turned za into a = sigmoid(a0 + za); zw into w0 + zw

    shape4 = (B, T, H, N)
    y, sT, wkv_saved = _wkv7_forward(*(t.reshape(shape4) for t in (r, w, kmod, vres, aw, bw)),
                                     wkv_state, save)
    y = y.reshape(M, C)
    u = np.empty_like(y)
    mean, rstd, bonus = (np.empty((M, H), dt) for _ in range(3))
    _tm.time_mix_output_forward(y, r, kmod, vres, g, p["r_k"].reshape(C), p["ln_x.weight"],
                                p["ln_x.bias"], H, GROUP_NORM_EPS, u, mean, rstd, bonus)
    out = gemm(u, p["output.weight"], trans_b=True).reshape(B, T, C)
    saved = ((x, shift, mu, xs, r, k, v, w, zw, a, kk, kmod, vres, aw, bw, zv, vf, hw, ha, hg, hv,
              g, y, u, mean, rstd, bonus, *wkv_saved) if save else None)
    return out, x[:, -1].copy(), sT, v, saved


class RWKV7TimeMix(Function):
    """The whole x070 time-mix block as one node; see `rwkv7_time_mix`.

    forward(x, shift_state, wkv_state, v_first, *params in TIME_MIX_PARAMS order, layer_id,
    head_size) -> out, new_shift_state, new_wkv_state[, v (layer 0: the v_first output)].
    """

    @staticmethod
    def forward(ctx, x, shift_state, wkv_state, v_first, *rest):
        layer_id, N = rest[-2], rest[-1]
        p = dict(zip(TIME_MIX_PARAMS, rest[:-2]))
        B, T, C, H = _check_time_mix(x, shift_state, wkv_state, v_first, p, layer_id, N)
        save = _recording(ctx)
        out, new_shift, sT, v, saved = time_mix_forward(x, shift_state, wkv_state, v_first, p,
                                                        layer_id, N, save)
        if save:
            # params go through save_for_backward too, so in-place edits of them are detected
            ctx.save_for_backward(*saved, *(p[n] for n in TIME_MIX_PARAMS))
            ctx.layer_id, ctx.dims = layer_id, (B, T, C, H, N)
        outs = (out, new_shift, sT)
        # a copy: v is also saved for backward, and an in-place edit of the returned v_first
        # must not reach it
        return outs + (v.reshape(B, T, C).copy(),) if layer_id == 0 else outs

    @staticmethod
    def backward(ctx, gout, gnew_shift, gsT, gv_first_out=None):
        saved = ctx.saved_tensors
        (x, shift, mu, xs, r, k, v, w, zw, a, kk, kmod, vres, aw, bw, zv, vf,
         hw, ha, hg, hv, g, y, u, mean, rstd, bonus, ckpt, sa) = saved[:29]
        p = dict(zip(TIME_MIX_PARAMS, saved[29:]))
        layer_id = ctx.layer_id
        B, T, C, H, N = ctx.dims
        M, dt = B * T, x.dtype
        nth = _tm.num_threads()
        need = dict(zip(TIME_MIX_PARAMS, ctx.needs_input_grad[4:]))
        grads = dict.fromkeys(TIME_MIX_PARAMS)

        def wgrad(name, ga, xin):       # grad of W (out, in) in `xin @ W.T`: ga^T xin
            if need[name]:
                grads[name] = gemm(ga, xin, trans_a=True)

        def lora_wgrads(items):         # (name, xin, ga): grad of W in `xin @ W`, as one batch
            items = [(name, xin, ga) for name, xin, ga in items if need[name]]
            for (name, _, _), gw in zip(items, gemm_batch([(xin, ga, True, False) for _, xin, ga in items])):
                grads[name] = gw

        gout = np.ascontiguousarray(gout).reshape(M, C)
        wgrad("output.weight", gout, u)
        gu = gemm(gout, p["output.weight"])

        # GroupNorm, bonus, gate
        g_g, gy, gv_b, gr_b, gkmod_b = (np.empty_like(y) for _ in range(5))
        acc = np.empty((nth, 3, C), dt)
        _tm.time_mix_output_backward(gu, y, r, kmod, vres, g, p["r_k"].reshape(C),
                                     p["ln_x.weight"], p["ln_x.bias"], mean, rstd, bonus, H,
                                     g_g, gy, gv_b, gr_b, gkmod_b, acc)
        grads["ln_x.weight"], grads["ln_x.bias"], g_rk = acc.sum(0)
        grads["r_k"] = g_rk.reshape(H, N)

        # WKV7 (a = -kk, b = kk * a)
        shape4 = (B, T, H, N)
        (dr, dw, dkmod, dv, daw, dbw), ds0 = _wkv7_backward(
            *(t.reshape(shape4) for t in (r, w, kmod, vres, aw, bw)), (ckpt, sa),
            gy.reshape(shape4), gsT)
        dr, dw, dkmod, dv, daw, dbw = (t.reshape(M, C) for t in (dr, dw, dkmod, dv, daw, dbw))
        if layer_id == 0 and gv_first_out is not None:
            dv += gv_first_out.reshape(M, C)

        # decay, in-context rate, kk normalisation, key modification, value residual
        gk, gv, g_zw, g_za = (np.empty_like(y) for _ in range(4))
        if layer_id > 0:
            g_zv, g_vfirst = np.empty_like(y), np.empty_like(y)
        else:
            g_zv = g_vfirst = _empty_rows(C, dt)
        acc = np.empty((nth, 5, C), dt)
        # also adds the bonus-path grads: dr += gr_b, dkmod += gkmod_b, dv += gv_b
        _tm.time_mix_prepare_backward(dw, daw, dbw, dr, dkmod, dv, gr_b, gkmod_b, gv_b,
                                      k, v, zw, w, a, kk, zv, vf,
                                      p["k_k"].reshape(C), p["k_a"].reshape(C), H,
                                      gk, gv, g_zw, g_za, g_zv, g_vfirst, acc)
        sums = acc.sum(0)
        for i, name in enumerate(("w0", "a0", "v0", "k_k", "k_a")):
            grads[name] = sums[i].reshape(1, 1, C)
        if layer_id == 0:
            grads["v0"] = None

        # GEMM backward of projections and LoRAs, straight into the six lerp grads
        xr, xw, xk, xv, xa, xg = xs.reshape(6, M, C)
        gxs = np.empty((6, M, C), dt)
        gxr, gxw, gxk, gxv, gxa, gxg = gxs

        wgrad("receptance.weight", dr, xr)
        gemm(dr, p["receptance.weight"], out=gxr)
        wgrad("key.weight", gk, xk)
        gemm(gk, p["key.weight"], out=gxk)
        wgrad("value.weight", gv, xv)
        gemm(gv, p["value.weight"], out=gxv)

        # The LoRA weight grads (K = B*T, thin outputs) in two batches: MKL then runs whole
        # products per thread, ~2x faster than one product after the other (blas.gemm_batch).
        loras = "wag" + ("v" if layer_id > 0 else "")
        g_z = {"w": g_zw, "a": g_za, "g": g_g, "v": g_zv}
        h = {"w": hw, "a": ha, "g": hg, "v": hv}
        x_in = {"w": xw, "a": xa, "g": xg, "v": xv}
        lora_wgrads([(n + "2", h[n], g_z[n]) for n in loras])
        g_h = {n: gemm(g_z[n], p[n + "2"], trans_b=True) for n in loras}
        _tm.activation_backward(g_h["w"], hw, True)
        _tm.activation_backward(g_h["g"], hg, False)
        lora_wgrads([(n + "1", x_in[n], g_h[n]) for n in loras])
        for n, gxn in (("w", gxw), ("a", gxa), ("g", gxg)):
            gemm(g_h[n], p[n + "1"], trans_b=True, out=gxn)
        if layer_id > 0:
            gemm(g_h["v"], p["v1"], trans_b=True, out=gxv, accumulate=True)

        # token shift
        gx = np.empty_like(x)
        gshift = np.empty((B, C), dt)
        gmu = np.empty((B, 6, C), dt)
        _ts.token_shift_backward(gxs.reshape(6, B, T, C), x, shift, mu,
                                 np.ascontiguousarray(gnew_shift), gx, gshift, gmu)
        gmu = gmu.sum(0)
        for i, name in enumerate(LERP_PARAMS):
            grads[name] = gmu[i].reshape(1, 1, C)

        g_vf = g_vfirst.reshape(B, T, C) if layer_id > 0 else None
        param_grads = [grads[n] if need[n] else None for n in TIME_MIX_PARAMS]
        return (gx, gshift, ds0, g_vf, *param_grads, None, None)


def rwkv7_time_mix(x, params, shift_state=None, wkv_state=None, v_first=None, layer_id=0,
                   head_size=64):
    """The whole RWKV-7 x070 time-mix block as one autograd node.

    x: (B, T, C) block input; params: mapping of official names (TIME_MIX_PARAMS; layer 0 needs
    no v0/v1/v2) to Tensors: lerps and w0/a0/v0/k_k/k_a (1, 1, C), LoRAs w1/a1/v1/g1 (C, D) and
    w2/a2/v2/g2 (D, C), r_k (H, N), receptance/key/value/output weights (C, C) (out, in),
    ln_x.weight/bias (C,). shift_state (B, C) and wkv_state (B, H, N, N) default to zeros;
    v_first (B, T, C) is required for layer_id > 0.

    Returns (out (B, T, C), new_shift_state (B, C), new_wkv_state (B, H, N, N), v_first_out):
    v_first_out is this block's value v for layer 0 and the given v_first otherwise.
    """
    layer_id = check_int("rwkv7_time_mix", "layer_id", layer_id, 0)
    head_size = check_int("rwkv7_time_mix", "head_size", head_size)
    missing = [n for n in TIME_MIX_PARAMS
               if n not in params and (layer_id > 0 or n not in VALUE_RESIDUAL_PARAMS)]
    if missing:
        raise ValueError(f"rwkv7_time_mix: params is missing {missing}")
    args = [None if (layer_id == 0 and n in VALUE_RESIDUAL_PARAMS) else params[n]
            for n in TIME_MIX_PARAMS]
    outs = RWKV7TimeMix.apply(x, shift_state, wkv_state, v_first if layer_id > 0 else None,
                              *args, layer_id, head_size)
    return outs if layer_id == 0 else (*outs, v_first)


# ----------------------------------------------------------------------------------------------
# Channel mix
# ----------------------------------------------------------------------------------------------

def channel_mix_forward(x, shift_state, x_k, key_weight, value_weight):
    """The channel-mix forward on checked arrays, no autograd (shapes: `rwkv7_channel_mix`) ->
    (out (B, T, C), new_shift (B, C), what the backward needs)."""
    B, T, C = x.shape
    shift = _zeros_or(shift_state, (B, C), x.dtype)
    mu = x_k.reshape(1, C)
    xs = np.empty((1, B, T, C), x.dtype)
    _ts.token_shift_forward(x, shift, mu, xs)
    xk = xs.reshape(B * T, C)
    act = gemm(xk, key_weight, trans_b=True)   # h, then relu(h)^2 in place
    _cm.relu_square_forward(act, act)
    out = gemm(act, value_weight, trans_b=True).reshape(B, T, C)
    return out, x[:, -1].copy(), (x, shift, mu, xk, key_weight, value_weight, act)


class RWKV7ChannelMix(Function):
    """out = relu(xk Wk^T)^2 Wv^T with xk the token-shift lerp of x; see `rwkv7_channel_mix`."""

    @staticmethod
    def forward(ctx, x, shift_state, x_k, key_weight, value_weight):
        op = "rwkv7_channel_mix"
        check_float(op, "x", x, ndim=3)
        B, T, C = x.shape
        dt = x.dtype
        if T < 1:
            raise ValueError(f"{op}: x must have T >= 1, got shape {tuple(x.shape)}")
        if shift_state is not None:
            check_float(op, "shift_state", shift_state, shape=(B, C), dtype=dt)
        check_float(op, "x_k", x_k, shape=(1, 1, C), dtype=dt)
        check_float(op, "key_weight", key_weight, shape=(None, C), dtype=dt)
        F = key_weight.shape[0]
        check_float(op, "value_weight", value_weight, shape=(C, F), dtype=dt)
        out, new_shift, saved = channel_mix_forward(x, shift_state, x_k, key_weight, value_weight)
        if _recording(ctx):
            ctx.save_for_backward(*saved)
        return out, new_shift

    @staticmethod
    def backward(ctx, gout, gnew_shift):
        x, shift, mu, xk, key_weight, value_weight, act = ctx.saved_tensors
        B, T, C = x.shape
        M = B * T
        need = ctx.needs_input_grad
        gout = np.ascontiguousarray(gout).reshape(M, C)
        gh = gemm(gout, value_weight)          # grad of act, then of h in place
        _cm.relu_square_backward(gh, act)
        g_wv = gemm(gout, act, trans_a=True) if need[4] else None
        g_wk = gemm(gh, xk, trans_a=True) if need[3] else None
        gxs = gemm(gh, key_weight).reshape(1, B, T, C)
        gx = np.empty_like(x)
        gshift = np.empty((B, C), x.dtype)
        gmu = np.empty((B, 1, C), x.dtype)
        _ts.token_shift_backward(gxs, x, shift, mu, np.ascontiguousarray(gnew_shift), gx, gshift, gmu)
        return gx, gshift, gmu.sum(0).reshape(1, 1, C), g_wk, g_wv


def rwkv7_channel_mix(x, shift_state, x_k, key_weight, value_weight):
    """RWKV-7 channel-mix. x: (B, T, C); shift_state: (B, C) or None (zeros); x_k: (1, 1, C);
    key_weight: (F, C); value_weight: (C, F) (nn.Linear layouts).

    k = x + (shift(x) - x) * x_k;  out = relu(k Wk^T)^2 Wv^T. Returns (out, new_shift_state = x[:, -1]).
    """
    return RWKV7ChannelMix.apply(x, shift_state, x_k, key_weight, value_weight)


# ----------------------------------------------------------------------------------------------
# LayerNorm
# ----------------------------------------------------------------------------------------------

def _check_layer_norm(op, x, weight, bias, eps):
    """x (..., C) float, weight and bias (C,) of its dtype, eps finite > 0 -> (C, eps)."""
    check_float(op, "x", x)
    if x.ndim < 1:
        raise ValueError(f"{op}: x must have at least 1 dim, got a scalar")
    C = x.shape[-1]
    check_float(op, "weight", weight, shape=(C,), dtype=x.dtype)
    check_float(op, "bias", bias, shape=(C,), dtype=x.dtype)
    return C, check_finite_scalar(op, "eps", eps, positive=True)


def _layer_norm_grads(ctx, gy, gres=None):
    """(gx [+ gres], gweight, gbias) of y = layer_norm(x) from the saved x, weight, mean, rstd."""
    x, weight, mean, rstd = ctx.saved_tensors
    x2 = rows(x)
    need = ctx.needs_input_grad
    need_gx = any(need[:ctx.n_x])
    gx = np.empty_like(x2)
    acc = np.empty((_ln.grad_blocks(), 2, x2.shape[1]), x2.dtype)
    if gres is not None:
        gres = np.ascontiguousarray(gres).reshape(x2.shape)
    _ln.layer_norm_backward(np.ascontiguousarray(gy).reshape(x2.shape), x2, weight, mean, rstd, gx,
                            acc, need_gx, gres)
    gw, gb = acc.sum(0)
    return (gx.reshape(x.shape) if need_gx else None, gw if need[ctx.n_x] else None,
            gb if need[ctx.n_x + 1] else None)


def layer_norm_forward(x, weight, bias, eps):
    """LayerNorm over the last dim on checked arrays, no autograd -> (y like x, mean, rstd (rows,))."""
    x2 = rows(x)
    y = np.empty_like(x2)
    mean = np.empty(x2.shape[0], x.dtype)
    rstd = np.empty_like(mean)
    _ln.layer_norm_forward(x2, weight, bias, eps, y, mean, rstd)
    return y.reshape(x.shape), mean, rstd


def add_layer_norm_forward(x, r, weight, bias, eps):
    """s = x + r and y = LayerNorm(s) on checked arrays, no autograd -> (s, y, mean, rstd)."""
    x2 = rows(x)
    s, y = np.empty_like(x2), np.empty_like(x2)
    mean = np.empty(x2.shape[0], x.dtype)
    rstd = np.empty_like(mean)
    _ln.add_layer_norm_forward(x2, r.reshape(x2.shape), weight, bias, eps, s, y, mean, rstd)
    return s.reshape(x.shape), y.reshape(x.shape), mean, rstd


class LayerNorm(Function):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim; see `layer_norm`."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        C, eps = _check_layer_norm("layer_norm", x, weight, bias, eps)
        y, mean, rstd = layer_norm_forward(x, weight, bias, eps)
        if _recording(ctx):
            ctx.save_for_backward(x, weight, mean, rstd)   # x itself: in-place edits are detected
            ctx.n_x = 1
        return y

    @staticmethod
    def backward(ctx, gy):
        return _layer_norm_grads(ctx, gy) + (None,)


class AddLayerNorm(Function):
    """x, r (..., C), weight, bias (C,) -> (s = x + r, y = layer_norm(s)): a residual add and the
    LayerNorm after it in one pass. Backward: g = gs + layer_norm's gx(gy), for x and r alike."""

    @staticmethod
    def forward(ctx, x, r, weight, bias, eps):
        op = "add_layer_norm"
        C, eps = _check_layer_norm(op, x, weight, bias, eps)
        check_float(op, "r", r, shape=x.shape, dtype=x.dtype)
        s, y, mean, rstd = add_layer_norm_forward(x, r, weight, bias, eps)
        if _recording(ctx):
            ctx.save_for_backward(s, weight, mean, rstd)
            ctx.n_x = 2
        return s, y

    @staticmethod
    def backward(ctx, gs, gy):
        g, gw, gb = _layer_norm_grads(ctx, gy, gres=gs)
        need_x, need_r = ctx.needs_input_grad[:2]
        return (g if need_x else None), (g if need_r else None), gw, gb, None


def add_layer_norm(x, r, weight, bias, eps=1e-5):
    """(s, y) = (x + r, layer_norm(x + r, weight, bias, eps)): a residual add fused with the next
    LayerNorm (x, r (..., C); weight, bias (C,))."""
    return AddLayerNorm.apply(x, r, weight, bias, eps)


def layer_norm(x, weight, bias, eps=1e-5):
    """LayerNorm over the last dim of x (..., C) with weight, bias (C,) (biased variance)."""
    return LayerNorm.apply(x, weight, bias, eps)
