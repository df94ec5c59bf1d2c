"""Valid calls of every raw kernel entry point (minigrad.kernels.<family>.<fn>), for the fuzzers.

`kernel_calls(dtype)` maps "family.fn" to a `Call`: the function and its arguments, each either an
`Arr` (an array argument; `strided=True` when the kernel accepts any strides, `high` for an index
array's exclusive upper bound, `out=True` when the kernel writes it, `free` the axes whose size
may change on its own) or a `Num` (a scalar argument
with the values that must be rejected, `bad`, and odd but legal ones that must merely not crash,
`odd`). Shapes are small and odd, written independently of the kernels' own checks.
"""

import numpy as np

from minigrad.kernels import (
    adamw,
    attention,
    channel_mix,
    cross_entropy,
    layer_norm,
    rms_norm,
    rope,
    scatter,
    swiglu,
    token_shift,
    wkv7,
)
from minigrad.kernels import rwkv7_time_mix as tm

HUGE = 1 << 62


class Arr:
    def __init__(self, value, strided=False, high=None, out=False, free=(), legal=()):
        self.value, self.strided, self.high, self.out = value, strided, high, out
        self.free = free  # axes whose size alone may change (the call stays valid)
        self.legal = legal  # names of mutations that keep the call valid


class Num:
    def __init__(self, value, bad=(), odd=()):
        self.value, self.bad, self.odd = value, tuple(bad), tuple(odd)


class Call:
    def __init__(self, fn, *args):
        self.fn, self.args = fn, list(args)

    def run(self, args=None):
        vals = [a.value if isinstance(a, (Arr, Num)) else a for a in (args or self.args)]
        return self.fn(*vals)


