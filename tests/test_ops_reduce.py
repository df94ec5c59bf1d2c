"""Reductions and the softmax family: forward vs numpy, gradcheck over dims/keepdim/shapes, edge cases."""
import numpy as np
import pytest
from op_helpers import check_op, fp32_matches_fp64, leaf, randn

import minigrad as mg

# (shape, dim) cases: all dims, one dim, negative dim, several dims, size-1 dims, 0-d
CASES = [((3, 4), None), ((3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), (0, 2)), ((1, 5, 1), 1), ((), None),
         ((4,), 0), ((2, 1, 3), (1,))]


def _np_logsumexp(x, axis, keepdims):
    m = np.max(x, axis=axis, keepdims=True)
    y = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return y if keepdims else np.squeeze(y, axis=axis) if axis is not None else y.reshape(())


def _np_var(x, axis, keepdims, ddof=1):
    return np.var(x, axis=axis, keepdims=keepdims, ddof=ddof)


def _var_ddof(ddof):
    return lambda x, axis, keepdims: _np_var(x, axis, keepdims, ddof)


def _std(x, axis, keepdims):
    return np.sqrt(_np_var(x, axis, keepdims))


REDUCTIONS = {
    "sum": (lambda x, d, k: x.sum(d, keepdim=k), np.sum),
    "mean": (lambda x, d, k: x.mean(dim=d, keepdim=k), np.mean),
    "max": (lambda x, d, k: x.amax(d, keepdim=k), np.max),
    "min": (lambda x, d, k: x.min(axis=d, keepdims=k), np.min),
    "logsumexp": (lambda x, d, k: x.logsumexp(d, keepdim=k), _np_logsumexp),
    "var": (lambda x, d, k: x.var(d, keepdim=k), _np_var),
    "var_biased": (lambda x, d, k: x.var(d, keepdim=k, unbiased=False), _var_ddof(0)),
    "var_corr2": (lambda x, d, k: x.var(d, correction=2, keepdim=k), _var_ddof(2)),
    "std": (lambda x, d, k: x.std(d, keepdim=k), _std),
}


def _np_axis(dim):
    return tuple(dim) if isinstance(dim, (tuple, list)) else dim


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_forward_and_gradcheck(name, case, keepdim):
    shape, dim = case
    op, ref = REDUCTIONS[name]
    x = randn(*shape, seed=len(name))
    if name.startswith(("var", "std")):
        n = x.size if dim is None else int(np.prod([x.shape[d] for d in np.atleast_1d(dim)]))
        if n <= (2 if name == "var_corr2" else 0 if name == "var_biased" else 1):
            pytest.skip("N - correction <= 0 (tested separately)")
    axis = _np_axis(dim) if shape else None
    check_op("reduce", lambda t: op(t, dim, keepdim), x,
             ref=lambda v: np.asarray(ref(v, axis=axis, keepdims=keepdim)))


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_fp32(name):
    op, _ = REDUCTIONS[name]
    fp32_matches_fp64(lambda t: op(t, 1, False), randn(3, 5, seed=2))


