"""The Tensor object and the creation functions as a PyTorch user writes them (audit regressions)."""
import copy
import pickle

import numpy as np
import pytest

import minigrad as mg


# ---- numpy interop --------------------------------------------------------------------------------
def test_np_array_copies_and_np_asarray_shares():
    t = mg.tensor([1.0, 2.0])
    a = np.array(t)                    # copy=True: writing it must not change the tensor
    a[0] = 9.0
    assert t.tolist() == [1.0, 2.0]
    b = np.asarray(t)                  # as torch: shares
    b[1] = 7.0
    assert t.tolist() == [1.0, 7.0]
    assert np.array(t, copy=False) is t.data
    with pytest.raises(ValueError):
        np.array(t, dtype=np.float64, copy=False)
    assert np.array(t, dtype=np.float64).dtype == np.float64


# ---- formatting and repr --------------------------------------------------------------------------
def test_format_of_0d_tensor_is_its_value():
    loss = mg.tensor([1.0, 2.0], requires_grad=True).sum()
    assert f"{loss:.3f}" == "3.000"
    assert f"{mg.tensor(3)}" == "3"
    assert f"{mg.tensor(2.5)}" == "2.5"
    assert f"{mg.tensor([2.5])}" == repr(mg.tensor([2.5]))
    with pytest.raises(TypeError):
        f"{mg.tensor([2.5]):.2f}"


def test_repr_omits_default_dtypes_and_names_empty_sizes():
    assert repr(mg.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(mg.tensor([True, False])) == "tensor([ True, False])"
    assert repr(mg.tensor(3)) == "tensor(3)"
    assert repr(mg.tensor([1], dtype=mg.int32)) == "tensor([1], dtype=int32)"
    assert repr(mg.tensor([1.5], dtype=mg.float64)) == "tensor([1.5], dtype=float64)"
    assert repr(mg.tensor([])) == "tensor([])"
    assert repr(mg.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(mg.zeros(0, dtype=mg.int64)) == "tensor([], dtype=int64)"


# ---- .grad assignment -----------------------------------------------------------------------------
def test_assigned_grad_is_checked():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError):
        x.grad = np.ones(2, dtype=np.float32)
    with pytest.raises(RuntimeError):
        x.grad = mg.tensor([0.0])           # would have broadcast into the next backward
    x.grad = mg.tensor([5.0, 5.0])
    (x * 1).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]
    x.grad = None
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


# ---- pickle / deepcopy ----------------------------------------------------------------------------
def test_pickle_of_non_leaf_is_a_leaf_without_the_graph():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    big = mg.ones(1000, 2)
    y = x * big.sum(0)
    s = pickle.dumps(y)
    assert len(s) < 2000                   # not the graph's saved 1000x2 operand
    u = pickle.loads(s)
    assert u.is_leaf and u.requires_grad and u.tolist() == [1000.0, 2000.0]
    u.sum().backward()
    assert u.grad.tolist() == [1.0, 1.0] and x.grad is None


def test_deepcopy_keeps_values_grad_and_flags():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    d = copy.deepcopy(x)
    assert d.tolist() == [1.0, 2.0] and d.requires_grad and d.is_leaf
    assert d.grad.tolist() == [2.0, 4.0] and d.grad is not x.grad
    d.data[0] = 5.0
    assert x.tolist() == [1.0, 2.0]
    p = mg.nn.Parameter(mg.tensor([1.0]))
    q = copy.deepcopy(p)
    assert type(q) is mg.nn.Parameter and q.requires_grad


def test_shallow_copy_shares_memory_and_version():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    c = copy.copy(y)
    assert c.is_leaf and c.requires_grad and c.data is y.data
    z = mg.tensor([1.0, 2.0], requires_grad=True)
    w = z.exp()
    shallow = copy.copy(w).detach()     # writing the copy in place is seen by w's backward
    shallow.add_(1)
    with pytest.raises(RuntimeError):
        w.sum().backward()


# ---- conversions --------------------------------------------------------------------------------
def test_to_device_dtype_and_other_tensor():
    z = mg.tensor([1.5, -2.5], requires_grad=True)
    assert z.to("cpu") is z and z.to(device="cpu") is z and z.cpu() is z
    y = z.to("cpu", mg.float64)
    assert y.dtype == mg.float64 and y.grad_fn is not None
    assert z.to(mg.tensor([1])).tolist() == [1, -2]
    assert z.to(dtype=mg.float64).dtype == mg.float64
    c = z.to(copy=True)
    assert c is not z and c.tolist() == z.tolist()
    with pytest.raises(ValueError, match="CPU only"):
        z.to("cuda:0")


