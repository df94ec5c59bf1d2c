"""PyTorch names found missing while porting small torch training scripts (dtype aliases, Generator,
randperm, topk, multinomial, allclose, mm, bmm, square, tril, triu, clamp_min/max, numel, is_tensor),
checked against torch where torch defines the values."""
import pickle

import numpy as np
import pytest

import minigrad as mg


def _torch():
    return pytest.importorskip("torch")


def test_dtype_aliases():
    assert mg.long == mg.int64 and mg.int == mg.int32 and mg.bool == mg.bool_
    assert mg.float == mg.float32 and mg.double == mg.float64
    assert mg.tensor([1, 2], dtype=mg.long).dtype == np.int64
    assert mg.ones(2).to(mg.double).dtype == np.float64
    assert isinstance(1.5, float)   # the module's aliases do not leak into builtins


def test_generator_streams_and_state():
    g = mg.Generator().manual_seed(3)
    a = mg.randn(4, generator=g).numpy()
    mg.manual_seed(3)
    assert np.array_equal(a, mg.randn(4).numpy())          # same stream as the global seed
    state = g.get_state()
    b = mg.randint(0, 10, (5,), generator=g).numpy()
    assert np.array_equal(b, mg.randint(0, 10, (5,), generator=mg.Generator().set_state(state)).numpy())
    g2 = pickle.loads(pickle.dumps(g))
    assert isinstance(g2, mg.Generator)
    assert np.array_equal(mg.rand(3, generator=g).numpy(), mg.rand(3, generator=g2).numpy())
    with pytest.raises(ValueError):
        mg.Generator("cuda")


def test_randperm():
    mg.manual_seed(0)
    p = mg.randperm(10)
    assert p.dtype == np.int64 and sorted(p.tolist()) == list(range(10))
    q = mg.randperm(10, generator=mg.Generator().manual_seed(0))
    assert np.array_equal(p.numpy(), q.numpy())
    assert mg.randperm(0).shape == (0,)
    with pytest.raises(ValueError):
        mg.randperm(-1)


@pytest.mark.parametrize("shape,dim,k,largest", [((7,), -1, 3, True), ((4, 6), 1, 2, False),
                                                 ((3, 5, 4), 0, 2, True), ((3, 5, 4), -2, 5, False),
                                                 ((2, 3), 1, 0, True)])
def test_topk_matches_torch(shape, dim, k, largest):
    torch = _torch()
    x = np.random.default_rng(1).permutation(np.prod(shape)).reshape(shape).astype(np.float64)  # no ties
    xt = torch.tensor(x, requires_grad=True)
    vt, it = torch.topk(xt, k, dim=dim, largest=largest)
    (vt * torch.arange(1.0, vt.numel() + 1, dtype=torch.float64).reshape(vt.shape)).sum().backward()
    xm = mg.tensor(x, requires_grad=True)
    vm, im = mg.topk(xm, k, dim=dim, largest=largest)
    assert im.dtype == np.int64
    np.testing.assert_array_equal(vm.numpy(), vt.detach().numpy())
    np.testing.assert_array_equal(im.numpy(), it.numpy())
    (vm * mg.arange(1.0, vm.numel() + 1, dtype=mg.float64).reshape(vm.shape)).sum().backward()
    np.testing.assert_array_equal(xm.grad.numpy(), xt.grad.numpy())
    assert xm.topk(k, dim, largest).values.shape == vm.shape


def test_topk_nan_int_scalar_and_errors():
    torch = _torch()
    x = np.array([1.0, np.nan, 3.0, -np.inf, np.inf])
    for largest in (True, False):
        vt, it = torch.topk(torch.tensor(x), 3, largest=largest)
        vm, im = mg.tensor(x).topk(3, largest=largest)
        np.testing.assert_array_equal(vm.numpy(), vt.numpy())
        np.testing.assert_array_equal(im.numpy(), it.numpy())
    vt, it = torch.topk(torch.tensor([3, 9, 1]), 2)
    assert mg.tensor([3, 9, 1]).topk(2).values.tolist() == vt.tolist()
    v, i = mg.tensor(2.0).topk(1)
    assert v.shape == () and v.item() == 2.0 and i.item() == 0
    with pytest.raises(ValueError):
        mg.ones(3).topk(4)


