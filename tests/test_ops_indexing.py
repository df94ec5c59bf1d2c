"""__getitem__ (basic, integer-array, boolean-mask), __setitem__ and in-place ops, embedding."""
import numpy as np
import pytest
from op_helpers import check_op, fp32_matches_fp64, leaf, randn

import minigrad as mg
from minigrad.ops.indexing import scatter_add_rows

IDX = np.array([[0, 2], [2, 2]])
MASK = np.array([True, False, True, True])
INDICES = [
    ("int", (4, 3), 1),
    ("neg_int", (4, 3), -1),
    ("int_int", (4, 3), (2, 1)),
    ("slice", (4, 3), slice(1, 3)),
    ("step_slice", (5, 4), (slice(None, None, 2), slice(3, 0, -1))),
    ("none_ellipsis", (2, 3, 4), (None, Ellipsis, 1)),
    ("ellipsis_slice", (2, 3, 4), (Ellipsis, slice(1, None))),
    ("int_array_repeats", (4, 3), np.array([0, 2, 2, 0, 3])),
    ("int_array_2d", (4, 3), IDX),
    ("int_array_neg", (4, 3), np.array([-1, 0, -1])),
    ("list", (4, 3), [1, 1, 3]),
    ("array_then_slice", (4, 3, 2), (np.array([3, 1, 3]), slice(None), 0)),
    ("two_arrays", (4, 3), (np.array([0, 3, 0]), np.array([2, 1, 2]))),
    ("slice_then_array", (4, 3), (slice(1, None), np.array([2, 2, 0]))),
    ("bool_mask", (4, 3), MASK),
    ("bool_mask_2d", (4, 3), np.arange(12).reshape(4, 3) % 3 == 0),
    ("bool_mask_and_slice", (4, 3), (MASK, slice(0, 2))),
    ("tensor_index", (4, 3), "tensor"),
    ("0d_ellipsis", (), Ellipsis),
    ("empty_array", (4, 3), np.array([], dtype=np.int64)),
]


@pytest.mark.parametrize("name,shape,index", INDICES, ids=[c[0] for c in INDICES])
def test_getitem_forward_and_gradcheck(name, shape, index):
    x = randn(*shape, seed=1)
    if isinstance(index, str):
        check_op("indexing", lambda t: t[mg.tensor(IDX)], x, ref=lambda v: v[IDX])
        check_op("indexing", lambda t: t[mg.tensor(MASK)], x, ref=lambda v: v[MASK])
        return
    np_index = np.asarray(index) if isinstance(index, list) else index
    check_op("indexing", lambda t: t[index], x, ref=lambda v: v[np_index])


def test_getitem_reused_and_fp32():
    x = randn(5, 3, seed=2)
    check_op("indexing", lambda t: t[1:] * t[:-1] + t[[0, 0, 1, 2]].sum(0), x,
             ref=lambda v: v[1:] * v[:-1] + v[[0, 0, 1, 2]].sum(0))
    fp32_matches_fp64(lambda t: t[np.array([1, 1, 0])] * t[0], x)


def test_scatter_add_rows_matches_add_at():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 7, 50)
    rows = rng.standard_normal((50, 4))
    expected = np.zeros((7, 4))
    np.add.at(expected, ids, rows)
    np.testing.assert_allclose(scatter_add_rows(np.zeros((7, 4)), ids, rows), expected, rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (7, 1), (7, 5), (7, 3, 2)])
def test_scatter_add_rows_kernel_accumulates_repeats_in_order(dtype, shape):
    rng = np.random.default_rng(4)
    ids = np.concatenate([[6, 6, 0], rng.integers(0, 7, 60), [6]])   # repeats, first and last rows
    rows = rng.standard_normal((ids.size,) + shape[1:]).astype(dtype)
    expected = np.zeros(shape, dtype)
    for i, row in zip(ids, rows):               # the order the kernel promises
        expected[i] += row
    out = scatter_add_rows(np.zeros(shape, dtype), ids, rows)
    np.testing.assert_array_equal(out, expected)
    # int32 and uint ids, a non-contiguous rows view: the same sums
    strided = np.repeat(rows, 2, axis=0)[::2]
    np.testing.assert_array_equal(scatter_add_rows(np.zeros(shape, dtype), ids.astype(np.uint32), strided),
                                  expected)


def test_scatter_add_rows_rejects_bad_ids_and_shapes():
    with pytest.raises(IndexError, match=r"scatter_add_rows: ids contains 4, outside \[0, 4\)"):
        scatter_add_rows(np.zeros((4, 3)), np.array([0, 4]), np.ones((2, 3)))
    with pytest.raises(IndexError, match="outside"):
        scatter_add_rows(np.zeros((4, 3)), np.array([-1]), np.ones((1, 3)))
    with pytest.raises(ValueError, match="scatter_add_rows: rows"):
        scatter_add_rows(np.zeros((4, 3)), np.array([0, 1]), np.ones((3, 3)))


