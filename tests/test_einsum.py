"""einsum: explicit/implicit modes, ellipsis broadcasting, diagonals, gradcheck, torch parity, errors."""
import numpy as np
import pytest
from op_helpers import check_op, fp32_matches_fp64, leaf, randn

import minigrad as mg

# (equation, operand shapes, numpy reference or None for np.einsum itself)
CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)], None),                      # matmul
    ("ij,jk", [(3, 4), (4, 5)], None),                          # implicit mode
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], None),             # batched matmul
    ("i,j->ij", [(3,), (4,)], None),                            # outer
    ("ii", [(4, 4)], None),                                     # trace (implicit)
    ("ii->", [(4, 4)], None),
    ("ii->i", [(4, 4)], None),                                  # diagonal
    ("iji->j", [(3, 4, 3)], None),                              # diagonal across non-adjacent dims
    ("ij->ji", [(3, 5)], None),                                 # transpose
    ("ba", [(3, 5)], None),                                     # implicit transpose
    ("ij->", [(3, 5)], None),                                   # sum all
    ("ij->i", [(3, 5)], None),                                  # j summed out of the only operand
    ("ij,k->jk", [(3, 5), (2,)], None),                         # i only in operand 0
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)], None),       # bilinear
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)], None),    # attention scores
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)], None),    # ellipsis, size-1 batch broadcast
    ("...i,...i->...", [(2, 3), (1, 3)], None),
    ("a...b,...b->...a", [(2, 3, 4), (4,)], None),              # ellipsis in the middle
    ("...ij->ij", [(5, 2, 3)], lambda a: a.sum(0)),             # ellipsis summed out
    ("...ij,jk", [(2, 3, 4), (4, 5)], None),                    # implicit: ellipsis dims first
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], None),           # a contraction path
    ("iijl,jk->ik", [(3, 3, 4, 2), (4, 5)], None),              # repeated i + l summed out of op 0
    ("ij,jk->ik", [(3, 1), (2, 4)], None),                      # size-1 broadcast under a letter
    ("i,i", [(3,), (1,)], None),
    ("ii,i->i", [(3, 3), (1,)], None),                          # diagonal and a broadcast operand
    ("Ab,a", [(2, 3), (4,)], None),                             # uppercase, implicit order A < a < b
    (",i->i", [(), (3,)], None),                                # 0-d operand
    ("", [()], None),
    (" i j , j k -> i k ", [(3, 4), (4, 2)], None),             # spaces
]
IDS = [f"{eq.strip() or 'scalar'}-{shapes}" for eq, shapes, _ in CASES]


def _arrays(shapes, seed=0):
    return [randn(*s, seed=seed + k) for k, s in enumerate(shapes)]


@pytest.mark.parametrize("eq,shapes,ref", CASES, ids=IDS)
def test_einsum_forward_and_gradcheck(eq, shapes, ref):
    ref = ref or (lambda *a: np.einsum(eq, *a))
    check_op("einsum", lambda *ts: mg.einsum(eq, *ts), *_arrays(shapes), ref=ref)


def test_same_tensor_twice_sums_both_grads():
    x = randn(4, seed=1)
    check_op("einsum", lambda t: mg.einsum("i,i->", t, t), x, ref=lambda a: a @ a)
    m = randn(3, 3, seed=2)
    check_op("einsum", lambda t: mg.einsum("ij,jk->ik", t, t), m, ref=lambda a: a @ a)
    t = leaf(x)
    mg.einsum("i,i->", t, t).backward()
    np.testing.assert_allclose(t.grad.data, 2 * x)


def test_list_of_operands_and_one_operand_needing_grad():
    a, b = randn(2, 3, seed=3), randn(3, 4, seed=4)
    x, y = leaf(a), mg.tensor(b, dtype=mg.float64)
    out = mg.einsum("ij,jk->ik", [x, y])
    np.testing.assert_allclose(out.data, a @ b)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.data, np.ones((2, 4)) @ b.T)
    assert y.grad is None
    np.testing.assert_allclose(mg.einsum("ij,jk", (x, y)).data, a @ b)


def test_second_backward_with_retain_graph():
    a, b = randn(3, 3, 2, seed=9), randn(2, 4, seed=10)
    x, y = leaf(a), leaf(b)
    out = mg.einsum("iij,jk->ik", x, y)
    out.sum().backward(retain_graph=True)
    first = x.grad.data.copy(), y.grad.data.copy()
    out.sum().backward()
    np.testing.assert_allclose(x.grad.data, 2 * first[0])
    np.testing.assert_allclose(y.grad.data, 2 * first[1])