def test_multinomial():
    g = mg.Generator().manual_seed(0)
    probs = mg.tensor([[0.0, 1.0, 3.0], [5.0, 0.0, 0.0]])
    s = mg.multinomial(probs, 1000, replacement=True, generator=g)
    assert s.shape == (2, 1000) and s.dtype == np.int64
    assert set(s[1].tolist()) == {0} and 0 not in s[0].tolist()
    assert abs((s[0] == 2).float().mean().item() - 0.75) < 0.05
    w = mg.tensor([0.1, 0.2, 0.3, 0.4])
    r = w.multinomial(4, generator=mg.Generator().manual_seed(1))
    assert r.shape == (4,) and sorted(r.tolist()) == [0, 1, 2, 3]        # without replacement
    mg.manual_seed(5)
    a = mg.multinomial(w, 2)
    mg.manual_seed(5)
    assert a.tolist() == mg.multinomial(w, 2).tolist()
    for bad in ([0.5, -0.1], [np.nan, 1.0], [0.0, 0.0]):
        with pytest.raises(ValueError):
            mg.multinomial(mg.tensor(bad), 1)
    with pytest.raises(ValueError):
        mg.multinomial(mg.tensor([1.0, 0.0]), 2)            # only one non-zero category
    with pytest.raises(ValueError):
        mg.multinomial(mg.tensor([1.0, 1.0]), 3)
    with pytest.raises(TypeError):
        mg.multinomial(mg.tensor([1, 2]), 1)


def test_allclose_matches_torch():
    torch = _torch()
    a = np.array([1.0, 2.0, np.nan])
    cases = (([1.0, 2.0 + 1e-6, np.nan], {}), ([1.0, 2.0, np.nan], {"equal_nan": True}),
             ([1.0, 2.1, np.nan], {"equal_nan": True}),
             ([1.0, 2.1, np.nan], {"atol": 0.2, "equal_nan": True}))
    for b, kw in cases:
        b = np.array(b)
        expected = torch.allclose(torch.tensor(a), torch.tensor(b), **kw)
        assert mg.allclose(mg.tensor(a), mg.tensor(b), **kw) is expected
        assert mg.tensor(a).allclose(mg.tensor(b), **kw) is expected
    with pytest.raises(TypeError):
        mg.allclose(mg.ones(2), mg.ones(2, dtype=mg.float64))


def _grads_match(torch, fn_t, fn_m, *arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    ms = [mg.tensor(a, requires_grad=True) for a in arrays]
    yt, ym = fn_t(*ts), fn_m(*ms)
    np.testing.assert_allclose(ym.numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = np.random.default_rng(2).standard_normal(yt.shape)
    (yt * torch.tensor(w)).sum().backward()
    (ym * mg.tensor(w)).sum().backward()
    for t, m in zip(ts, ms):
        np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_mm_bmm_square_match_torch():
    torch = _torch()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    _grads_match(torch, torch.mm, mg.mm, a, b)
    _grads_match(torch, lambda x, y: x.mm(y), lambda x, y: x.mm(y), a, b)
    a3, b3 = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    _grads_match(torch, torch.bmm, mg.bmm, a3, b3)
    _grads_match(torch, torch.square, mg.square, a)
    _grads_match(torch, lambda x: x.square(), lambda x: x.square(), a)
    with pytest.raises(ValueError):
        mg.mm(mg.ones(2, 3, 4), mg.ones(4, 2))
    with pytest.raises(ValueError):
        mg.bmm(mg.ones(2, 3, 4), mg.ones(3, 4, 2))
    assert mg.square(mg.tensor([3])).tolist() == [9]


@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3])
def test_tril_triu_match_torch(diagonal):
    torch = _torch()
    x = np.random.default_rng(3).standard_normal((2, 3, 4))
    _grads_match(torch, lambda t: torch.tril(t, diagonal), lambda t: mg.tril(t, diagonal), x)
    _grads_match(torch, lambda t: t.triu(diagonal), lambda t: t.triu(diagonal), x)
    _grads_match(torch, lambda t: torch.triu(t, diagonal=diagonal), lambda t: mg.triu(t, diagonal=diagonal),
                 x[0])
    ones = mg.ones(4, 4, dtype=mg.int64)
    expected = torch.tril(torch.ones(4, 4, dtype=torch.long), diagonal).tolist()
    assert mg.tril(ones, diagonal).tolist() == expected
    assert mg.tril(ones).dtype == np.int64
    with pytest.raises(ValueError):
        mg.tril(mg.ones(3))


def test_clamp_min_max_numel_is_tensor():
    torch = _torch()
    x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0])
    _grads_match(torch, lambda t: t.clamp_min(0.1), lambda t: t.clamp_min(0.1), x)
    _grads_match(torch, lambda t: t.clamp_max(-0.1), lambda t: t.clamp_max(-0.1), x)
    assert mg.numel(mg.ones(2, 3)) == 6 and mg.is_tensor(mg.ones(1)) and not mg.is_tensor(np.ones(1))