def test_getitem_errors_name_op_and_shape():
    x = mg.ones(4, 3)
    with pytest.raises(IndexError, match=r"getitem: index \[5\] is invalid for shape \(4, 3\)"):
        x[5]
    with pytest.raises(IndexError, match=r"getitem: index \[int64 array\(2,\)\] is invalid for shape \(4, 3"):
        x[np.array([0, 4])]
    with pytest.raises(IndexError, match=r"getitem: .*\(4, 3\)"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="integer or bool"):
        x[np.array([0.5])]
    assert [t.shape for t in mg.ones(3, 2)] == [(2,)] * 3     # iteration stops at IndexError


def test_setitem_in_graph_and_version():
    torch = pytest.importorskip("torch")
    x0, v0 = randn(4, 3, seed=4), randn(3, seed=5)
    x, v = leaf(x0), leaf(v0)
    y = x * 2
    y[1] = v
    y[2:, 0] = 7.0
    y[np.array([True, False, False, True])] *= 3     # getitem + setitem on a mask
    assert y._version == 3
    (y * y).sum().backward()
    tx, tv = torch.tensor(x0, requires_grad=True), torch.tensor(v0, requires_grad=True)
    ty = tx * 2
    ty[1] = tv
    ty[2:, 0] = 7.0
    ty[torch.tensor([True, False, False, True])] *= 3
    (ty * ty).sum().backward()
    np.testing.assert_allclose(y.data, ty.detach().numpy())
    np.testing.assert_allclose(x.grad.data, tx.grad.numpy())
    np.testing.assert_allclose(v.grad.data, tv.grad.numpy())


def test_setitem_gradcheck():
    def fn(x, v):
        y = x * 1.0
        y[np.array([0, 2]), 1:] = v
        return y * x
    check_op("indexing", fn, randn(3, 3, seed=6), randn(2, 2, seed=7))
    check_op("indexing", fn, randn(3, 3, seed=6), randn(2, seed=7))     # broadcast value


def test_inplace_ops_bump_version_and_are_checked():
    x = leaf(randn(3, seed=8))
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x += 1
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x[0] = 1.0
    with mg.no_grad():              # an optimizer-style update is fine
        before = x.data
        x -= 0.5 * x.detach()
        assert x.data is before and x._version == 1
    y = x.exp()                     # saves its output
    y += 1                          # modifies the saved output in place
    with pytest.raises(RuntimeError, match="modified in place"):
        y.sum().backward()


def test_inplace_arithmetic_in_graph_matches_out_of_place():
    x0, w0 = randn(2, 3, seed=9), randn(3, seed=10)

    def f(x, w):
        y = x * 1.0
        y += w
        y *= x
        y -= 2.0
        y /= w * w + 1
        y **= 2
        return y

    check_op("indexing", f, x0, w0,
             ref=lambda x, w: (((x + w) * x - 2.0) / (w * w + 1)) ** 2)


def test_inplace_with_itself_in_graph():
    check_op("indexing", lambda x: _self_inplace(x * 1.0), randn(4, seed=16), ref=lambda v: 1.5 * v ** 4)


def _self_inplace(y):
    y *= y
    y += y
    y *= y * 0.375      # (2 v^2)^2 * 0.375 = 1.5 v^4
    return y


def test_inplace_outside_graph():
    a = mg.zeros(2, 3)
    a += mg.ones(3)
    a.mul_(3).sub_(1).div_(2)
    np.testing.assert_array_equal(a.data, np.ones((2, 3)))
    assert a._version == 4
    a.zero_()
    a.fill_(2.5)
    np.testing.assert_array_equal(a.data, np.full((2, 3), 2.5))
    a.copy_(mg.tensor(np.arange(3.0), dtype=mg.float64))
    assert a.dtype == mg.float32 and a.data[1, 2] == 2
    with pytest.raises(ValueError, match=r"add_: \(2, 3\) \+= \(4, 2, 3\)"):
        a += mg.ones(4, 2, 3)
    with pytest.raises(TypeError, match="float64 values into a float32"):
        a += mg.ones(3, dtype=mg.float64)
    ids = mg.arange(4)
    ids[ids > 1] = 0
    np.testing.assert_array_equal(ids.data, [0, 1, 0, 0])


def test_inplace_into_buffer_that_does_not_require_grad():
    w = leaf(randn(3, seed=11))
    buf = mg.zeros(3, dtype=mg.float64)
    buf += w * 2
    buf[0] = w[1]
    buf.sum().backward()
    np.testing.assert_allclose(w.grad.data, [0, 3, 2])   # buf[0] = 2 w0 was overwritten


@pytest.mark.parametrize("ids_shape", [(5,), (2, 3), (), (1, 1)], ids=str)
def test_embedding_forward_and_gradcheck(ids_shape):
    rng = np.random.default_rng(12)
    ids = rng.integers(0, 4, ids_shape)
    check_op("embedding", lambda w: mg.embedding(ids, w), randn(4, 3, seed=13), ref=lambda w: w[ids])
    check_op("embedding", lambda w: mg.embedding(mg.tensor(ids), w) * w[0], randn(4, 3, seed=13))


