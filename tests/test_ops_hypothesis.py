"""Property tests (hypothesis): broadcasting binary ops, indexing and reductions agree with numpy."""
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402
from op_helpers import leaf  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad.autograd import gradcheck  # noqa: E402

FAST = settings(max_examples=50, deadline=None)
OPS = {"add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
       "mul": (lambda a, b: a * b, np.multiply), "div": (lambda a, b: a / b, np.divide),
       "maximum": (mg.maximum, np.maximum), "where": (None, None)}


def _values(shape, seed):
    return np.random.default_rng(seed).uniform(0.5, 2.0, shape) * np.where(
        np.random.default_rng(seed + 1).random(shape) < 0.5, -1, 1)


def _sum_to(g, shape):
    """Reference unbroadcast: sum g down to `shape`."""
    while g.ndim > len(shape):
        g = g.sum(0)
    return g.sum(axis=tuple(i for i, s in enumerate(shape) if s == 1), keepdims=True)


@FAST
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3),
       name=st.sampled_from(["add", "sub", "mul", "div", "maximum"]), seed=st.integers(0, 2 ** 16))
def test_binary_broadcasting_matches_numpy(shapes, name, seed):
    (sa, sb), out_shape = shapes.input_shapes, shapes.result_shape
    op, ref = OPS[name]
    a, b = _values(sa, seed), _values(sb, seed + 7)
    ta, tb = leaf(a), leaf(b)
    out = op(ta, tb)
    assert out.shape == out_shape
    np.testing.assert_allclose(out.data, ref(a, b), rtol=1e-14)
    g = np.random.default_rng(seed).standard_normal(out_shape)
    out.backward(mg.tensor(g, dtype=mg.float64))
    assert ta.grad.shape == sa and tb.grad.shape == sb
    if name in ("add", "sub", "mul"):
        da = {"add": g, "sub": g, "mul": g * b}[name]
        db = {"add": g, "sub": -g, "mul": g * a}[name]
        np.testing.assert_allclose(ta.grad.data, _sum_to(np.broadcast_to(da, out_shape), sa), rtol=1e-12)
        np.testing.assert_allclose(tb.grad.data, _sum_to(np.broadcast_to(db, out_shape), sb), rtol=1e-12)
    else:
        assert gradcheck(op, [leaf(a), leaf(b)])


@FAST
@given(sa=hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
       sb=hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
def test_non_broadcastable_shapes_raise_naming_both(sa, sb):
    try:
        np.broadcast_shapes(sa, sb)
    except ValueError:
        with pytest.raises(ValueError, match=r"add: \(.*\) \+ \(.*\): shapes cannot be broadcast"):
            mg.zeros(*sa) + mg.zeros(*sb)
    else:
        assert (mg.zeros(*sa) + mg.zeros(*sb)).shape == np.broadcast_shapes(sa, sb)


@st.composite
def _shape_and_basic_index(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4))
    index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return shape, index


def _check_index(shape, index, seed):
    x = _values(shape, seed)
    t = leaf(x)
    out = t[index]
    expected = x[index]
    assert out.shape == np.shape(expected)
    np.testing.assert_array_equal(out.data, expected)
    g = np.random.default_rng(seed).standard_normal(out.shape)
    out.backward(mg.tensor(g, dtype=mg.float64))
    ref = np.zeros(shape)
    np.add.at(ref, index, g)
    np.testing.assert_allclose(t.grad.data, ref, rtol=1e-13, atol=1e-13)


@FAST
@given(case=_shape_and_basic_index(), seed=st.integers(0, 2 ** 16))
def test_basic_indexing_matches_numpy(case, seed):
    _check_index(*case, seed)


@st.composite
def _shape_and_advanced_index(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    n = shape[0]
    kind = draw(st.sampled_from(["ints", "ints_then_slice", "mask", "two_arrays"]))
    ids = hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=5),
                     elements=st.integers(-n, n - 1))
    if kind == "ints" or (kind != "mask" and len(shape) < 2):
        return shape, draw(ids)
    if kind == "ints_then_slice":
        return shape, (draw(ids), slice(None, None, draw(st.sampled_from([1, -1, 2]))))
    if kind == "mask":
        return shape, draw(hnp.arrays(np.bool_, shape[:draw(st.integers(1, len(shape)))]))
    m = shape[1]
    size = draw(st.integers(1, 5))
    first = draw(hnp.arrays(np.int64, (size,), elements=st.integers(-n, n - 1)))
    second = draw(hnp.arrays(np.int64, (size,), elements=st.integers(-m, m - 1)))
    return shape, (first, second)


@FAST
@given(case=_shape_and_advanced_index(), seed=st.integers(0, 2 ** 16))
def test_advanced_indexing_scatter_adds_repeats(case, seed):
    _check_index(*case, seed)


@FAST
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=4), data=st.data())
def test_reductions_over_random_dims(shape, data):
    dims = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), unique_by=lambda d: d % len(shape),
                              max_size=len(shape)))
    keepdim = data.draw(st.booleans())
    x = _values(shape, 3)
    t = leaf(x)
    dim = tuple(dims) if dims else None
    out = t.sum(dim, keepdim=keepdim) + t.mean(dim, keepdim=keepdim)
    axis = tuple(d % len(shape) for d in dims) if dims else None
    np.testing.assert_allclose(out.data, x.sum(axis, keepdims=keepdim) + x.mean(axis, keepdims=keepdim),
                               rtol=1e-13)
    out.sum().backward()
    n = x.size if axis is None else int(np.prod([shape[d] for d in axis]))
    np.testing.assert_allclose(t.grad.data, np.full(shape, 1 + 1 / n), rtol=1e-13)


@FAST
@given(batch=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3),
       mkn=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)),
       vector=st.sampled_from(["none", "left", "right", "both"]), seed=st.integers(0, 2 ** 16))
def test_matmul_shapes_match_numpy_and_gradcheck(batch, mkn, vector, seed):
    m, k, n = mkn
    sa, sb = batch.input_shapes
    sa = (k,) if vector in ("left", "both") else sa + (m, k)
    sb = (k,) if vector in ("right", "both") else sb + (k, n)
    a, b = _values(sa, seed), _values(sb, seed + 3)
    out = leaf(a) @ leaf(b)
    np.testing.assert_allclose(out.data, np.matmul(a, b), rtol=1e-13)
    assert gradcheck(lambda x, y: x @ y, [leaf(a), leaf(b)])