def test_cast_methods_and_new_constructors():
    z = mg.tensor([1.7, -2.7, 0.0])
    assert z.long().dtype == mg.int64 and z.long().tolist() == [1, -2, 0]
    assert z.int().dtype == mg.int32
    assert z.bool().tolist() == [True, True, False]
    assert mg.tensor([1, 2]).type_as(z).dtype == mg.float32
    assert z.dim() == 1 and z.element_size() == 4 and mg.tensor([1]).element_size() == 8
    assert z.is_floating_point() and not mg.tensor([1]).is_floating_point()
    assert z.is_contiguous()
    d = mg.tensor([1.0], dtype=mg.float64)
    assert d.new_zeros(2, 3).shape == (2, 3) and d.new_zeros((2,)).dtype == mg.float64
    assert mg.tensor([1, 2]).new_ones(2).tolist() == [1, 1]
    assert d.new_full((2,), 3).tolist() == [3.0, 3.0] and d.new_full((2,), 3).dtype == mg.float64
    assert d.new_tensor([1, 2]).dtype == mg.float64
    assert d.new_zeros(2, requires_grad=True).requires_grad


# ---- bool / integer operators ---------------------------------------------------------------------
def test_mask_operators():
    m = mg.tensor([True, False, True])
    n = mg.tensor([True, True, False])
    assert (m & n).tolist() == [True, False, False]
    assert (m | n).tolist() == [True, True, True]
    assert (m ^ n).tolist() == [False, True, True]
    assert (~m).tolist() == [False, True, False]
    assert (m & True).tolist() == [True, False, True] and (False | m).tolist() == [True, False, True]
    assert (m & np.array([False, True, True])).tolist() == [False, False, True]
    assert (mg.tensor([6, 5]) & 3).tolist() == [2, 1] and (~mg.tensor([0])).tolist() == [-1]
    assert (m & n).dtype == mg.bool_ and not (m & n).requires_grad
    x = mg.tensor([1.0, -1.0])
    assert ((x > 0) & (x < 2)).tolist() == [True, False]
    with pytest.raises(TypeError):
        x & x
    with pytest.raises(TypeError):
        _ = ~x


# ---- creation -------------------------------------------------------------------------------------
def test_arange_takes_0d_tensors_and_does_not_drift():
    assert mg.arange(mg.tensor(3)).dtype == mg.int64
    assert mg.arange(mg.tensor(3)).tolist() == [0, 1, 2]
    # numpy's float32 arange adds a rounded step: element 4 of arange(1, 2.2, 0.3) was 2.1999998
    a = mg.arange(1, 2.2, 0.3)
    assert a.dtype == mg.float32
    np.testing.assert_array_equal(a.data, np.array([1.0, 1.3, 1.6, 1.9, 2.2], dtype=np.float32))
    b = mg.arange(0, 10.3, 0.1)
    np.testing.assert_array_equal(b.data, (np.arange(103) * 0.1).astype(np.float32))


def test_creation_matches_torch():
    torch = pytest.importorskip("torch")
    assert mg.arange(-3, 7, 0.3).shape == tuple(torch.arange(-3, 7, 0.3).shape)
    np.testing.assert_allclose(mg.arange(-3, 7, 0.3).data, torch.arange(-3, 7, 0.3).numpy(),
                               rtol=0, atol=1e-6)
    assert repr(mg.tensor([[1, 2]])) == repr(torch.tensor([[1, 2]]))
    assert repr(mg.zeros(2, 0)) == repr(torch.zeros(2, 0))
    assert f"{mg.tensor(0.25):.3f}" == f"{torch.tensor(0.25):.3f}"


def test_size_of_a_missing_dim_names_the_range():
    t = mg.zeros(2, 3)
    assert t.size(-1) == 3 and t.size(0) == 2
    with pytest.raises(IndexError, match=r"dim 5 is out of range for a 2-d tensor \(expected \[-2, 1\]\)"):
        t.size(5)
    with pytest.raises(IndexError, match="0-d tensor has no dim"):
        mg.tensor(1.0).size(0)
    with pytest.raises(TypeError, match="dim must be an int"):
        t.size(1.0)


def test_sum_of_unsigned_integers_is_int64_as_pytorch():
    for dt in (np.uint8, np.uint16, np.uint32):
        s = mg.tensor(np.array([200, 100], dtype=dt)).sum()
        assert s.dtype == np.int64 and s.item() == 300
    assert mg.tensor(np.array([[1, 2]], dtype=np.uint8)).sum(1, keepdim=True).dtype == np.int64
