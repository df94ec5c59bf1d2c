"""Fuzz the primitive (numpy-backed) Tensor ops with bad input, in process: they cannot segfault,
so what is checked is that every bad input gives a clear Python error and every odd but legal
input (NaN/inf, zero-size dims, non-contiguous / negative-stride source arrays) gives numpy's
answer, never a silently different one. The fused kernels are fuzzed in a subprocess by
test_fuzz_kernels.py / test_fuzz_functional.py.
"""

import time
import warnings

import numpy as np
import pytest

import minigrad as mg

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

FUZZ = settings(
    max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
CLEAN = (TypeError, ValueError, IndexError, MemoryError, RuntimeError)
CASES = {"n": 0}

UNARY = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "abs": np.abs,
    "neg": np.negative,
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}
BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
}
REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}

# odd values: NaN, +-inf, huge, tiny, signed zeros
ODD = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e38, -1e38, 1e-45, 1.0, -2.5])


def odd_arrays(dtype, max_dims=3):
    return hnp.arrays(
        dtype,
        hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=4),
        elements=ODD.map(
            lambda v: (
                dtype(v)
                if np.isfinite(dtype(v)) or not np.isfinite(v)
                else dtype(np.sign(v) * np.finfo(dtype).max)
            )
        ),
    )


def strided(x, how):
    """The same values behind a non-contiguous or negative-stride view."""
    if how == "plain" or x.ndim == 0 or x.size == 0:
        return x
    if how == "reversed":
        return np.ascontiguousarray(x[::-1])[::-1]
    big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    big[..., ::2] = x
    return big[..., ::2]


def same_as_numpy(got, want):
    CASES["n"] += 1
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    np.testing.assert_allclose(
        got[fin], want[fin], rtol=2e-6 if got.dtype == np.float32 else 1e-12, atol=1e-37
    )


@FUZZ
@given(
    x=st.one_of(odd_arrays(np.float32), odd_arrays(np.float64)),
    name=st.sampled_from(sorted(UNARY)),
    how=st.sampled_from(["plain", "reversed", "strided"]),
)
def test_unary_ops_on_odd_values_match_numpy(x, name, how):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = UNARY[name](x.astype(np.float64)).astype(x.dtype)
        t = mg.tensor(strided(x, how), requires_grad=True)
        y = getattr(mg, name)(t)
        same_as_numpy(y.data, want)
        y.sum().backward()  # backward on NaN/inf must not raise either
    assert t.grad.shape == x.shape


@FUZZ
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=3),
    name=st.sampled_from(sorted(BINARY)),
    data=st.data(),
)
def test_binary_ops_on_odd_values_and_empty_dims_match_numpy(shapes, name, data):
    sa, sb = shapes.input_shapes
    a = data.draw(hnp.arrays(np.float64, sa, elements=ODD))
    b = data.draw(hnp.arrays(np.float64, sb, elements=ODD))
    with np.errstate(all="ignore"):
        want = BINARY[name](a, b)
        ta, tb = mg.tensor(a, requires_grad=True), mg.tensor(b, requires_grad=True)
        y = getattr(mg, name)(ta, tb)
        same_as_numpy(y.data, want)
        y.sum().backward()
    assert ta.grad.shape == sa and tb.grad.shape == sb


@FUZZ
@given(x=odd_arrays(np.float64), name=st.sampled_from(sorted(REDUCE)), data=st.data())
def test_reductions_on_odd_values_and_empty_dims_match_numpy(x, name, data):
    dim = data.draw(st.one_of(st.none(), st.integers(-x.ndim - 1, x.ndim))) if x.ndim else None
    CASES["n"] += 1
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            want = REDUCE[name](x, axis=dim)
        except (ValueError, IndexError) as e:  # empty max/min, axis out of range
            with pytest.raises(CLEAN) as info:
                getattr(mg, name)(mg.tensor(x), dim)
            assert str(info.value), e
            return
        if name in ("max", "min") and x.size == 0:  # documented: max/min of an empty tensor raise
            with pytest.raises(ValueError, match="empty"):
                getattr(mg, name)(mg.tensor(x), dim)
            return
        got = getattr(mg, name)(mg.tensor(x), dim)
        got = got[0] if isinstance(got, tuple) else got
        same_as_numpy(np.asarray(got.data), want)


@FUZZ
@given(name=st.sampled_from(sorted(BINARY) + ["matmul", "cat", "stack", "where"]))
def test_mixed_float_dtypes_raise_naming_both(name):
    a, b = mg.ones(2, 2), mg.ones(2, 2, dtype=mg.float64)
    CASES["n"] += 1
    fn = {
        "cat": lambda a, b: mg.cat([a, b]),
        "stack": lambda a, b: mg.stack([a, b]),
        "where": lambda a, b: mg.where(mg.ones(2, 2) > 0, a, b),
    }.get(name, getattr(mg, name, None))
    with pytest.raises(TypeError, match="float32.*float64|float64.*float32"):
        fn(a, b)


