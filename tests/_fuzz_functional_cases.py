"""Fuzz cases for the public fused ops (F.*), linear/embedding and the two models' forward.

Run in a subprocess by tests/_fuzz_worker.py ("functional" group). Every argument of a valid
call is mutated in turn (see the worker for the mutation list); a mutated call runs forward and,
when it succeeds, backward too, so the backward kernels see the same bad-but-accepted inputs.
Tensor-level extras: a float64 tensor among float32 ones (must raise: no silent upcasts), an
int tensor where floats belong, a raw numpy array instead of a Tensor (accepted), a Tensor built
from a non-contiguous / negative-stride array (same result as the contiguous one).
"""

import os

import numpy as np
from _fuzz_kernel_cases import Arr, Num
from _fuzz_worker import array_mutations, combined_kind, fresh, num_mutations

import minigrad as mg
from minigrad import functional as F
from minigrad.ops.linear import linear
from minigrad.ops.rwkv7 import TIME_MIX_PARAMS

HUGE = 1 << 62
CONVERTED = ("int32", "list", "noncontig_first", "noncontig_last", "negstride")  # ids: copied to int64


def Ids(value, high, free=(), legal=()):
    """Token ids / targets: any int dtype, list or strides are converted (same result expected)."""
    return Arr(value, high=high, free=free, legal=tuple(legal) + CONVERTED)


class TArr(Arr):
    """An array argument passed as a Tensor (requires_grad when it is float)."""


def _wrap(a):
    v = a.value
    if isinstance(a, TArr) and isinstance(v, np.ndarray) and v.dtype.kind in "fiub":
        return mg.Tensor(v, requires_grad=v.dtype.kind == "f")
    return v


class FCall:
    def __init__(self, fn, *args):
        self.fn, self.args = fn, list(args)

    def run(self, args=None):
        vals = [_wrap(a) for a in (args or self.args)]
        outs = self.fn(*vals)
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        outs = [o for o in outs if isinstance(o, mg.Tensor)]
        results = [np.array(o.data) for o in outs]
        diff = [o for o in outs if o.requires_grad]
        if diff:
            rng = np.random.default_rng(0)
            total = None
            for o in diff:
                term = (o * mg.Tensor(rng.standard_normal(o.shape).astype(o.dtype))).sum()
                total = term if total is None else total + term
            total.backward()
            results += [
                np.array(v.grad.data) for v in vals if isinstance(v, mg.Tensor) and v.grad is not None
            ]
        return results


