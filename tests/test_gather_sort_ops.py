"""gather, cumsum, sort / argsort, repeat, unbind, norm: forward and gradients against torch, gradcheck."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck

torch = pytest.importorskip("torch")


def _outs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _check(mg_fn, torch_fn, x, grad=True):
    """Forward values (and int outputs exactly) against torch; for grad=True the gradient of a random
    linear loss of the float outputs against torch's, and gradcheck in fp64."""
    xm = mg.tensor(x, dtype=mg.float64, requires_grad=grad)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=grad)
    outs_m, outs_t = _outs(mg_fn(xm)), _outs(torch_fn(xt))
    assert len(outs_m) == len(outs_t)
    for om, ot in zip(outs_m, outs_t):
        assert tuple(om.shape) == tuple(ot.shape)
        np.testing.assert_allclose(om.numpy(), ot.detach().numpy(), rtol=1e-12, atol=1e-12)
    if not grad:
        return
    rng = np.random.default_rng(1)
    cots = [rng.standard_normal(tuple(o.shape)) for o in outs_t if o.dtype == torch.float64]
    loss_m = sum((o * mg.tensor(c)).sum() for o, c in zip([o for o in outs_m if o.dtype == mg.float64], cots))
    loss_t = sum((o * torch.tensor(c)).sum() for o, c in zip([o for o in outs_t if o.dtype == torch.float64],
                                                               cots))
    loss_m.backward()
    loss_t.backward()
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert gradcheck(mg_fn, [mg.tensor(x, dtype=mg.float64, requires_grad=True)])


def _randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# gather ---------------------------------------------------------------------------------------

GATHER_CASES = [
    ((5,), 0, [4, 0, 0, 2, 4, 4]),                               # repeated indices, longer than input
    ((3, 4), 1, [[0, 0, 3], [1, 1, 1], [2, 3, 2]]),
    ((3, 4), -2, [[0, 2, 2, 0], [0, 0, 1, 1]]),                   # negative dim, index smaller in dim 0
    ((2, 3, 4), -1, np.random.default_rng(2).integers(0, 4, (2, 2, 6))),
    ((2, 3, 4), 1, np.random.default_rng(3).integers(0, 3, (1, 5, 3))),
]


@pytest.mark.parametrize("shape, dim, index", GATHER_CASES)
def test_gather(shape, dim, index):
    index = np.asarray(index, np.int64)
    _check(lambda x: mg.gather(x, dim, mg.tensor(index)), lambda x: torch.gather(x, dim, torch.tensor(index)),
           _randn(*shape))
    _check(lambda x: x.gather(dim, mg.tensor(index)), lambda x: x.gather(dim, torch.tensor(index)),
           _randn(*shape))


def test_gather_repeated_indices_accumulate():
    x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    mg.gather(x, 0, mg.tensor([2, 2, 2, 0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 3.0])


def test_gather_int_input_and_0d():
    x = np.arange(12).reshape(3, 4)
    index = np.array([[3, 0], [1, 1]])
    got = mg.gather(mg.tensor(x), 1, mg.tensor(index))
    np.testing.assert_array_equal(got.numpy(), torch.gather(torch.tensor(x), 1, torch.tensor(index)).numpy())
    assert got.dtype == mg.int64
    got = mg.gather(mg.tensor(5.0), 0, mg.tensor(np.array(0)))
    assert got.shape == () and got.item() == 5.0


@pytest.mark.parametrize("bad", [[0, 3], [-1, 0]])
def test_gather_out_of_range_raises(bad):
    with pytest.raises(IndexError, match="gather"):
        mg.gather(mg.tensor([1.0, 2.0, 3.0]), 0, mg.tensor(np.array(bad, np.int64)))


def test_gather_bad_index_raises():
    x = mg.tensor(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="int64"):
        mg.gather(x, 0, mg.tensor(np.zeros((2, 3), np.int32)))
    with pytest.raises(ValueError, match="gather"):
        mg.gather(x, 0, mg.tensor(np.zeros((3,), np.int64)))
    with pytest.raises(ValueError, match="gather"):
        mg.gather(x, 0, mg.tensor(np.zeros((2, 4), np.int64)))


# cumsum ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, dim", [((5,), 0), ((3, 4), 1), ((2, 3, 4), -2), ((), 0)])
def test_cumsum(shape, dim):
    _check(lambda x: mg.cumsum(x, dim), lambda x: torch.cumsum(x, dim), _randn(*shape))
    _check(lambda x: x.cumsum(dim), lambda x: x.cumsum(dim), _randn(*shape))


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scan_int_and_bool_give_int64(op):
    for a in (np.array([[1, 2], [3, 4]], np.int32), np.array([True, False, True])):
        got, want = getattr(mg, op)(mg.tensor(a), -1), getattr(torch, op)(torch.tensor(a), -1)
        assert got.dtype == mg.int64
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("shape, dim", [((5,), 0), ((3, 4), 1), ((2, 3, 4), -2), ((), 0)])
def test_cumprod(shape, dim):
    _check(lambda x: mg.cumprod(x, dim), lambda x: torch.cumprod(x, dim), _randn(*shape))
    _check(lambda x: x.cumprod(dim), lambda x: x.cumprod(dim), _randn(*shape))


@pytest.mark.parametrize("dim", [1, 0])
def test_cumprod_with_zeros(dim):
    # rows: no zero, one zero, a zero first, two zeros, a zero last, all zeros
    x = np.array([[1.5, -2.0, 0.5, 3.0, -1.0], [1.5, -2.0, 0.0, 3.0, -1.0], [0.0, -2.0, 0.5, 3.0, -1.0],
                  [1.5, 0.0, 0.5, 0.0, -1.0], [1.5, -2.0, 0.5, 3.0, 0.0], [0.0] * 5])
    _check(lambda t: mg.cumprod(t, dim), lambda t: torch.cumprod(t, dim), x)


# sort / argsort -------------------------------------------------------------------------------

SORT_CASES = [((6,), -1), ((3, 5), 0), ((2, 3, 4), -1), ((2, 3, 4), 1)]


@pytest.mark.parametrize("shape, dim", SORT_CASES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort(shape, dim, descending):
    x = _randn(*shape)            # distinct values: the indices are unique too
    _check(lambda t: mg.sort(t, dim, descending), lambda t: torch.sort(t, dim, descending), x)
    _check(lambda t: t.sort(dim=dim, descending=descending),
           lambda t: t.sort(dim=dim, descending=descending), x)
    _check(lambda t: mg.argsort(t, dim, descending),
           lambda t: torch.argsort(t, dim, descending), x, grad=False)
    _check(lambda t: t.argsort(dim, descending), lambda t: t.argsort(dim, descending), x, grad=False)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_ties_and_nan(descending):
    x = np.array([[2.0, np.nan, 1.0, 2.0, -np.inf, 1.0, np.nan, np.inf]] * 2)
    got = mg.sort(mg.tensor(x), dim=-1, descending=descending, stable=True)
    want = torch.sort(torch.tensor(x), dim=-1, descending=descending, stable=True)
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    np.testing.assert_array_equal(mg.argsort(mg.tensor(x), descending=descending, stable=True).numpy(),
                                  want.indices.numpy())


def test_sort_int_and_0d():
    a = np.array([[3, 1, 2], [0, 5, -4]])
    got, want = mg.tensor(a).sort(descending=True), torch.tensor(a).sort(descending=True, stable=True)
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    values, indices = mg.sort(mg.tensor(2.5))
    assert values.shape == () and values.item() == 2.5 and indices.item() == 0


# repeat / unbind ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, sizes", [((3,), (2,)), ((2, 3), (2, 1)), ((2, 3), (3, 1, 2)),
                                          ((2, 1, 3), (1, 4, 2)), ((), (3, 2)), ((2, 3), (0, 2))])
