"""PyTorch Tensor-API pieces added after the audit: empty / linspace / eye / randint / as_tensor, t() /
mT, all / any, nonzero, ndimension / nelement, `//` (floor_divide), `%` (remainder), sum / mean
with dtype. Known values always; the same calls in PyTorch when it is installed."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck


def _torch():
    return pytest.importorskip("torch")


def _f64(a, requires_grad=True):
    return mg.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


# ---- creation -------------------------------------------------------------------------------------
def test_empty_shape_dtype_and_size_forms():
    assert mg.empty(2, 3).shape == (2, 3) and mg.empty(2, 3).dtype == mg.float32
    assert mg.empty((4,), dtype=mg.float64).dtype == mg.float64
    assert mg.empty(0).shape == (0,)
    assert mg.empty(3, dtype=mg.int64).dtype == mg.int64
    assert mg.empty(2, requires_grad=True).requires_grad
    with pytest.raises(TypeError):
        mg.empty(2.5)


def test_linspace_known_values_and_edges():
    assert mg.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    t = mg.linspace(-3.3, 7.1, 11)
    assert t.dtype == mg.float32
    assert t.data[0] == np.float32(-3.3) and t.data[-1] == np.float32(7.1)   # both ends exact
    assert mg.linspace(2, 1, 1).tolist() == [2.0]
    assert mg.linspace(0, 1, 0).shape == (0,)
    assert mg.linspace(5, -5, 3).tolist() == [5.0, 0.0, -5.0]
    assert mg.linspace(0, 1, 3, dtype=mg.float64).dtype == mg.float64
    assert mg.linspace(mg.tensor(0.0), mg.tensor(2.0), 3).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="linspace: steps"):
        mg.linspace(0, 1, -1)
    with pytest.raises(TypeError, match="linspace: steps"):
        mg.linspace(0, 1, 2.0)
    with pytest.raises(TypeError, match="linspace: start"):
        mg.linspace("0", 1, 2)
    with pytest.raises(TypeError, match="linspace: dtype"):
        mg.linspace(0, 1, 3, dtype=mg.int64)


def _ulps(a, b):
    """Distance in float32 ulps between two float32 arrays of the same sign pattern (as int bits)."""
    ia, ib = (np.asarray(x, np.float32).view(np.int32).astype(np.int64) for x in (a, b))
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return int(np.max(np.abs(ia - ib))) if ia.size else 0


def test_linspace_matches_torch_float32_rounding():
    torch = _torch()
    rng = np.random.default_rng(0)
    cases = [(0, 1, n) for n in (2, 3, 7, 16, 17, 33, 1000, 32769)]
    cases += [(-3.3, 7.1, 77), (1e-3, 1e4, 101), (5, -5, 64), (2, 2, 9), (0.1, 0.7, 100001)]
    cases += [(float(rng.normal() * 10), float(rng.normal() * 10), int(rng.integers(1, 300)))
              for _ in range(300)]
    exact = 0
    for start, end, steps in cases:
        mine = mg.linspace(start, end, steps).data
        ref = torch.linspace(start, end, steps).numpy()
        assert mine.dtype == ref.dtype == np.float32
        assert _ulps(mine, ref) <= 1, (start, end, steps)   # exact where torch's kernel uses an fma
        exact += np.array_equal(mine, ref)
    assert exact >= len(cases) * 0.9
    for start, end, steps in cases[:60]:
        mine = mg.linspace(start, end, steps, dtype=mg.float64).data
        ref = torch.linspace(start, end, steps, dtype=torch.float64).numpy()
        np.testing.assert_allclose(mine, ref, rtol=0, atol=2 * np.spacing(max(abs(start), abs(end), 1e-300)))


def test_eye():
    np.testing.assert_array_equal(mg.eye(3).data, np.eye(3, dtype=np.float32))
    assert mg.eye(2, 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert mg.eye(3, 1).tolist() == [[1.0], [0.0], [0.0]]
    assert mg.eye(0).shape == (0, 0)
    assert mg.eye(2, dtype=mg.float64).dtype == mg.float64
    assert mg.eye(2, dtype=mg.int64).tolist() == [[1, 0], [0, 1]]
    with pytest.raises(ValueError, match="eye: n"):
        mg.eye(-1)
    with pytest.raises(TypeError, match="eye: m"):
        mg.eye(2, 2.0)
    torch = _torch()
    np.testing.assert_array_equal(mg.eye(4, 2).data, torch.eye(4, 2).numpy())


def test_randint_range_dtype_and_seed():
    mg.manual_seed(7)
    a = mg.randint(-3, 5, (1000,))
    mg.manual_seed(7)
    b = mg.randint(-3, 5, (1000,))
    assert a.dtype == mg.int64 and a.shape == (1000,)
    np.testing.assert_array_equal(a.data, b.data)                  # repeatable under manual_seed
    assert a.data.min() == -3 and a.data.max() == 4                 # [low, high)
    c = mg.randint(4, (2, 3))                                      # randint(high, size)
    assert c.shape == (2, 3) and c.data.min() >= 0 and c.data.max() < 4
    assert mg.randint(4, size=(5,)).shape == (5,)
    assert mg.randint(0, 2, size=(2, 2)).shape == (2, 2)
    assert mg.randint(0, 3, (4,), dtype=mg.float32).dtype == mg.float32
    assert mg.randint(0, 1, (3,)).tolist() == [0, 0, 0]
    gen = np.random.default_rng(3)
    np.testing.assert_array_equal(mg.randint(0, 9, (6,), generator=gen).data,
                                  np.random.default_rng(3).integers(0, 9, 6))
    with pytest.raises(ValueError, match="randint: expected low < high"):
        mg.randint(5, 5, (2,))
    with pytest.raises(TypeError, match="randint: high"):
        mg.randint(0, 2.5, (2,))
    with pytest.raises(TypeError, match="randint: missing the size"):
        mg.randint(0, 5)


def test_as_tensor_shares_when_possible():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = mg.as_tensor(arr)
    assert t.data is arr or np.shares_memory(t.data, arr)
    arr[0, 0] = 9.0
    assert t.data[0, 0] == 9.0
    assert mg.as_tensor(np.zeros(2)).dtype == mg.float64             # a numpy array keeps its dtype
    c = mg.as_tensor(arr, dtype=mg.float64)                         # another dtype: a copy
    assert c.dtype == mg.float64 and not np.shares_memory(c.data, arr)
    assert np.shares_memory(mg.as_tensor(arr, dtype=mg.float32).data, arr)
    x = mg.tensor([1.0, 2.0])
    assert mg.as_tensor(x) is x and mg.as_tensor(x, dtype=mg.float32) is x
    assert mg.as_tensor(x, dtype=mg.float64).dtype == mg.float64
    assert mg.as_tensor([1.5, 2.0]).dtype == mg.float32            # Python floats: float32
    assert mg.as_tensor([1, 2]).dtype == mg.int64
    assert mg.as_tensor(3.0).shape == ()
    w = mg.tensor([1.0, 2.0], dtype=mg.float64, requires_grad=True)
    mg.as_tensor(w, dtype=mg.float32).sum().backward()               # the cast is differentiable
    assert w.grad.tolist() == [1.0, 1.0] and w.grad.dtype == mg.float64


# ---- attributes -----------------------------------------------------------------------------------
def test_ndimension_and_nelement():
    x = mg.zeros(2, 3, 4)
    assert x.ndimension() == 3 and x.nelement() == 24
    assert mg.tensor(1.0).ndimension() == 0 and mg.tensor(1.0).nelement() == 1


# ---- t() and mT -----------------------------------------------------------------------------------
def test_t_and_mT_values_and_errors():
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(mg.tensor(a).t().data, a.T)
    v = mg.tensor([1.0, 2.0, 3.0])
    assert v.t().tolist() == [1.0, 2.0, 3.0] and v.t().shape == (3,)
    assert mg.tensor(2.0).t().item() == 2.0
    with pytest.raises(ValueError, match="t: expects a tensor with <= 2 dims"):
        mg.zeros(2, 3, 4).t()
    b = np.arange(24.0).reshape(2, 3, 4)
    m = mg.tensor(b).mT
    assert m.shape == (2, 4, 3)
    np.testing.assert_array_equal(m.data, b.swapaxes(-1, -2))
    np.testing.assert_array_equal(mg.tensor(a).mT.data, a.T)
    with pytest.raises(ValueError, match="mT: expects a tensor with >= 2 dims"):
        _ = mg.zeros(3).mT


def test_t_and_mT_gradcheck():
    rng = np.random.default_rng(0)
    assert gradcheck(lambda x: x.t(), [_f64(rng.standard_normal((3, 5)))])
    assert gradcheck(lambda x: x.t() * x.t(), [_f64(rng.standard_normal(4))])
    assert gradcheck(lambda x: x.mT, [_f64(rng.standard_normal((2, 3, 4)))])
    assert gradcheck(lambda x: x.mT @ x, [_f64(rng.standard_normal((2, 1, 3, 4)))])


def test_t_and_mT_against_torch():
    torch = _torch()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 4))
    c = rng.standard_normal((2, 4, 3))
    x = _f64(a)
    (x.mT * mg.tensor(c)).sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    (tx.mT * torch.tensor(c)).sum().backward()
    np.testing.assert_array_equal(x.grad.data, tx.grad.numpy())
    m = rng.standard_normal((3, 5))
    np.testing.assert_array_equal(mg.tensor(m).t().data, torch.tensor(m).t().numpy())


# ---- all / any ------------------------------------------------------------------------------------
def test_all_any_known_values():
    x = mg.tensor([[1.0, 0.0, 2.0], [3.0, 4.0, np.nan]])
    assert x.all().dtype == mg.bool_ and x.all().shape == ()
    assert not x.all().item() and x.any().item()
    assert x.all(1).tolist() == [False, True]                      # NaN counts as nonzero
    assert x.any(0).tolist() == [True, True, True]
    assert x.all(dim=0, keepdim=True).shape == (1, 3)
    assert x.all(axis=1, keepdims=True).shape == (2, 1)
    assert mg.all(x, (0, 1)).item() is False and mg.any(x).item() is True
    assert mg.zeros(0).all().item() and not mg.zeros(0).any().item()
    assert mg.zeros(0, 3).all(1).shape == (0,)
    assert mg.tensor(3).all().item() and mg.tensor([True, False]).any().item()
    y = mg.tensor([1.0, 2.0], requires_grad=True)
    assert not y.all().requires_grad and not mg.any(y).requires_grad
    with pytest.raises(np.exceptions.AxisError, match="all: dim 2"):
        x.all(2)


def test_all_any_against_torch():
    torch = _torch()
    rng = np.random.default_rng(2)
    a = rng.integers(0, 3, (3, 4, 5)).astype(np.float32)
    a[1] = 1.0
    for dim in (None, 0, 1, -1, (0, 2), (1, 2)):
        for keepdim in (False, True):
            for fn in ("all", "any"):
                kw = {} if dim is None else {"dim": dim, "keepdim": keepdim}
                mine = getattr(mg.tensor(a), fn)(**kw)
                ref = getattr(torch.tensor(a), fn)(**kw)
                assert mine.dtype == mg.bool_
                np.testing.assert_array_equal(mine.data, ref.numpy(), err_msg=f"{fn} {dim} {keepdim}")


# ---- nonzero --------------------------------------------------------------------------------------
def test_nonzero_known_values():
    x = mg.tensor([[0.0, 1.5], [2.0, 0.0], [0.0, -1.0]])
    nz = x.nonzero()
    assert nz.dtype == mg.int64 and nz.tolist() == [[0, 1], [1, 0], [2, 1]]
    rows, cols = mg.nonzero(x, as_tuple=True)
    assert rows.tolist() == [0, 1, 2] and cols.tolist() == [1, 0, 1] and rows.dtype == mg.int64
    assert mg.tensor(5).nonzero().shape == (1, 0) and mg.tensor(0).nonzero().shape == (0, 0)
    assert [t.tolist() for t in mg.tensor(5).nonzero(as_tuple=True)] == [[0]]
    assert mg.zeros(2, 3).nonzero().shape == (0, 2)
    assert mg.tensor([True, False, True]).nonzero().tolist() == [[0], [2]]


def test_nonzero_against_torch():
    torch = _torch()
    a = np.random.default_rng(3).integers(-1, 2, (3, 4, 2))
    for arr in (a, a.astype(np.float64), np.array(0), np.array(7), np.zeros((2, 0))):
        ref = torch.tensor(arr).nonzero()
        mine = mg.tensor(arr).nonzero()
        assert mine.shape == tuple(ref.shape) and mine.dtype == mg.int64
        np.testing.assert_array_equal(mine.data, ref.numpy())
        for m, r in zip(mg.tensor(arr).nonzero(as_tuple=True), torch.tensor(arr).nonzero(as_tuple=True)):
            np.testing.assert_array_equal(m.data, r.numpy())


# ---- // and % -------------------------------------------------------------------------------------
def test_floor_divide_and_remainder_known_values():
    a = mg.tensor([7, -7, 7, -7])
    b = mg.tensor([2, 2, -2, -2])
    assert (a // b).tolist() == [3, -4, -4, 3] and (a // b).dtype == mg.int64
    assert (a % b).tolist() == [1, 1, -1, -1]                       # the sign of the divisor
    assert (7 // b).tolist() == [3, 3, -4, -4] and (7 % b).tolist() == [1, 1, -1, -1]
    assert (a // 3).tolist() == [2, -3, 2, -3] and (a % 3).tolist() == [1, 2, 1, 2]
    x = mg.tensor([5.5, -5.5, 0.0])
    assert (x // 2).tolist() == [2.0, -3.0, 0.0] and (x % 2).tolist() == [1.5, 0.5, 0.0]
    assert (x % -2).tolist() == [-0.5, -1.5, 0.0]
    assert (x // 2).dtype == mg.float32 and (x % 2.0).dtype == mg.float32
    assert (mg.tensor([3]) // 1.5).dtype == mg.float32               # int // float: float32
    assert (mg.tensor([3], dtype=mg.int32) // 2).dtype == mg.int32
    assert mg.floor_divide(a, 2).tolist() == a.floor_divide(2).tolist() == [3, -4, 3, -4]
    assert mg.remainder(a, 2).tolist() == a.remainder(2).tolist() == [1, 1, 1, 1]
    y = mg.tensor([1.0, -1.0, 0.0]) // 0.0
    assert y.data[0] == np.inf and y.data[1] == -np.inf and np.isnan(y.data[2])
    assert np.isnan((mg.tensor([1.0]) % 0.0).item())
    with pytest.raises(ZeroDivisionError, match="floor_divide: integer division by zero"):
        a // mg.tensor([1, 0, 1, 1])
    with pytest.raises(ZeroDivisionError, match="remainder: integer division by zero"):
        a % 0
    with pytest.raises(TypeError, match="floor_divide: not implemented for bool"):
        mg.tensor([True]) // mg.tensor([True])
    with pytest.raises(TypeError, match="Remainder: inputs mix float32 and float64"):
        mg.zeros(2) % mg.ones(2, dtype=mg.float64)
    with pytest.raises(TypeError, match="FloorDivide: inputs mix float32 and float64"):
        mg.zeros(2) // mg.ones(2, dtype=mg.float64)
    with pytest.raises(ValueError, match=r"remainder: \(2,\) % \(3,\)"):
        mg.zeros(2) % mg.ones(3)


def test_floor_divide_has_no_grad():
    x = mg.tensor([1.5, -2.5], requires_grad=True)
    assert not (x // 2).requires_grad and not (3.0 // x).requires_grad
    assert (x // 2).grad_fn is None


def test_remainder_gradcheck():
    rng = np.random.default_rng(4)
    a = rng.uniform(-5, 5, (3, 4))
    b = rng.choice([-1, 1], (4,)) * rng.uniform(0.7, 2.0, (4,))
    # keep a / b away from integers, where the remainder jumps
    a = np.where(np.abs(a / b - np.round(a / b)) < 0.1, a + 0.3 * b, a)
    assert gradcheck(lambda x, y: x % y, [_f64(a), _f64(b)])
    assert gradcheck(lambda x: x % 1.7, [_f64(a)])
    assert gradcheck(lambda y: 3.3 % y, [_f64(b)])
    assert gradcheck(lambda x, y: mg.remainder(x, y), [_f64(a[0]), _f64(b)])


def test_floor_divide_and_remainder_against_torch():
    torch = _torch()
    rng = np.random.default_rng(5)
    for dtype in (np.float32, np.float64):
        a = (rng.standard_normal((4, 50)) * 10).astype(dtype)
        b = (rng.standard_normal(50) * 3).astype(dtype)
        a[0, :5] = [0.0, -0.0, 6.0, -6.0, np.inf]
        b[:5] = [3.0, 3.0, -3.0, 3.0, 2.0]
        ta, tb = torch.tensor(a), torch.tensor(b)
        pairs = [(mg.tensor(a) // mg.tensor(b), ta // tb), (mg.tensor(a) % mg.tensor(b), ta % tb),
                 (mg.tensor(a) // 1.1, ta // 1.1), (mg.tensor(a) % -1.1, ta % -1.1),
                 (2.5 // mg.tensor(b), 2.5 // tb), (2.5 % mg.tensor(b), 2.5 % tb)]
        for mine, ref in pairs:
            assert mine.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(mine.data, ref.numpy())
            np.testing.assert_array_equal(np.signbit(mine.data), np.signbit(ref.numpy()))   # -0.0 too
    ia = rng.integers(-20, 20, (3, 40))
    ib = rng.integers(1, 6, 40) * rng.choice([-1, 1], 40)
    ma, mb, ta, tb = mg.tensor(ia), mg.tensor(ib), torch.tensor(ia), torch.tensor(ib)
    for mine, ref in [(ma // mb, ta // tb), (ma % mb, ta % tb), (ma % 1.1, ta % 1.1), (-7 // mb, -7 // tb)]:
        assert mine.dtype == np.dtype(str(ref.dtype).replace("torch.", ""))
        np.testing.assert_array_equal(mine.data, ref.numpy())


def test_remainder_grads_against_torch():
    torch = _torch()
    rng = np.random.default_rng(6)
    a = rng.uniform(-5, 5, (3, 4))
    b = rng.choice([-1, 1], (3, 1)) * rng.uniform(0.5, 2.0, (3, 1))
    c = rng.standard_normal((3, 4))
    x, y = _f64(a), _f64(b)
    (mg.remainder(x, y) * mg.tensor(c)).sum().backward()
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (torch.remainder(tx, ty) * torch.tensor(c)).sum().backward()
    np.testing.assert_array_equal(x.grad.data, tx.grad.numpy())
    np.testing.assert_allclose(y.grad.data, ty.grad.numpy(), rtol=1e-14)


# ---- sum / mean with dtype ------------------------------------------------------------------------
def test_sum_mean_dtype():
    x = mg.tensor([[1.0, 2.0], [3.0, 4.5]], requires_grad=True)
    s = x.sum(dtype=mg.float64)
    assert s.dtype == mg.float64 and s.item() == 10.5
    m = x.mean(1, dtype=mg.float64)
    assert m.dtype == mg.float64 and m.tolist() == [1.5, 3.75]
    (s + m.sum()).backward()
    assert x.grad.dtype == mg.float32 and x.grad.tolist() == [[1.5, 1.5], [1.5, 1.5]]
    assert mg.sum(x, 0, dtype=mg.float64).dtype == mg.float64
    assert mg.tensor([1, 2]).mean(dtype=mg.float64).item() == 1.5
    assert mg.tensor([True, True]).sum(dtype=mg.int64).item() == 2
    assert x.sum(0, keepdim=True, dtype=mg.float64).shape == (1, 2)
    with pytest.raises(TypeError, match="mean: dtype must be a float dtype"):
        x.mean(dtype=mg.int64)
    assert gradcheck(lambda t: t.sum(1, dtype=mg.float64) * t.mean(dtype=mg.float64),
                     [_f64(np.random.default_rng(7).standard_normal((3, 4)))])


def test_sum_mean_dtype_against_torch():
    torch = _torch()
    a = np.random.default_rng(8).standard_normal((5, 7)).astype(np.float32)
    for dim in (None, 0, 1):
        kw = {} if dim is None else {"dim": dim}
        for fn in ("sum", "mean"):
            mine = getattr(mg.tensor(a), fn)(dtype=mg.float64, **kw)
            ref = getattr(torch.tensor(a), fn)(dtype=torch.float64, **kw)
            assert mine.dtype == mg.float64
            np.testing.assert_allclose(mine.data, ref.numpy(), rtol=1e-15, atol=1e-15)