def test_max_min_split_ties_evenly():
    x = leaf(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]))
    x.amax(1).sum().backward()
    np.testing.assert_allclose(x.grad.data, [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    y = leaf(np.array([4.0, -1.0, -1.0]))
    (y.min() * 2).backward()
    np.testing.assert_allclose(y.grad.data, [0, 1, 1])


def test_max_over_a_dim_returns_values_and_indices_like_torch():
    # audit: x.max(1) returned the values only, so `v, i = x.max(1)` unpacked rows silently
    x = leaf(np.array([[1.0, 5.0, 5.0], [7.0, 0.0, 3.0]]))
    v, i = x.max(1)
    assert np.array_equal(v.data, [5.0, 7.0]) and np.array_equal(i.data, [1, 0]) and i.dtype == np.int64
    (v * mg.tensor(np.array([1.0, 2.0]))).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [[0, 1, 0], [2, 0, 0]])    # the picked index only
    assert x.min(dim=0, keepdim=True).indices.shape == (1, 3)
    assert np.array_equal(mg.max(x, -1).indices.data, [1, 0]) and mg.max(x).item() == 7.0
    assert np.array_equal(x.max(axis=1).data, [5.0, 7.0])                # numpy spelling: values
    assert mg.tensor(3.0).max(0).indices.item() == 0
    with pytest.raises(TypeError, match="max: dim must be an int"):
        x.max((0, 1))
    with pytest.raises(ValueError, match="size 0"):
        mg.tensor(np.zeros((2, 0))).max(1)
    x = randn(3, 4, seed=9)
    check_op("reduce", lambda t: t.max(0).values * t.min(1, keepdim=True).values, x,
             ref=lambda a: a.max(0) * a.min(1, keepdims=True))


def test_var_correction_matches_torch_convention():
    x = randn(4, 6, seed=3)
    t = leaf(x)
    np.testing.assert_allclose(t.var().item(), np.var(x, ddof=1))
    np.testing.assert_allclose(t.var(correction=0).data, np.var(x))
    np.testing.assert_allclose(t.var(1, unbiased=True).data, np.var(x, axis=1, ddof=1))
    with pytest.raises(TypeError):
        t.var(correction=1, unbiased=True)
    with np.errstate(all="ignore"):
        assert not np.isfinite(leaf(np.array([1.0])).var().item())   # N - correction = 0, as torch


def test_std_of_a_constant_slice_has_zero_gradient_like_torch():
    # audit: std was sqrt(var), whose backward divided 0 by 0 and gave nan
    x = np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 5.0]])
    t = leaf(x)
    t.std(1).sum().backward()
    assert np.array_equal(t.grad.data[0], [0.0, 0.0, 0.0])
    d = x[1] - x[1].mean()
    np.testing.assert_allclose(t.grad.data[1], d / (2 * np.std(x[1], ddof=1)))
    with pytest.raises(TypeError, match="std: pass correction or unbiased"):
        t.std(correction=1, unbiased=True)
    with np.errstate(all="ignore"):
        one = leaf(np.array([3.0]))
        one.std().backward()                   # N - correction = 0: nan both ways, as torch
        assert np.isnan(one.grad.data).all()


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,dim", [((3, 5), -1), ((3, 5), 0), ((2, 3, 4), 1), ((1, 1), -1), ((6,), 0),
                                       ((), -1)], ids=str)
def test_softmax_family(shape, dim):
    x = randn(*shape, seed=4)
    axis = dim if shape else None
    check_op("softmax", lambda t: t.softmax(dim), x, ref=lambda v: _np_softmax(v, axis))
    check_op("softmax", lambda t: t.log_softmax(dim), x, ref=lambda v: np.log(_np_softmax(v, axis)))
    check_op("softmax", lambda t: mg.softmax(t * t, dim), x)   # reused input through a softmax


def test_softmax_family_fp32():
    fp32_matches_fp64(lambda t: t.softmax(-1) * t.log_softmax(-1), randn(4, 7, seed=5))


def test_softmax_logsumexp_are_stable():
    x = leaf(np.array([[1000.0, 1001.0, -1000.0], [-np.inf, 0.0, -np.inf]]))
    s = x.softmax(-1)
    ls = x.log_softmax(-1)
    lse = x.logsumexp(-1)
    assert np.isfinite(s.data).all()
    np.testing.assert_allclose(s.data.sum(-1), 1.0)
    np.testing.assert_allclose(lse.data, [1001 + np.log1p(np.exp(-1.0)), 0.0])
    c = np.log1p(np.exp(-1.0))
    np.testing.assert_allclose(ls.data[0], [-c - 1, -c, -2001 - c])
    all_neg_inf = leaf(np.full((2,), -np.inf)).logsumexp()
    assert all_neg_inf.item() == -np.inf


def test_argmax_argmin():
    x = mg.tensor([[1.0, 5.0, 5.0], [7.0, 0.0, 2.0]])
    np.testing.assert_array_equal(x.argmax(1).data, [1, 0])
    np.testing.assert_array_equal(x.argmin(dim=0).data, [0, 1, 1])
    assert x.argmax().item() == 3
    assert x.argmax(1, keepdim=True).shape == (2, 1)
    assert not x.argmax().requires_grad


def test_reduction_dim_errors_name_op_and_shape():
    x = mg.ones(2, 3)
    with pytest.raises(IndexError, match=r"sum: dim 2 is out of range for shape \(2, 3\)"):
        x.sum(2)
    with pytest.raises(ValueError, match=r"mean: dim \(1, -1\) repeats"):
        x.mean((1, -1))
    with pytest.raises(IndexError, match="softmax: dim -3"):
        x.softmax(-3)
    with pytest.raises(ValueError, match=r"max: cannot reduce dim 0 of size 0 \(shape \(0,\)\)"):
        mg.zeros(0).max()


