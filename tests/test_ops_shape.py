"""Shape, join and pad ops: forward vs numpy, gradcheck, PyTorch conventions, error messages."""
import numpy as np
import pytest
from op_helpers import check_op, fp32_matches_fp64, leaf, randn

import minigrad as mg

SHAPE_OPS = [
    ("reshape", (2, 3, 4), lambda t: t.reshape(4, 6), lambda v: v.reshape(4, 6)),
    ("reshape_tuple_-1", (2, 3, 4), lambda t: t.reshape((-1, 4)), lambda v: v.reshape(-1, 4)),
    ("view_0d", (), lambda t: t.view(1, 1), lambda v: v.reshape(1, 1)),
    ("flatten", (2, 3, 4), lambda t: t.flatten(), lambda v: v.reshape(-1)),
    ("flatten_1", (2, 3, 4), lambda t: t.flatten(1), lambda v: v.reshape(2, 12)),
    ("flatten_mid", (2, 3, 4, 5), lambda t: t.flatten(1, 2), lambda v: v.reshape(2, 12, 5)),
    ("squeeze", (1, 3, 1, 2), lambda t: t.squeeze(), lambda v: v.reshape(3, 2)),
    ("squeeze_dim", (1, 3, 1, 2), lambda t: t.squeeze(2), lambda v: v.reshape(1, 3, 2)),
    ("squeeze_non1", (1, 3), lambda t: t.squeeze(1), lambda v: v),
    ("unsqueeze", (3, 2), lambda t: t.unsqueeze(-1), lambda v: v[..., None]),
    ("unsqueeze0", (), lambda t: t.unsqueeze(0), lambda v: v[None]),
    ("transpose", (2, 3, 4), lambda t: t.transpose(0, 2), lambda v: v.transpose(2, 1, 0)),
    ("permute", (2, 3, 4), lambda t: t.permute(1, 2, 0), lambda v: v.transpose(1, 2, 0)),
    ("T", (3, 5), lambda t: t.T, lambda v: v.T),
    ("T_3d", (2, 3, 4), lambda t: t.T, lambda v: v.T),
    ("expand", (3, 1), lambda t: t.expand(3, 4), lambda v: np.broadcast_to(v, (3, 4))),
    ("expand_lead", (1, 4), lambda t: t.expand(2, -1, 4), lambda v: np.broadcast_to(v, (2, 1, 4))),
    ("expand_0d", (), lambda t: t.expand(2, 3), lambda v: np.broadcast_to(v, (2, 3))),
    ("reused_transpose", (3, 3), lambda t: t * t.T, lambda v: v * v.T),
]


@pytest.mark.parametrize("name,shape,op,ref", SHAPE_OPS, ids=[c[0] for c in SHAPE_OPS])
def test_shape_ops(name, shape, op, ref):
    check_op("shape", op, randn(*shape, seed=1), ref=ref)


def test_shape_ops_fp32():
    fp32_matches_fp64(lambda t: t.permute(2, 0, 1).reshape(4, -1).expand(2, 4, 6).T, randn(2, 3, 4))


def test_cat_stack_split_chunk():
    a, b, c = randn(2, 3, seed=1), randn(2, 1, seed=2), randn(2, 4, seed=3)
    check_op("join", lambda x, y, z: mg.cat([x, y, z], dim=1), a, b, c,
             ref=lambda x, y, z: np.concatenate([x, y, z], axis=1))
    check_op("join", lambda x, y: mg.cat([x, y * 2, x], dim=-1), a, b,
             ref=lambda x, y: np.concatenate([x, 2 * y, x], axis=-1))
    check_op("join", lambda x, y: mg.stack([x, y, x]), a, a * 2,
             ref=lambda x, y: np.stack([x, y, x]))
    check_op("join", lambda x: mg.stack([x, x], dim=-1), a, ref=lambda x: np.stack([x, x], axis=-1))
    check_op("join", lambda x: mg.stack([x, x * x]), randn(seed=4), ref=lambda x: np.stack([x, x * x]))
    check_op("join", lambda x: x.split(2, dim=1), c, ref=lambda x: (x[:, :2], x[:, 2:]))
    check_op("join", lambda x: x.split([1, 3, 0], dim=1), c, ref=lambda x: (x[:, :1], x[:, 1:], x[:, 4:]))
    check_op("join", lambda x: x.chunk(3, dim=1), randn(2, 7, seed=5),
             ref=lambda x: (x[:, :3], x[:, 3:6], x[:, 6:]))
    check_op("join", lambda x: x.chunk(2)[1], randn(5, 2, seed=6), ref=lambda x: x[3:])


def test_split_unused_outputs_get_zero_grad():
    x = leaf(randn(6, seed=7))
    q, k, v = x.chunk(3)
    (k * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [0, 0, 3, 3, 0, 0])