def functional_calls(dt, seed=0):
    rng = np.random.default_rng(seed)

    def r(*shape, lo=None):
        x = rng.standard_normal(shape).astype(dt)
        return np.abs(x) + lo if lo is not None else x

    T_ = lambda x, free=(), legal=(): TArr(x, free=free, legal=legal)  # noqa: E731
    RANK = ("rank_plus_1", "rank_minus_1")  # ops over the last dim take any leading dims
    ALONE = ("other_float",)  # the only float input: float64 alone is fine
    NONE = ("none",)  # an optional argument
    calls = {}
    N, C, V = 3, 8, 11
    calls["F.rms_norm"] = FCall(
        F.rms_norm,
        T_(r(2, N, C), free=(0, 1), legal=RANK),
        T_(r(C)),
        Num(1e-5, bad=(-1.0, float("nan"), float("inf"))),
    )
    calls["F.layer_norm"] = FCall(
        F.layer_norm,
        T_(r(2, N, C), free=(0, 1), legal=RANK),
        T_(r(C)),
        T_(r(C)),
        Num(1e-5, bad=(0.0, -1.0, float("nan"))),
    )
    calls["F.swiglu"] = FCall(F.swiglu, T_(r(N, C)), T_(r(N, C)))
    # torch's positional order: input, target, weight, size_average, ignore_index, reduce, reduction,
    # label_smoothing
    calls["F.cross_entropy"] = FCall(
        F.cross_entropy,
        T_(r(N, V), free=(1,), legal=ALONE),
        Ids(np.asarray(rng.integers(0, V, N), np.int64), V),
        Num(None),
        Num(None, bad=(True,)),
        Num(-100, odd=(-1, HUGE)),
        Num(None, bad=(False,)),
        Num("mean", bad=("avg", None)),
        Num(0.0, bad=(-0.1, 1.5, float("nan"), float("inf")), odd=(1.0,)),
    )
    K = 2          # K-dim logits (N, V, K), class weights and label smoothing
    calls["F.cross_entropy[weight,smoothing]"] = FCall(
        F.cross_entropy,
        T_(r(N, V, K), free=(1,), legal=ALONE),
        Ids(np.asarray(rng.integers(0, V, (N, K)), np.int64), V),
        T_(r(V, lo=0.5), legal=NONE),
        Num(None),
        Num(-100, odd=(-1, HUGE)),
        Num(None),
        Num("sum", bad=("avg", None)),
        Num(0.1, bad=(-0.1, 1.5, float("nan")), odd=(0.0, 1.0)),
    )
    probs = np.abs(r(N, V)) + 0.1
    calls["F.cross_entropy[probabilities]"] = FCall(
        F.cross_entropy,
        T_(r(N, V), free=(1,), legal=ALONE),
        T_(probs / probs.sum(1, keepdims=True), legal=("list",)),
        T_(r(V, lo=0.5), legal=NONE),
        Num(None),
        Num(-100, bad=(0,)),
        Num(None),
        Num("mean", bad=("avg", None)),
        Num(0.2, bad=(-0.1, 1.5), odd=(0.0, 1.0)),
    )
    B, H, T, hd = 2, 4, 5, 6
    calls["F.rope"] = FCall(
        F.rope,
        T_(r(B, H, T, hd), free=(0, 1, 2), legal=ALONE + ("dim3_zero",)),   # hd 0: empty, and its grad
        Num(0, bad=(-1, 1.5), odd=(1000,)),
        Num(10000.0, bad=(0.0, -1.0, float("nan"))),
        Num(False),
        Num("bhtd", bad=("hbtd",)),
    )
    calls["F.causal_attention"] = FCall(
        F.causal_attention,
        T_(r(B, H, T, hd), free=(0,), legal=("dim1_zero",)),   # no query heads: empty, as torch
        T_(r(B, 2, T, hd)),
        T_(r(B, 2, T, hd)),
        Num(None, bad=(float("nan"),), odd=(0.0, 1e30)),
        Num("bhtd", bad=("x",)),
    )
    Hh, Nn = 2, 4
    shape4 = (B, T, Hh, Nn)
    kk = r(*shape4)
    kk /= np.linalg.norm(kk, axis=-1, keepdims=True)
    calls["F.wkv7"] = FCall(
        lambda *a: F.wkv7(*a),
        T_(r(*shape4)),
        T_(np.exp(-np.exp(r(*shape4) * 0.1 - 0.5))),
        T_(r(*shape4)),
        T_(r(*shape4)),
        T_(-kk),
        T_(kk * 0.5),
        T_(r(B, Hh, Nn, Nn) * 0.1, legal=NONE),
        Num(2, bad=(0, -1), odd=(1, 1000, HUGE)),
    )
    C2 = Hh * Nn
    D = 3

    def tm(x, shift, wkv, vfirst, *rest):
        params = dict(zip(TIME_MIX_PARAMS, rest[:-1]))
        return F.rwkv7_time_mix(x, params, shift, wkv, vfirst, layer_id=rest[-1], head_size=Nn)

    shapes = {
        "w1": (C2, D),
        "a1": (C2, D),
        "v1": (C2, D),
        "g1": (C2, D),
        "w2": (D, C2),
        "a2": (D, C2),
        "v2": (D, C2),
        "g2": (D, C2),
        "r_k": (Hh, Nn),
        "receptance.weight": (C2, C2),
        "key.weight": (C2, C2),
        "value.weight": (C2, C2),
        "output.weight": (C2, C2),
        "ln_x.weight": (C2,),
        "ln_x.bias": (C2,),
    }
    params = [T_(r(*shapes.get(n, (1, 1, C2))) * 0.3) for n in TIME_MIX_PARAMS]
    calls["F.rwkv7_time_mix"] = FCall(
        tm,
        T_(r(B, T, C2), free=(0, 1)),
        T_(r(B, C2), legal=NONE),
        T_(r(B, Hh, Nn, Nn) * 0.1, legal=NONE),
        T_(r(B, T, C2)),
        *params,
        Num(1, bad=(-1,), odd=(0,)),
    )
    calls["F.rwkv7_channel_mix"] = FCall(
        F.rwkv7_channel_mix,
        T_(r(B, T, C2), free=(0, 1)),
        T_(r(B, C2), legal=NONE),
        T_(r(1, 1, C2)),
        T_(r(16, C2)),
        T_(r(C2, 16)),
    )
    calls["linear"] = FCall(
        linear, T_(r(N, C), free=(0,), legal=RANK), T_(r(5, C), free=(0,)), T_(r(5), legal=NONE)
    )
    # ids of any shape; an int weight is a plain lookup table (documented, allowed)
    calls["embedding"] = FCall(
        lambda ids, w: mg.embedding(ids, w),
        Ids(np.asarray(rng.integers(0, V, (2, 3))), V, free=(0, 1), legal=RANK),
        T_(r(V, C), free=(0, 1), legal=ALONE + ("int64", "requires_grad_int")),
    )
    return calls