def test_repeat(shape, sizes):
    _check(lambda x: x.repeat(*sizes), lambda x: x.repeat(*sizes), _randn(*shape))
    _check(lambda x: mg.repeat(x, sizes), lambda x: x.repeat(sizes), _randn(*shape))


def test_repeat_too_few_sizes_raises():
    with pytest.raises(ValueError, match="repeat"):
        mg.tensor(np.zeros((2, 3))).repeat(2)


@pytest.mark.parametrize("shape, dim", [((4,), 0), ((3, 4), 1), ((2, 3, 4), -2), ((2, 3, 4), 0)])
def test_unbind(shape, dim):
    _check(lambda x: mg.unbind(x, dim), lambda x: torch.unbind(x, dim), _randn(*shape))
    _check(lambda x: x.unbind(dim), lambda x: x.unbind(dim), _randn(*shape))


def test_unbind_unused_pieces_get_zero_grad():
    x = mg.tensor(_randn(3, 2), requires_grad=True)
    x.unbind(1)[1].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 1.0]] * 3)


# norm -----------------------------------------------------------------------------------------

NORM_CASES = [((5,), None, False), ((3, 4), 1, False), ((3, 4), -1, True), ((2, 3, 4), (0, 2), False),
              ((2, 3, 4), None, True)]


@pytest.mark.parametrize("p", [2, 1, math.inf, 3, 1.5, 0.5])
@pytest.mark.parametrize("shape, dim, keepdim", NORM_CASES)
def test_norm(p, shape, dim, keepdim):
    x = _randn(*shape)
    _check(lambda t: mg.norm(t, p, dim, keepdim), lambda t: torch.norm(t, p, dim, keepdim), x)
    _check(lambda t: t.norm(p, dim=dim, keepdim=keepdim), lambda t: t.norm(p, dim=dim, keepdim=keepdim), x)


@pytest.mark.parametrize("p", [2, 1, math.inf, 3, 1.5, 0.5])
def test_norm_zero_vector_and_zero_entries(p):
    x = np.array([[0.0, 0.0, 0.0], [0.0, 3.0, -4.0], [2.0, -2.0, 1.0]])
    xm = mg.tensor(x, requires_grad=True, dtype=mg.float64)
    xt = torch.tensor(x, requires_grad=True)
    mg.norm(xm, p, 1).sum().backward()
    torch.norm(xt, p, 1).sum().backward()
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=0)
    assert np.all(xm.grad.numpy()[0] == 0)


def test_norm_fro_default_and_errors():
    x = _randn(3, 4)
    np.testing.assert_allclose(mg.tensor(x).norm().item(), torch.tensor(x).norm().item(), rtol=1e-12)
    np.testing.assert_allclose(mg.norm(mg.tensor(x), "fro").item(), torch.norm(torch.tensor(x), "fro").item(),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="norm"):
        mg.norm(mg.tensor(x), 0)
    with pytest.raises(TypeError, match="norm"):
        mg.norm(mg.tensor([1, 2]))