def kernel_calls(dt, seed=0):
    rng = np.random.default_rng(seed)

    def r(*shape, lo=None):
        x = rng.standard_normal(shape).astype(dt)
        return np.abs(x) + lo if lo is not None else x

    def e(*shape):
        return np.zeros(shape, dt)

    def ids(n, high):
        return np.asarray(rng.integers(0, high, n), np.int64)

    I = lambda v, bad=(-1, HUGE), odd=(): Num(v, bad, odd)  # noqa: E731
    D = lambda v, bad=(), odd=(float("nan"), float("inf"), -1.0): Num(v, bad, odd)  # noqa: E731
    A, O = Arr, (lambda x: Arr(x, out=True))  # noqa: E731
    S, SO = (lambda x: Arr(x, strided=True)), (lambda x: Arr(x, strided=True, out=True))  # noqa: E731
    N, C, F, V = 5, 6, 7, 9
    calls = {}

    # rms_norm / layer_norm / swiglu / channel_mix: rows x features
    calls["rms_norm.rms_norm_forward"] = Call(
        rms_norm.rms_norm_forward, A(r(N, C)), A(r(C)), D(1e-5), O(e(N, C)), O(e(N))
    )
    x, w = r(N, C), r(C)
    rstd = (1 / np.sqrt((x.astype(np.float64) ** 2).mean(1) + 1e-5)).astype(dt)
    calls["rms_norm.rms_norm_backward"] = Call(
        rms_norm.rms_norm_backward, A(r(N, C)), A(x), A(w), A(rstd), O(e(N, C)), O(e(C)), Num(True), Num(True)
    )
    calls["rms_norm.add_rms_norm_forward"] = Call(
        rms_norm.add_rms_norm_forward, A(r(N, C)), A(r(N, C)), A(r(C)), D(1e-5), O(e(N, C)), O(e(N, C)),
        O(e(N)),
    )
    calls["rms_norm.add_rms_norm_backward"] = Call(
        rms_norm.add_rms_norm_backward, A(r(N, C)), A(r(N, C)), A(x), A(w), A(rstd), O(e(N, C)), O(e(C)),
        Num(True),
    )
    calls["layer_norm.layer_norm_forward"] = Call(
        layer_norm.layer_norm_forward, A(r(N, C)), A(r(C)), A(r(C)), D(1e-5), O(e(N, C)), O(e(N)), O(e(N))
    )
    nth = layer_norm.grad_blocks()
    calls["layer_norm.layer_norm_backward"] = Call(
        layer_norm.layer_norm_backward,
        A(r(N, C)),
        A(r(N, C)),
        A(r(C)),
        A(r(N)),
        A(r(N, lo=0.5)),
        O(e(N, C)),
        Arr(e(nth, 2, C), out=True, free=(0,)),
        Num(True),
        Arr(r(N, C), legal=("dim0_zero", "none")),    # gres: N rows, or absent (None / 0 rows)
    )
    calls["layer_norm.add_layer_norm_forward"] = Call(
        layer_norm.add_layer_norm_forward, A(r(N, C)), A(r(N, C)), A(r(C)), A(r(C)), D(1e-5),
        O(e(N, C)), O(e(N, C)), O(e(N)), O(e(N)),
    )
    # gate/up (and their grads) may be row-strided halves of one packed (N, 2F) projection
    calls["swiglu.swiglu_forward"] = Call(swiglu.swiglu_forward, S(r(N, F)), S(r(N, F)), O(e(N, F)))
    calls["swiglu.swiglu_backward"] = Call(
        swiglu.swiglu_backward, A(r(N, F)), S(r(N, F)), S(r(N, F)), SO(e(N, F)), SO(e(N, F))
    )
    calls["channel_mix.relu_square_forward"] = Call(
        channel_mix.relu_square_forward, A(r(N, F)), O(e(N, F))
    )
    calls["channel_mix.relu_square_backward"] = Call(
        channel_mix.relu_square_backward, O(r(N, F)), A(np.maximum(r(N, F), 0))
    )

    # embedding / x[int_array] backward: V rows scatter-added from N
    calls["scatter.scatter_add_rows"] = Call(
        scatter.scatter_add_rows, Arr(e(V, C), out=True, free=(0,)), Arr(ids(N, V), high=V), A(r(N, C))
    )

    # cross-entropy
    ce_forward = (Arr(r(N, V), free=(1,)), Arr(ids(N, V), high=V), Num(-100, odd=(-1, HUGE)),
                  O(e(N)), O(e(N)), O(e(N)))
    ce_backward = (A(r(N, V)), Arr(ids(N, V), high=V), Num(-100, odd=(-1, HUGE)), A(r(N)), A(r(N)), A(r(N)),
                   O(e(N, V)))
    ce_extra = (Arr(r(V, lo=0.5), legal=("none",)), Num(0.1, bad=(-0.1, 1.5, float("nan")), odd=(0.0, 1.0)))
    calls["cross_entropy.cross_entropy_forward"] = Call(cross_entropy.cross_entropy_forward, *ce_forward)
    calls["cross_entropy.cross_entropy_backward"] = Call(cross_entropy.cross_entropy_backward, *ce_backward)
    calls["cross_entropy.cross_entropy_forward[weight,smoothing]"] = Call(
        cross_entropy.cross_entropy_forward, *ce_forward, *ce_extra)
    calls["cross_entropy.cross_entropy_backward[weight,smoothing]"] = Call(
        cross_entropy.cross_entropy_backward, *ce_backward, *ce_extra)

    # rope: (A, M, hd) strided views of head vectors, positions along axis pos_axis into (P, hd/2) tables
    B, H, T, hd, P = 2, 3, 4, 6, 8
    for name, fn in (("rope_forward", rope.rope_forward), ("rope_backward", rope.rope_backward)):
        calls[f"rope.{name}"] = Call(
            fn,
            S(r(B * T, H, hd)),
            SO(e(B * T, H, hd)),
            A(r(P, hd // 2)),
            A(r(P, hd // 2)),
            Arr(ids(T, P), high=P, free=(0,)),
            I(0, bad=(2, -1)),
            Num(False),
        )

    # packed q/k/v rope: (B, T, Hq + 2 Hkv, hd) packed rows <-> q (B, T, Hq, hd), k, v (B, T, Hkv, hd) views
    Hq, Hk = 2, 1
    qkv = [S(r(B, T, Hq + 2 * Hk, hd)), SO(e(B, T, Hq, hd)), SO(e(B, T, Hk, hd)), SO(e(B, T, Hk, hd))]
    tail = [A(r(P, hd // 2)), A(r(P, hd // 2)), Arr(ids(T, P), high=P), Num(False)]
    calls["rope.qkv_rope_forward"] = Call(rope.qkv_rope_forward, *qkv, *tail)
    grads = [S(r(B, T, Hq, hd)), S(r(B, T, Hk, hd)), S(r(B, T, Hk, hd)), SO(e(B, T, Hq + 2 * Hk, hd))]
    calls["rope.qkv_rope_backward"] = Call(rope.qkv_rope_backward, *grads, *tail)

    # attention (strided 4-D views; block sizes are validated ints)
    Hkv, Tq = 1, 5
    q, k, v = r(B, H, Tq, hd), r(B, Hkv, Tq, hd), r(B, Hkv, Tq, hd)
    o, lse = e(B, H, Tq, hd), e(B, H, Tq)
    attention.attention_forward(q, k, v, o, lse, 0.5)
    calls["attention.attention_forward"] = Call(
        attention.attention_forward, S(q), S(k), S(v), SO(e(B, H, Tq, hd)), O(e(B, H, Tq)), D(0.5),
        I(3, bad=(0, -1, HUGE)), I(2, bad=(0, -1, HUGE)),
    )
    calls["attention.attention_backward"] = Call(
        attention.attention_backward,
        S(q),
        S(k),
        S(v),
        S(o),
        A(lse),
        S(r(B, H, Tq, hd)),
        SO(e(B, H, Tq, hd)),
        SO(e(B, Hkv, Tq, hd)),
        SO(e(B, Hkv, Tq, hd)),
        D(0.5),
        I(3, bad=(0, -1, HUGE)),
        I(2, bad=(0, -1, HUGE)),
    )

    # RWKV-7: token shift, time-mix pieces, WKV7
    B, T, H, Nh = 2, 3, 2, 4
    C, M, K = H * Nh, B * T, 6
    calls["token_shift.token_shift_forward"] = Call(
        token_shift.token_shift_forward, A(r(B, T, C)), A(r(B, C)), A(r(K, C)), O(e(K, B, T, C))
    )
    calls["token_shift.token_shift_backward"] = Call(
        token_shift.token_shift_backward,
        A(r(K, B, T, C)),
        A(r(B, T, C)),
        A(r(B, C)),
        A(r(K, C)),
        A(r(B, C)),
        O(e(B, T, C)),
        O(e(B, C)),
        O(e(B, K, C)),
    )
    calls["rwkv7_time_mix.tanh_forward"] = Call(tm.tanh_forward, Arr(r(M, F), out=True, free=(0, 1)))
    calls["rwkv7_time_mix.sigmoid_forward"] = Call(tm.sigmoid_forward, Arr(r(M, F), out=True, free=(0, 1)))
    calls["rwkv7_time_mix.activation_backward"] = Call(
        tm.activation_backward, O(r(M, F)), A(r(M, F)), Num(True)
    )
    vec = lambda: A(r(C))  # noqa: E731
    mc = lambda: A(r(M, C))  # noqa: E731
    omc = lambda: O(e(M, C))  # noqa: E731
    Hn = I(H, bad=(0, -1, 3, HUGE))
    calls["rwkv7_time_mix.time_mix_prepare_forward"] = Call(
        tm.time_mix_prepare_forward,
        mc(),
        mc(),
        O(r(M, C)),
        O(r(M, C)),
        O(r(M, C)),
        mc(),
        vec(),
        vec(),
        vec(),
        vec(),
        vec(),
        Hn,
        omc(),
        omc(),
        omc(),
        omc(),
        omc(),
        omc(),
    )
    nth = tm.num_threads()
    w_in = A(np.exp(-np.exp(r(M, C) * 0.1 - 0.5)))
    calls["rwkv7_time_mix.time_mix_prepare_backward"] = Call(
        tm.time_mix_prepare_backward,
        mc(),
        mc(),
        mc(),
        O(r(M, C)),
        O(r(M, C)),
        O(r(M, C)),
        mc(),
        mc(),
        mc(),
        mc(),
        mc(),
        mc(),
        w_in,
        A(1 / (1 + np.exp(-r(M, C)))),
        mc(),
        mc(),
        mc(),
        vec(),
        vec(),
        Hn,
        omc(),
        omc(),
        omc(),
        omc(),
        omc(),
        omc(),
        Arr(e(nth, 5, C), out=True, free=(0,)),
    )
    calls["rwkv7_time_mix.time_mix_output_forward"] = Call(
        tm.time_mix_output_forward,
        mc(),
        mc(),
        mc(),
        mc(),
        mc(),
        vec(),
        vec(),
        vec(),
        Hn,
        D(64e-5),
        omc(),
        O(e(M, H)),
        O(e(M, H)),
        O(e(M, H)),
    )
    calls["rwkv7_time_mix.time_mix_output_backward"] = Call(
        tm.time_mix_output_backward,
        mc(),
        mc(),
        mc(),
        mc(),
        mc(),
        mc(),
        vec(),
        vec(),
        vec(),
        A(r(M, H)),
        A(r(M, H, lo=0.5)),
        A(r(M, H)),
        Hn,
        omc(),
        omc(),
        omc(),
        omc(),
        omc(),
        Arr(e(nth, 3, C), out=True, free=(0,)),
    )

    chunk = 2
    nchunk = -(-T // chunk)
    shape4 = (B, T, H, Nh)
    dec = lambda: A(np.exp(-np.exp(r(*shape4) * 0.1 - 0.5)))  # noqa: E731
    kk = r(*shape4)
    kk /= np.linalg.norm(kk, axis=-1, keepdims=True)
    rr, ww, kr, vv = r(*shape4), dec(), r(*shape4), r(*shape4)
    ckpt, sa = e(B * H * nchunk * Nh * Nh), e(*shape4)
    wkv7.wkv7_forward(
        rr, ww.value, kr, vv, -kk, kk * 0.5, e(B, H, Nh, Nh), e(*shape4), e(B, H, Nh, Nh), ckpt, sa, chunk
    )
    ch = I(chunk, bad=(0, -1))
    calls["wkv7.wkv7_forward"] = Call(
        wkv7.wkv7_forward,
        A(rr),
        ww,
        A(kr),
        A(vv),
        A(-kk),
        A(kk * 0.5),
        A(r(B, H, Nh, Nh) * 0.1),
        O(e(*shape4)),
        O(e(B, H, Nh, Nh)),
        Arr(e(B * H * nchunk * Nh * Nh), out=True, legal=("dim0_zero",)),
        O(e(*shape4)),
        ch,
    )
    calls["wkv7.wkv7_backward"] = Call(
        wkv7.wkv7_backward,
        A(rr),
        ww,
        A(kr),
        A(vv),
        A(-kk),
        A(kk * 0.5),
        A(ckpt),
        A(sa),
        A(r(*shape4)),
        A(r(B, H, Nh, Nh)),
        *[O(e(*shape4)) for _ in range(6)],
        O(e(B, H, Nh, Nh)),
        ch,
    )

    # optimizer
    n = 11
    calls["adamw.adamw_step"] = Call(
        adamw.adamw_step,
        O(r(n)),
        A(r(n)),
        O(e(n)),
        O(e(n)),
        D(1e-3, bad=(-1.0,)),
        D(0.9, bad=(1.0, -0.1)),
        D(0.99, bad=(1.5,)),
        D(1e-8, bad=(0.0,)),
        D(0.01, bad=(-1.0,)),
        I(1, bad=(0, -1)),
    )
    return calls


def output_arrays(call, args):
    """The arrays a call writes (to compare a strided call with its contiguous twin)."""
    return [np.array(a.value, copy=True) for a in args if isinstance(a, Arr) and a.out]