def model_calls(dt):
    """GPT and RWKV-7 forward with bad token ids (ints only: the models take ids, not floats)."""
    from minigrad.models.gpt import GPT, GPTConfig
    from minigrad.models.rwkv7 import RWKV7
    from minigrad.models.rwkv7_init import RWKV7Config

    mg.manual_seed(0)
    V = 13
    gpt = GPT(GPTConfig(vocab_size=V, d_model=16, n_layer=1, n_head=2, max_seq_len=8), dtype=dt)
    rwkv = RWKV7(RWKV7Config(vocab_size=V, d_model=16, n_layer=2, head_size=8), dtype=dt, seed=0)
    ids = np.random.default_rng(0).integers(0, V, (2, 5))
    return {
        "GPT.forward": FCall(gpt, Ids(ids, V, free=(0, 1))),
        "RWKV7.forward": FCall(rwkv, Ids(ids, V, free=(0, 1))),
    }


def _tensor_mutations(arg):
    """Extra Tensor-level cases: a raw numpy array in place of the Tensor is accepted."""
    if not isinstance(arg, TArr) or arg.value.dtype.kind != "f":
        return []
    x = arg.value
    return [
        ("raw_numpy", "nocrash", lambda: Arr(x)),
        (
            "requires_grad_int",
            "nocrash" if "requires_grad_int" in arg.legal else "raise",
            lambda: x.astype(np.int64),
        ),
    ]


def functional_cases(runner, max_examples):
    from _fuzz_worker import _same
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    all_calls = {}
    for dt in (np.float32, np.float64):
        calls = {**functional_calls(dt), **model_calls(dt)}
        only = os.environ.get("FUZZ_ONLY")
        for name, call in calls.items():
            if only and name != only:
                continue
            all_calls[(name, dt)] = call
            tag = f"{name}[{np.dtype(dt).name}]"
            base = fresh(call.args)
            runner.start(f"{tag} valid")
            try:
                reference = call.run(base)
            except Exception as e:  # noqa: BLE001
                runner.fail(f"{tag} valid", f"the valid call raised {type(e).__name__}: {e}")
                continue
            for i, arg in enumerate(call.args):
                if isinstance(arg, Arr):
                    muts = array_mutations(arg)
                    if isinstance(arg, TArr):
                        # a Tensor copies a strided array into C order: same result expected
                        muts = [
                            (
                                n,
                                "same"
                                if n.startswith(("noncontig", "negstride"))
                                else "nocrash"
                                if n == "overlapping_strides"
                                else k,
                                f,
                            )
                            for n, k, f in muts
                        ]
                        muts = [(n, k, f) for n, k, f in muts if n != "readonly"]
                else:
                    muts = num_mutations(arg)
                for mname, kind, make in muts + [(n, k, f) for n, k, f in _tensor_mutations(arg)]:
                    args = fresh(call.args)
                    value = make()
                    if isinstance(value, Arr):  # raw numpy instead of a Tensor
                        args[i] = value
                    else:
                        args[i].value = value
                    thunk = lambda args=args, call=call: call.run(args)  # noqa: E731
                    runner.check(f"{tag} arg{i} {mname}", kind, thunk, reference, _same)

    keys = sorted(all_calls, key=lambda k: (k[0], np.dtype(k[1]).name))

    @settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def run(data):
        key = data.draw(st.sampled_from(keys))
        call = all_calls[key]
        args = fresh(call.args)
        picked = data.draw(st.lists(st.integers(0, len(args) - 1), min_size=1, max_size=2, unique=True))
        kinds, labels = [], []
        for i in picked:
            arg = args[i]
            muts = array_mutations(arg) if isinstance(arg, Arr) else num_mutations(arg)
            if isinstance(arg, TArr):
                muts = [
                    (
                        n,
                        "nocrash"
                        if k == "same" or n.startswith(("noncontig", "negstride", "overlapping"))
                        else k,
                        f,
                    )
                    for n, k, f in muts
                    if n != "readonly"
                ]
            if not muts:
                continue
            mname, kind, make = data.draw(st.sampled_from(muts))
            arg.value = make()
            kinds.append(kind)
            labels.append(f"arg{i} {mname}")
        if kinds:
            kind = combined_kind(kinds, labels)
            runner.check(
                f"hyp {key[0]}[{np.dtype(key[1]).name}] " + " + ".join(labels), kind, lambda: call.run(args)
            )

    run()