def test_embedding_padding_idx_repeats_and_fp32():
    w = leaf(randn(5, 2, seed=14))
    out = mg.embedding(mg.tensor([[1, 0, 1], [4, 1, 0]]), w, padding_idx=0)
    out.sum().backward()
    np.testing.assert_array_equal(w.grad.data[:, 0], [0, 3, 0, 0, 1])
    fp32_matches_fp64(lambda w: mg.embedding(np.array([3, 3, 1]), w), randn(4, 6, seed=15))


def test_embedding_errors():
    w = mg.ones(5, 2)
    with pytest.raises(IndexError, match=r"embedding: ids contains 5, outside \[0, 5\)"):
        mg.embedding(mg.tensor([0, 5]), w)
    with pytest.raises(IndexError, match=r"embedding: ids contains -1"):
        mg.embedding(np.array([-1]), w)
    with pytest.raises(TypeError, match="embedding: ids must be an integer array"):
        mg.embedding(np.array([0.0]), w)
    with pytest.raises(ValueError, match=r"embedding: weight must be .* \(5,\)"):
        mg.embedding(np.array([0]), mg.ones(5))


# PyTorch applies an int first (a select) and the arrays to what is left; numpy counts an int beside
# an array as an array, which moves the result's dims: x[1, :, [0, 3]] is (3, 2), not numpy's (2, 3)
INT_BESIDE_ARRAY = [     # (name, shape, index, pre, rest): PyTorch's x[index] is numpy's x[pre][rest]
    ("int_slice_array", (2, 3, 4), (1, slice(None), [0, 3]), 1, (slice(None), [0, 3])),
    ("arrays_around_int", (2, 3, 4, 5), (slice(None), [0, 1], 1, [0, 3]), (slice(None), slice(None), 1),
     (slice(None), [0, 1], [0, 3])),
    ("int_ellipsis_array", (2, 3, 4), (-1, Ellipsis, [[0], [3]]), -1, (Ellipsis, [[0], [3]])),
    ("0d_tensor_is_an_int", (2, 3, 4), "0d", 1, (slice(None), [0, 3])),
    ("int_none_mask", (2, 3, 4), (0, None, slice(None), MASK), 0, (None, slice(None), MASK)),
]


@pytest.mark.parametrize("name,shape,index,pre,rest", INT_BESIDE_ARRAY, ids=[c[0] for c in INT_BESIDE_ARRAY])
def test_int_beside_array_index_follows_pytorch(name, shape, index, pre, rest):
    if index == "0d":
        index = (mg.tensor(1), slice(None), mg.tensor([0, 3]))
    x = randn(*shape, seed=8)
    y = check_op("indexing", lambda t: t[index], x, ref=lambda a: a[pre][rest])
    v = randn(*y.shape, seed=9)
    expected = x.copy()
    expected[pre][rest] = v                      # a[pre] is a view
    check_op("indexing", lambda t, w: _set(t * 1.0, index, w), x, v, ref=lambda a, b: expected)
    torch = pytest.importorskip("torch")
    t_index = tuple(torch.tensor(i.data) if isinstance(i, mg.Tensor) else torch.tensor(i)
                    if isinstance(i, (list, np.ndarray)) else i for i in index)
    assert y.shape == tuple(torch.tensor(x)[t_index].shape)


def _set(t, index, value):
    t[index] = value
    return t


def test_setitem_value_with_extra_leading_size1_dims():
    x = mg.zeros(2, 3, requires_grad=True)
    w = mg.tensor([[1.0, 2.0, 3.0]], requires_grad=True)      # (1, 3) into a (3,) row, as torch allows
    y = x * 1
    y[0] = w
    (y * mg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
    assert w.grad.shape == (1, 3) and w.grad.tolist() == [[1.0, 2.0, 3.0]]
    assert x.grad.tolist() == [[0.0, 0.0, 0.0], [4.0, 5.0, 6.0]]
    check_op("indexing", lambda t, v: _set(t * 1.0, (0, slice(1, None)), v), randn(2, 3),
             randn(1, 1, 2, seed=1))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32])
def test_small_integer_index_arrays_backward(dtype):
    # the backward wraps negative ids by adding the dim's size, which overflowed a small index dtype
    n = 40_000
    x = mg.zeros(n, 2, requires_grad=True)
    idx = np.array([1, 5, 5, -1] if np.dtype(dtype).kind == "i" else [1, 5, 5, 255], dtype=dtype)
    x[idx].sum().backward()
    expected = np.zeros((n, 2))
    np.add.at(expected, idx.astype(np.int64), 1.0)
    np.testing.assert_array_equal(x.grad.data, expected)
    y = x.detach() * 1
    y[mg.tensor(idx), 1] = 7.0
    assert (y.data[idx.astype(np.int64), 1] == 7).all()