BAD_ARGS = [
    ("sum over a string dim", lambda x: x.sum("a")),
    ("reshape to the wrong size", lambda x: x.reshape(5, 7)),
    ("reshape with two -1", lambda x: x.reshape(-1, -1)),
    ("transpose of a missing dim", lambda x: x.transpose(0, 5)),
    ("permute of the wrong length", lambda x: x.permute(0)),
    ("index out of range", lambda x: x[10]),
    ("negative index out of range", lambda x: x[-10]),
    ("float index", lambda x: x[1.5]),
    ("index by None-list", lambda x: x[[None]]),
    ("matmul shape mismatch", lambda x: x @ mg.ones(5, 2)),
    ("matmul with a list", lambda x: x @ [[1.0]]),
    ("cat of mismatched shapes", lambda x: mg.cat([x, mg.ones(3, 2)])),
    ("cat along a missing dim", lambda x: mg.cat([x, x], dim=4)),
    ("stack of different shapes", lambda x: mg.stack([x, mg.ones(2, 2)])),
    ("split into zero-size sections", lambda x: x.split(0)),
    ("expand to a smaller size", lambda x: x.expand(1, 4)),
    ("requires_grad on an int tensor", lambda x: mg.tensor([1, 2], requires_grad=True)),
    ("string tensor", lambda x: mg.tensor(["a", "b"])),
    ("object tensor", lambda x: mg.tensor([None, 1.0])),
    ("float16 tensor", lambda x: mg.tensor(np.ones(2, np.float16))),
    ("embedding id out of range", lambda x: mg.embedding(np.array([4]), x)),
    ("embedding negative id", lambda x: mg.embedding(np.array([-1]), x)),
    ("embedding float ids", lambda x: mg.embedding(np.array([0.5]), x)),
    ("backward of a non-scalar", lambda x: (x * 2).backward()),
    ("backward with a wrong-shape grad", lambda x: (x * 2).backward(mg.ones(4))),
    ("item of a vector", lambda x: x.item()),
    ("pad with a negative width", lambda x: mg.pad(x, (-5, 0))),
    ("clamp with a tensor of another dtype", lambda x: mg.clamp(x, mg.zeros(2, 3, dtype=mg.float64))),
    ("SGD with a wrong-shape grad", lambda x: _step_with(mg.optim.SGD, x, mg.ones(3))),
    ("AdamW with a float64 grad", lambda x: _step_with(mg.optim.AdamW, x, mg.ones(2, 3, dtype=mg.float64))),
    ("AdamW with an int grad", lambda x: _step_with(mg.optim.AdamW, x, mg.tensor(np.ones((2, 3), np.int64)))),
    ("AdamW with a NaN learning rate", lambda x: mg.optim.AdamW([x], lr=float("nan"))),
    ("SGD with a negative learning rate", lambda x: mg.optim.SGD([x], lr=-1.0)),
]


def _step_with(opt_cls, param, grad):
    opt = opt_cls([param], lr=0.1)
    param.grad = grad
    opt.step()


@pytest.mark.parametrize("what, fn", BAD_ARGS, ids=[w for w, _ in BAD_ARGS])
def test_bad_arguments_raise_a_clear_error(what, fn):
    x = mg.randn(2, 3, requires_grad=True)
    CASES["n"] += 1
    with pytest.raises(CLEAN) as info:
        fn(x)
    assert str(info.value).strip(), what


HUGE = [
    ("zeros", lambda: mg.zeros(1 << 40)),
    ("ones", lambda: mg.ones(1 << 20, 1 << 20)),
    ("randn", lambda: mg.randn(1 << 40)),
    ("full", lambda: mg.full((1 << 21, 1 << 21), 1.0)),
    ("arange", lambda: mg.arange(1 << 60)),
    ("expand then copy", lambda: mg.ones(1, 1).expand(1 << 20, 1 << 20) * 2),
    ("outer product", lambda: mg.ones(1 << 20, 1) * mg.ones(1, 1 << 20)),
    ("matmul", lambda: mg.ones(1 << 20, 1) @ mg.ones(1, 1 << 20)),
    ("negative size", lambda: mg.zeros(-1)),
    (
        "GPT config",
        lambda: mg.models.gpt.GPT(
            mg.models.gpt.GPTConfig(vocab_size=1 << 40, d_model=1 << 12, n_layer=1, n_head=1)
        ),
    ),
]


@pytest.mark.parametrize("what, fn", HUGE, ids=[w for w, _ in HUGE])
def test_huge_sizes_fail_fast_with_memory_or_value_error(what, fn):
    import minigrad.models.gpt  # noqa: F401  (mg.models.gpt for the GPT case)

    CASES["n"] += 1
    t0 = time.perf_counter()
    with pytest.raises((MemoryError, ValueError)):
        fn()
    assert time.perf_counter() - t0 < 5, f"{what}: took {time.perf_counter() - t0:.1f} s to fail"


def test_report_case_count():
    print(f"\nfuzz ops: {CASES['n']} cases")
