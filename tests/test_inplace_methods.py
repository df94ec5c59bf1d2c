"""masked_fill_, clamp_ / clip_, normal_ and uniform_ as Tensor methods: outside the graph (no_grad,
nothing requiring grad), in it (non-leaf tensors: gradients as PyTorch's), and through copies that
stand for PyTorch views (strided slices, transposes) so the source is written too."""
import numpy as np
import pytest

import minigrad as mg

A = np.arange(12.0).reshape(3, 4) - 5.0
MASK = np.array([True, False, True, False])


def test_masked_fill_and_clamp_known_values():
    x = mg.tensor(A)
    assert x.masked_fill_(mg.tensor(MASK), 7.0) is x
    want = A.copy()
    want[:, MASK] = 7.0
    np.testing.assert_array_equal(x.data, want)
    assert x.clamp_(-2.0, 3.0) is x
    np.testing.assert_array_equal(x.data, np.clip(want, -2.0, 3.0))
    x.clamp_(min=0.0)
    np.testing.assert_array_equal(x.data, np.clip(want, 0.0, 3.0))
    x.clip_(max=1.0)
    np.testing.assert_array_equal(x.data, np.clip(want, 0.0, 1.0))


def test_in_place_methods_bump_the_version():
    x = mg.tensor(A)
    v = x._version
    x.masked_fill_(mg.tensor(MASK), 0.0)
    x.clamp_(max=1.0)
    x.normal_()
    x.uniform_()
    assert x._version == v + 4


def test_masked_fill_on_an_int_tensor_casts_the_value_and_rejects_bad_masks():
    x = mg.tensor(np.zeros(3, dtype=np.int64))
    x.masked_fill_(mg.tensor([True, False, True]), 2.7)
    np.testing.assert_array_equal(x.data, [2, 0, 2])
    assert x.dtype == np.int64
    with pytest.raises(TypeError, match="bool"):
        x.masked_fill_(mg.tensor([1, 0, 1]), 1)
    with pytest.raises(ValueError, match="0-dim"):
        mg.zeros(3).masked_fill_(mg.tensor([True, False, True]), mg.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="shape"):
        mg.zeros(3).masked_fill_(mg.tensor([[True], [False]]), 1.0)   # mask broadcasts t to (2, 3)


def test_clamp_rejects_float_bounds_on_int_tensors_and_no_bounds():
    with pytest.raises(TypeError, match="float bound"):
        mg.tensor(np.zeros(3, dtype=np.int64)).clamp_(0.5)
    with pytest.raises(ValueError, match="at least one"):
        mg.zeros(3).clamp_()


def test_normal_and_uniform_follow_the_generator():
    x, y = mg.zeros(2000), mg.zeros(2000)
    x.normal_(1.0, 2.0, generator=mg.Generator().manual_seed(3))
    y.normal_(1.0, 2.0, generator=mg.Generator().manual_seed(3))
    np.testing.assert_array_equal(x.data, y.data)
    assert x.dtype == np.float32
    assert abs(float(x.data.mean()) - 1.0) < 0.2 and abs(float(x.data.std()) - 2.0) < 0.2
    mg.manual_seed(5)
    x.uniform_(-3.0, -1.0)
    mg.manual_seed(5)
    y.uniform_(-3.0, -1.0)
    np.testing.assert_array_equal(x.data, y.data)
    assert x.data.min() >= -3.0 and x.data.max() < -1.0
    with pytest.raises(ValueError, match="std"):
        x.normal_(0.0, -1.0)
    with pytest.raises(ValueError, match="from"):
        x.uniform_(1.0, 0.0)
    with pytest.raises(TypeError, match="floating"):
        mg.tensor(np.zeros(3, dtype=np.int64)).normal_()


def test_no_grad_init_on_a_strided_slice_writes_the_weight():
    w = mg.zeros(4, 3, requires_grad=True)
    with mg.no_grad():
        w[:, 0].normal_(generator=mg.Generator().manual_seed(0))
        w[:, 2].uniform_(5.0, 6.0)
        w.T[1].fill_(9.0)
    assert np.all(w.data[:, 0] != 0.0)
    assert np.all((w.data[:, 2] >= 5.0) & (w.data[:, 2] < 6.0))
    np.testing.assert_array_equal(w.data[:, 1], 9.0)
    assert w.requires_grad and w.is_leaf