def test_split_matches_torch_conventions():
    torch = pytest.importorskip("torch")
    x = np.arange(7.0)
    for args in [(3,), ([2, 5],), (7,), (10,)]:
        ours = [p.data for p in mg.tensor(x).split(*args)]
        theirs = [p.numpy() for p in torch.tensor(x).split(*args)]
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            np.testing.assert_array_equal(o, t)
    for n in (1, 2, 3, 4, 6, 7, 9):
        assert [p.shape for p in mg.tensor(x).chunk(n)] == [tuple(p.shape) for p in torch.tensor(x).chunk(n)]


PADS = [((3, 4), (1, 2)), ((3, 4), (1, 0, 0, 2)), ((2, 3, 4), (0, 1, 2, 0)), ((3, 5), (-1, 2)),
        ((3, 5), (2, -3, -1, 1)), ((4,), (2, -3)), ((2, 2), (0, 0))]


@pytest.mark.parametrize("shape,pad", PADS, ids=str)
def test_pad_matches_torch_convention(shape, pad):
    x = randn(*shape, seed=8)
    out = check_op("join", lambda t: mg.pad(t, pad, value=0.5), x)
    torch = pytest.importorskip("torch")
    expected = torch.nn.functional.pad(torch.tensor(x), pad, value=0.5).numpy()
    np.testing.assert_array_equal(out.data, expected)


def test_pad_simple_values():
    y = mg.pad(mg.tensor([[1.0, 2.0]]), (1, 2, 1, 0))
    np.testing.assert_array_equal(y.data, [[0, 0, 0, 0, 0], [0, 1, 2, 0, 0]])


def test_shape_errors_name_op_and_shapes():
    x = mg.ones(2, 3)
    cases = [
        (lambda: x.reshape(4, 2), ValueError,
         r"reshape: cannot view shape \(2, 3\) \(6 elements\) as \(4, 2\)"),
        (lambda: x.permute(0, 0), ValueError, r"permute: \(0, 0\) is not a permutation .* \(2, 3\)"),
        (lambda: x.permute(1, 0, 2), ValueError, r"permute: 3 dims"),
        (lambda: x.transpose(0, 2), IndexError, r"transpose: dim 2 is out of range for shape \(2, 3\)"),
        (lambda: x.expand(4, 3), ValueError, r"expand: shape \(2, 3\) cannot expand to \(4, 3\)"),
        (lambda: x.unsqueeze(3), IndexError, r"unsqueeze: dim 3"),
        (lambda: mg.cat([x, mg.ones(3, 3)], dim=1), ValueError,
         r"cat: tensor 1 has shape \(3, 3\) but tensor 0 has shape \(2, 3\); sizes must match except in dim 1"
         ),
        (lambda: mg.cat([]), ValueError, "cat: expected a non-empty"),
        (lambda: mg.stack([x, mg.ones(3, 2)]), ValueError, r"stack: tensor 1 has shape \(3, 2\)"),
        (lambda: x.split([1, 1], dim=1), ValueError, r"split: sizes \[1, 1\] do not add up to 3"),
        (lambda: x.chunk(0), ValueError, "chunk: chunks must be positive"),
        (lambda: mg.pad(x, (1,)), ValueError, "pad: the pad tuple"),
        (lambda: mg.pad(x, (1, 1, 1, 1, 1, 1)), ValueError, r"pad: .* covers 3 dims .* \(2, 3\)"),
        (lambda: mg.pad(x, (-2, -2)), ValueError, "negative size"),
        (lambda: mg.pad(x, (1, 1), mode="reflect"), NotImplementedError, "reflect"),
        (lambda: x.flatten(1, 0), ValueError, "flatten: start_dim"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fn()


def test_cat_of_one_tensor_is_a_new_tensor():
    x = mg.tensor([1.0, 2.0])
    y = mg.cat([x])
    y += 10
    assert y is not x and x.tolist() == [1.0, 2.0] and y.tolist() == [11.0, 12.0]
    w = mg.ones(2, requires_grad=True)
    (mg.cat([w]) * mg.tensor([2.0, 3.0])).sum().backward()
    assert w.grad.tolist() == [2.0, 3.0]


def test_clone_and_casts_pass_gradients_through():
    # clone and float casts had no gradient check: clone is the identity; a float64 -> float32 ->
    # float64 round trip carries the float32 rounding only in the forward, the backward casts back
    check_op("shape", lambda x: x.clone() * x, randn(3, 4, seed=2), ref=lambda x: x * x)
    x = leaf(randn(2, 5, seed=3))
    y = x.float()
    assert y.dtype == np.float32
    (y * mg.tensor(np.arange(10, dtype=np.float32).reshape(2, 5))).sum().backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad.data, np.arange(10.0).reshape(2, 5))
    z = mg.tensor(randn(4, seed=4).astype(np.float32), requires_grad=True)
    (z.double() ** 2).sum().backward()
    assert z.grad.dtype == np.float32
    np.testing.assert_allclose(z.grad.data, 2 * z.data, rtol=1e-7)
