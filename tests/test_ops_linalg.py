"""matmul: every numpy case (1-D, 2-D, batched, broadcast batch dims), gradcheck, errors."""
import numpy as np
import pytest
from op_helpers import check_op, fp32_matches_fp64, leaf, randn

import minigrad as mg

CASES = [
    ((3,), (3,)),              # dot -> 0-d
    ((3,), (3, 4)),            # vector @ matrix
    ((4, 3), (3,)),            # matrix @ vector
    ((2, 5, 3), (3,)),         # batched matrix @ vector
    ((3,), (2, 3, 4)),         # vector @ batched matrix
    ((4, 3), (3, 2)),          # non-square
    ((1, 1), (1, 1)),
    ((2, 4, 3), (3, 5)),       # batched @ matrix (folded GEMM both ways)
    ((4, 3), (2, 3, 5)),       # matrix @ batched
    ((2, 4, 3), (2, 3, 5)),    # same batch
    ((2, 1, 4, 3), (3, 3, 2)),  # broadcast batch dims
    ((1, 4, 3), (2, 3, 2)),    # size-1 batch on the left
]


@pytest.mark.parametrize("shapes", CASES, ids=str)
def test_matmul_forward_and_gradcheck(shapes):
    a, b = randn(*shapes[0], seed=1), randn(*shapes[1], seed=2)
    check_op("matmul", lambda x, y: x @ y, a, b, ref=np.matmul)


def test_matmul_reused_and_functional_forms():
    a = randn(3, 3, seed=3)
    check_op("matmul", lambda x: x @ x @ x.T, a, ref=lambda x: x @ x @ x.T)
    check_op("matmul", lambda x: mg.matmul(x, x.sum(1)), a, ref=lambda x: x @ x.sum(1))
    check_op("matmul", lambda x: x.matmul(np.eye(3)), a, ref=lambda x: x)
    check_op("matmul", lambda x: np.ones((2, 3)) @ x, a, ref=lambda x: np.ones((2, 3)) @ x)


def test_matmul_one_side_needs_grad():
    a, b = leaf(randn(2, 3, 4, seed=4)), mg.tensor(randn(4, 5, seed=5), dtype=mg.float64)
    (a @ b).sum().backward()
    np.testing.assert_allclose(a.grad.data, np.ones((2, 3, 5)) @ b.data.T)
    assert b.grad is None


@pytest.mark.parametrize("shapes", [((5, 7), (7, 3)), ((2, 6, 7), (7, 3)), ((7,), (2, 7, 3))], ids=str)
def test_matmul_fp32(shapes):
    fp32_matches_fp64(lambda x, y: x @ y, randn(*shapes[0], seed=6), randn(*shapes[1], seed=7))


def test_matmul_errors_name_both_shapes():
    cases = [
        (((4, 3), (5, 2)), r"matmul: \(4, 3\) @ \(5, 2\): inner dimensions 3 and 5 differ"),
        (((3,), (4,)), r"matmul: \(3,\) @ \(4,\): inner dimensions 3 and 4 differ"),
        (((2, 4, 3), (3, 3, 5)), r"matmul: \(2, 4, 3\) @ \(3, 3, 5\): batch dimensions \(2,\) and \(3,\)"),
        (((), (3,)), r"matmul: \(\) @ \(3,\): both operands need at least 1 dimension"),
    ]
    for (sa, sb), msg in cases:
        with pytest.raises(ValueError, match=msg):
            mg.zeros(*sa) @ mg.zeros(*sb)
    with pytest.raises(TypeError, match="mix float32 and float64"):
        mg.zeros(2, 2) @ mg.zeros(2, 2, dtype=mg.float64)


def test_matmul_against_torch():
    torch = pytest.importorskip("torch")
    for sa, sb in CASES:
        a, b = randn(*sa, seed=8), randn(*sb, seed=9)
        x, y = leaf(a), leaf(b)
        out = x @ y
        g = randn(*out.shape, seed=10)
        out.backward(mg.tensor(g, dtype=mg.float64))
        tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        to = tx @ ty
        to.backward(torch.tensor(g))
        np.testing.assert_allclose(out.data, to.detach().numpy(), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(y.grad.data, ty.grad.numpy(), rtol=1e-12, atol=1e-13)


EMPTY_CASES = [((4, 2, 0), (0, 3)), ((2, 3), (3, 0)), ((2, 0), (0, 3)), ((0,), (0,)), ((0, 3), (3, 2)),
               ((2, 1, 4, 0), (3, 0, 2)), ((0, 2, 3), (3,)), ((0,), (0, 2))]


@pytest.mark.parametrize("sa,sb", EMPTY_CASES)
def test_matmul_with_size_0_dims(sa, sb):
    # a size-0 inner dim gives zeros, a size-0 outer or batch dim an empty result (as in torch)
    a, b = leaf(randn(*sa)), leaf(randn(*sb, seed=1))
    y = a @ b
    assert y.shape == np.matmul(a.data, b.data).shape and not y.data.any()
    g = randn(*y.shape, seed=2)
    y.backward(g)
    assert a.grad.shape == sa and b.grad.shape == sb
    torch = pytest.importorskip("torch")
    ta, tb = (torch.tensor(t.data, requires_grad=True) for t in (a, b))
    (ta @ tb).backward(torch.tensor(g))
    np.testing.assert_allclose(a.grad.data, ta.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.data, tb.grad.numpy(), rtol=1e-12)
