"""Regressions from an audit of the Tensor API against PyTorch's semantics (corner cases where
minigrad silently gave another answer). The known values are PyTorch 2.x's; the last test checks
them against torch itself when it is installed."""
import numpy as np
import pytest

import minigrad as mg


def test_numpy_float64_scalar_acts_as_a_python_scalar():
    """np.float64 subclasses float; it used to reach numpy as a float64 and compare in float64."""
    x = mg.tensor([0.1])                                    # float32 0.1 != float64 0.1
    assert (x == np.float64(0.1)).data.tolist() == [True]   # torch: True (the scalar becomes float32)
    assert (np.float64(0.1) < x).data.tolist() == [False]
    assert (x <= np.float64(0.1)).data.tolist() == [True]
    y = (x + np.float64(0.1))
    assert y.dtype == np.float32 and y.data[0] == np.float32(0.1) + np.float32(0.1)


def test_clamp_with_numpy_float64_bound_passes_gradient_at_the_bound():
    x = mg.tensor([0.1, 0.2], requires_grad=True)
    x.clamp(max=np.float64(0.1)).sum().backward()
    assert x.grad.data.tolist() == [1.0, 0.0]             # x == max: inside the closed range


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
@pytest.mark.parametrize("dim", [0, -1, None])
def test_argmax_of_a_0d_tensor_is_0d_also_with_keepdim(fn, dim):
    out = getattr(mg.tensor(1.5), fn)(dim=dim, keepdim=True)
    assert out.shape == () and out.item() == 0 and out.dtype == np.int64


def test_argmax_keepdim_shapes_unchanged():
    x = mg.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]])
    assert x.argmax(1, keepdim=True).data.tolist() == [[1], [0]]
    assert x.argmin(-2).data.tolist() == [0, 1, 1]
    assert x.argmax(keepdim=True).shape == (1, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_softmax_of_a_slice_holding_inf_is_nan_like_softmax(dtype):
    x = mg.tensor(np.array([[np.inf, 1.0, 2.0], [0.0, 1.0, 2.0], [-np.inf, -np.inf, -np.inf],
                            [-np.inf, 0.0, 1.0]], dtype), requires_grad=True)
    y = x.log_softmax(1)
    assert y.dtype == dtype
    assert np.isnan(y.data[0]).all()                       # torch: all nan (was [nan, -inf, -inf])
    np.testing.assert_allclose(y.data[1], [-2.40760596, -1.40760596, -0.40760596], rtol=1e-6)
    assert np.isnan(y.data[2]).all()
    assert y.data[3, 0] == -np.inf
    assert np.array_equal(np.isnan(y.data), np.isnan(x.softmax(1).data))
    y[1].sum().backward()                                  # finite rows keep finite gradients
    assert np.isfinite(x.grad.data[1]).all()


def test_log_softmax_inf_along_dim_0():
    x = mg.tensor(np.array([[np.inf, 1.0], [0.0, 1.0]]))
    y = x.log_softmax(0).data
    assert np.isnan(y[:, 0]).all()
    np.testing.assert_allclose(y[:, 1], [np.log(0.5)] * 2)


def test_abs_gradient_at_nan_and_zero_is_zero():
    x = mg.tensor(np.array([np.nan, -2.0, 0.0, -0.0, 3.0]), requires_grad=True)
    x.abs().backward(mg.tensor(np.full(5, 2.0)))
    assert x.grad.data.tolist() == [0.0, -2.0, 0.0, 0.0, 2.0]   # torch: sign(nan) = 0


def test_transpose_of_a_0d_tensor_is_itself():
    x = mg.tensor(2.0, requires_grad=True)
    y = x.transpose(0, -1)
    assert y.shape == () and y.item() == 2.0
    (y * 3).backward()
    assert x.grad.item() == 3.0
    with pytest.raises(IndexError):
        x.transpose(0, 1)


@pytest.mark.parametrize("call", [lambda x: x.split(1), lambda x: x.chunk(1), lambda x: mg.split(x, [1])])
def test_split_chunk_of_a_0d_tensor_raise_a_clear_error(call):
    with pytest.raises(ValueError, match="at least 1 dimension"):
        call(mg.tensor(2.0))


def test_against_torch():
    torch = pytest.importorskip("torch")
    # numpy float64 scalars
    s = np.float64(0.1)
    assert (mg.tensor([0.1]) == s).data.tolist() == (torch.tensor([0.1]) == s).tolist()
    # argmax 0-d keepdim
    assert mg.tensor(1.5).argmax(0, keepdim=True).shape == tuple(torch.tensor(1.5).argmax(0, True).shape)
    # log_softmax with inf
    a = np.array([[np.inf, 1.0, 2.0], [-np.inf, 0.0, np.inf], [0.0, 1.0, 2.0]])
    np.testing.assert_allclose(mg.tensor(a).log_softmax(1).data, torch.tensor(a).log_softmax(1).numpy())
    np.testing.assert_allclose(mg.tensor(a).log_softmax(0).data, torch.tensor(a).log_softmax(0).numpy())
    # abs grad at nan
    v = np.array([np.nan, -1.0, 0.0, 2.0])
    xm, xt = mg.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    xm.abs().sum().backward()
    xt.abs().sum().backward()
    np.testing.assert_array_equal(xm.grad.data, xt.grad.numpy())