def test_output_is_a_new_tensor():
    x = mg.tensor(randn(2, 3, seed=5))
    for eq in ("ij->ij", "ij->ji", "ij"):
        out = mg.einsum(eq, x)
        out.data[...] = 0
        assert np.abs(x.data).min() > 0


def test_bool_operands_count_as_torch():
    ones = mg.tensor(np.ones((2, 3), bool))
    out = mg.einsum("ij->", ones)        # numpy's einsum would OR them: True
    assert out.dtype == mg.int64 and out.item() == 6
    np.testing.assert_array_equal(mg.einsum("ij->j", ones).data, [2, 2, 2])


def test_int_operands_give_int_without_grad():
    a, b = np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4)
    out = mg.einsum("ij,jk->ik", mg.tensor(a), mg.tensor(b))
    assert out.dtype == mg.int64 and not out.requires_grad
    np.testing.assert_array_equal(out.data, a @ b)


@pytest.mark.parametrize("eq,shapes", [("bij,bjk->bik", [(2, 5, 7), (2, 7, 3)]), ("ii->i", [(6, 6)]),
                                       ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
                                       ("iijl,jk->ik", [(3, 3, 4, 2), (4, 5)])])
def test_einsum_fp32(eq, shapes):
    fp32_matches_fp64(lambda *ts: mg.einsum(eq, *ts), *_arrays(shapes, seed=6))


def test_einsum_against_torch():
    torch = pytest.importorskip("torch")
    cases = [(eq, shapes) for eq, shapes, _ in CASES] + [
        ("ij->...ij", [(2, 3)]),                                # ellipsis of no dims (torch accepts)
        ("ij,jk->ik", [(2, 0), (0, 3)]),                        # empty contraction
        ("i,i", [(0,), (1,)]),
    ]
    for eq, shapes in cases:
        arrays = _arrays(shapes, seed=7)
        xs = [leaf(a) for a in arrays]
        out = mg.einsum(eq, *xs)
        g = randn(*out.shape, seed=8)
        out.backward(mg.tensor(g, dtype=mg.float64))
        txs = [torch.tensor(a, requires_grad=True) for a in arrays]
        tout = torch.einsum(eq, *txs)
        tout.backward(torch.tensor(g))
        np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=1e-12, atol=1e-12, err_msg=eq)
        for x, tx in zip(xs, txs):
            assert x.grad.shape == x.shape
            np.testing.assert_allclose(x.grad.data, tx.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=eq)


ERRORS = [
    ("ij,jk", [(2, 3)], r"subscripts for 2 operand\(s\) but 1 were given"),
    ("ij", [(2, 3), (3, 4)], r"subscripts for 1 operand\(s\) but 2 were given"),
    ("ijk", [(2, 3)], r"operand 0 has 2 dims \(shape \(2, 3\)\) but 3 subscripts"),
    ("...ijk", [(2, 3)], "fewer than its 3 subscripts besides the ellipsis"),
    ("ij,jk", [(2, 3), (4, 5)], "subscript j has size 4 for operand 1 .* does not broadcast with size 3"),
    ("...i,...i", [(2, 3), (4, 3)], "dim 0 of the ellipsis has size 4 for operand 1"),
    ("ii", [(2, 3)], "subscript i is repeated for operand 0 .* 2 != 3"),
    ("ij->k", [(2, 3)], "output subscript k does not appear in any input"),
    ("ij->ii", [(2, 3)], "output subscript i appears more than once"),
    ("i1->i", [(2, 3)], r"invalid subscript '1' at index 1 .* \[a-zA-Z\]"),
    ("i-j", [(2,)], "invalid subscript '-'"),
    ("ij->i,j", [(2, 3)], "invalid subscript ','"),
    ("ij->i->j", [(2, 3)], "'->' appears more than once"),
    (".i->i", [(2, 3)], "not part of an ellipsis"),
    ("i......", [(2, 3)], "more than one ellipsis"),
]


@pytest.mark.parametrize("eq,shapes,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_einsum_errors(eq, shapes, msg):
    with pytest.raises(ValueError, match=msg):
        mg.einsum(eq, *[mg.zeros(*s) for s in shapes])


def test_einsum_argument_errors():
    with pytest.raises(ValueError, match="at least one operand"):
        mg.einsum("i")
    with pytest.raises(TypeError, match="equation must be a str"):
        mg.einsum(mg.zeros(2), [0])
    with pytest.raises(TypeError, match="operand 1 is a float"):
        mg.einsum("i,->i", mg.zeros(2), 2.0)
    with pytest.raises(TypeError, match="mix float32 and float64"):
        mg.einsum("i,i", mg.zeros(2), mg.zeros(2, dtype=mg.float64))