def test_strided_slice_masked_fill_and_clamp_write_the_source():
    x = mg.tensor(A)
    x[:, ::2].masked_fill_(mg.tensor([True, False]), 100.0)
    x.T[3].clamp_(min=0.0)
    want = A.copy()
    want[:, 0] = 100.0
    want[:, 3] = np.maximum(want[:, 3], 0.0)
    np.testing.assert_array_equal(x.data, want)


def test_random_fill_of_a_leaf_that_requires_grad_raises_and_draws_nothing():
    w = mg.zeros(3, requires_grad=True)
    gen = mg.Generator().manual_seed(1)
    state = gen.get_state()
    for call in (lambda: w.normal_(generator=gen), lambda: w.uniform_(generator=gen),
                 lambda: w.masked_fill_(mg.tensor([True, False, True]), 1.0), lambda: w.clamp_(0.0)):
        with pytest.raises(RuntimeError, match="leaf"):
            call()
    assert gen.get_state() == state
    np.testing.assert_array_equal(w.data, 0.0)


def test_normal_on_a_non_leaf_in_the_graph_passes_a_zero_gradient():
    x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.normal_()
    assert y.requires_grad
    (y * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.data, 0.0)


def _torch_case(lib, a, mask, clone):
    """masked_fill_ and clamp_ in the graph on non-leaf tensors and on strided slices (views in
    torch, write-back copies in minigrad); returns the tensors."""
    x = lib.tensor(a, requires_grad=True)
    v = lib.tensor(0.5, requires_grad=True)
    y = x * 1.5
    y.masked_fill_(lib.tensor(mask), v)
    y.clamp_(-4.0, 6.0)
    z = clone(x * x)
    z.T[:, 1].masked_fill_(lib.tensor(mask[:4]), 2.0)    # row 1 of z
    z[:, 2].clamp_(max=10.0)
    loss = (y * lib.tensor(a)).sum() + (z * z).sum()    # v is float32: cast into y in masked_fill_
    loss.backward()
    return x, v, y, z


def test_masked_fill_and_clamp_gradients_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.normal(0.0, 3.0, (3, 4))
    mask = np.array([False, True, True, False])
    xs, vs, ys, zs = _torch_case(mg, a, mask, lambda t: t.clone())
    xt, vt, yt, zt = _torch_case(torch, a, mask, lambda t: t.clone())
    np.testing.assert_allclose(ys.data, yt.detach().numpy())
    np.testing.assert_allclose(zs.data, zt.detach().numpy())
    np.testing.assert_allclose(xs.grad.data, xt.grad.numpy())
    np.testing.assert_allclose(vs.grad.data, vt.grad.numpy())


def test_known_values_match_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[-3.0, np.nan, 0.5], [7.0, 2.0, -0.0]])
    m = np.array([True, False, True])
    for fn in (lambda lib, t: t.clamp_(-1.0, 1.0), lambda lib, t: t.clamp_(min=0.0),
               lambda lib, t: t.clamp_(max=0.0), lambda lib, t: t.masked_fill_(lib.tensor(m), -9.0)):
        got, want = mg.tensor(a.copy()), torch.tensor(a.copy())
        fn(mg, got)
        fn(torch, want)
        np.testing.assert_array_equal(got.data, want.numpy())


@pytest.mark.parametrize("case", [
    (lambda m: m.tensor([True, False]), "add_", lambda m: m.tensor([1, 2])),
    (lambda m: m.tensor([1, 2]), "mul_", lambda m: m.tensor([1.5, 2.0])),
    (lambda m: m.tensor([1, 2]), "sub_", lambda m: 0.5),
    (lambda m: m.tensor([1, 2]), "div_", lambda m: 2),
])
def test_arithmetic_inplace_into_a_narrower_dtype_raises_runtime_error_as_torch(case):
    """t.add_/sub_/mul_/div_(other) whose result type cannot be cast back to t's: torch's
    RuntimeError, not numpy's ufunc casting TypeError; t is left as it was."""
    make, name, other = case
    t = make(mg)
    before = t.numpy().copy()
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        getattr(t, name)(other(mg))
    np.testing.assert_array_equal(t.numpy(), before)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        getattr(make(torch), name)(other(torch))