def test_against_torch():
    torch = pytest.importorskip("torch")
    x = randn(3, 4, 5, seed=6)
    g = randn(3, 5, seed=7)
    for name, fn, tfn in [
        ("var", lambda t: t.var(1), lambda t: t.var(1)),
        ("std", lambda t: t.std(1, correction=0), lambda t: t.std(1, correction=0)),
        ("logsumexp", lambda t: t.logsumexp(1), lambda t: t.logsumexp(1)),
        ("log_softmax", lambda t: t.log_softmax(1).sum(1).unsqueeze(1).expand(3, 2, 5).mean(1),
         lambda t: t.log_softmax(1).sum(1).unsqueeze(1).expand(3, 2, 5).mean(1)),
        ("softmax", lambda t: (t.softmax(1) * t).sum(1), lambda t: (t.softmax(1) * t).sum(1)),
        ("amax", lambda t: t.amax(1), lambda t: t.amax(1)),
        ("max(dim)", lambda t: t.max(1).values, lambda t: t.max(1).values),
        ("min(dim)", lambda t: t.min(1, keepdim=True).values.squeeze(1),
         lambda t: t.min(1, keepdim=True).values.squeeze(1)),
    ]:
        a = leaf(x)
        y = fn(a)
        y.backward(mg.tensor(g, dtype=mg.float64))
        b = torch.tensor(x, requires_grad=True)
        ty = tfn(b)
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(a.grad.data, b.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_max_min_gradient_goes_to_the_nan():
    # the NaN is the selected element (PyTorch's max() / min()): gradient 1 there, 0 elsewhere,
    # not NaN everywhere; several NaNs share it evenly
    for op in ("max", "min", "amax", "amin"):
        x = mg.tensor([1.0, float("nan"), 3.0], requires_grad=True)
        getattr(x, op)().backward()
        assert x.grad.tolist() == [0.0, 1.0, 0.0], op
    x = mg.tensor([[1.0, float("nan"), float("nan")], [1.0, 5.0, 2.0]], requires_grad=True)
    x.amax(1).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.0, 1.0, 0.0]]


def test_empty_dim_sequence_reduces_every_dim():
    x = mg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.sum(dim=()).shape == () and x.sum(dim=()).item() == 10.0
    assert x.mean(dim=[]).item() == 2.5
    assert x.amax(()).item() == 4.0 and x.amin([]).item() == 1.0
    assert x.sum((), keepdim=True).shape == (1, 1)


def test_reductions_over_empty_tensors():
    x = mg.zeros(0, 3, requires_grad=True)
    assert x.amax(1).shape == (0,) and x.amin(1, keepdim=True).shape == (0, 1)
    for op in ("softmax", "log_softmax"):
        for dim in (0, 1):
            y = getattr(x, op)(dim)
            assert y.shape == (0, 3)
            y.sum().backward()
    assert x.grad.shape == (0, 3)
    assert x.logsumexp(0).tolist() == [float("-inf")] * 3
    with pytest.raises(ValueError, match=r"max: cannot reduce dim 0 of size 0 \(shape \(0, 3\)\)"):
        mg.amax(x, 0)


def test_float32_sum_and_mean_over_leading_dims_accumulate_in_float64():
    # 2^24 then ones: added one row at a time in float32 every +1 rounds away
    a = np.ones((1001, 2, 3), np.float32)
    a[0] = 2.0 ** 24
    exact = 2.0 ** 24 + 1000
    x = mg.tensor(a)
    for dims in [0, (0, 1), (0, 2)]:
        n = 1001 * (2 if dims == (0, 1) else 3 if dims == (0, 2) else 1)
        s, m = x.sum(dims), x.mean(dims)
        assert s.dtype == m.dtype == mg.float32
        np.testing.assert_array_equal(s.data, exact * n / 1001)
        np.testing.assert_allclose(m.data, exact / 1001, rtol=1e-7)
    np.testing.assert_allclose(x.sum().data, exact * 6, rtol=1e-6)    # contiguous: float32 pairwise


def test_log_softmax_keeps_small_differences_under_a_large_offset():
    x = mg.tensor(np.array([[0.0, 1.0, 2.0, 3.0]]) + 1e6, dtype=mg.float32, requires_grad=True)
    ref = np.array([0.0, 1.0, 2.0, 3.0])
    ref = ref - ref.max() - np.log(np.exp(ref - ref.max()).sum())
    y = x.log_softmax(-1)
    np.testing.assert_allclose(y.data[0], ref, rtol=1e-6)
    g = np.array([[1.0, -2.0, 0.5, 3.0]], np.float32)
    y.backward(mg.tensor(g))
    np.testing.assert_allclose(x.grad.data, g - np.exp(ref) * g.sum(), rtol=1e-5, atol=1e-6)
