"""In-place ops through views and detach(): one shared version counter per block of memory, no
in-place on a view in the graph, stale views refused; index arrays kept as they were at forward."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F

SAVED = "modified in place"
VIEW = "does not rebase"


def _x():
    return mg.ones(4, requires_grad=True)


# ---- views of a non-leaf in the graph -----------------------------------------------------------
def test_inplace_on_slice_of_saved_nonleaf_raises():
    x = _x()
    y = x * 2
    z = (y * y).sum()
    with pytest.raises(RuntimeError, match=VIEW):
        y[:2].add_(1)
    z.backward()                                  # nothing was modified: the gradient is exact
    np.testing.assert_allclose(x.grad.data, [8, 8, 8, 8])


def test_inplace_on_slice_of_nonleaf_raises_instead_of_dropping_history():
    x = _x()
    y = x * 2
    with pytest.raises(RuntimeError, match=VIEW):
        y[:2].mul_(3)                             # torch rebases (grad [6, 6, 2, 2]); we refuse
    np.testing.assert_array_equal(y.data, [2, 2, 2, 2])


def test_inplace_on_base_of_saved_view_raises_at_backward():
    x = _x()
    y = x * 2
    v = y.reshape(2, 2)
    z = (v * v).sum()
    y.add_(1)
    assert v._version == y._version == 1
    with pytest.raises(RuntimeError, match=SAVED):
        z.backward()


def test_view_made_before_inplace_on_its_base_is_stale():
    x = _x()
    y = x * 2
    v = y.reshape(2, 2)
    y.mul_(x)                                     # y gets a new node; v still points at y's old one
    with pytest.raises(RuntimeError, match="base was modified in place"):
        v.sum()
    w = y.reshape(2, 2)                           # a view taken afterwards is fine
    w.sum().backward()
    np.testing.assert_allclose(x.grad.data, [4, 4, 4, 4])   # d(2x * x)/dx


# ---- views of a leaf ----------------------------------------------------------------------------
def test_inplace_on_view_of_leaf_raises_and_leaves_it_unchanged():
    x = _x()
    with pytest.raises(RuntimeError, match=VIEW):
        x[:2].mul_(3)
    with pytest.raises(RuntimeError, match=VIEW):
        x.reshape(2, 2)[0].fill_(0)
    np.testing.assert_array_equal(x.data, [1, 1, 1, 1])
    assert x._version == 0


def test_view_made_under_no_grad_of_leaf_cannot_be_modified_with_grad_on():
    p = mg.zeros(4, requires_grad=True)
    with mg.no_grad():
        v = p[:2]
    with pytest.raises(RuntimeError, match=VIEW):
        v.add_(1)
    np.testing.assert_array_equal(p.data, [0, 0, 0, 0])


def test_no_grad_inplace_on_views_of_a_parameter():
    p = mg.zeros(4, requires_grad=True)
    with mg.no_grad():
        p[:2].add_(1)
        p.reshape(2, 2)[1].fill_(5)
        a, b = p.split(2)
        a *= 2
    np.testing.assert_array_equal(p.data, [2, 2, 5, 5])
    assert p._version == a._version == b._version == 3
    assert p.is_leaf and p.requires_grad


def test_inplace_on_view_allowed_when_nothing_requires_grad():
    a = mg.zeros(4)
    v = a.reshape(2, 2)[1]
    v.add_(1)
    np.testing.assert_array_equal(a.data, [0, 0, 1, 1])
    assert a._version == 1


# ---- detach() -------------------------------------------------------------------------------------
def test_detach_shares_the_version_counter():
    x = _x()
    y = x * 2
    z = (y * y).sum()
    y.detach().mul_(10)                           # allowed: the documented way around the graph
    assert y._version == 1
    with pytest.raises(RuntimeError, match=SAVED):
        z.backward()


def test_inplace_on_view_of_detached_tensor_is_allowed_and_seen():
    x = _x()
    y = x * 2
    z = (y[:2] * y[:2]).sum()                     # the saved views die right away
    y.detach()[2:].mul_(10)
    np.testing.assert_array_equal(y.data, [2, 2, 20, 20])
    with pytest.raises(RuntimeError, match=SAVED):
        z.backward()


# ---- views of views, split / chunk ----------------------------------------------------------------
def test_views_of_views_share_one_counter():
    x = _x()
    y = x * 2
    v = y.reshape(2, 2)[1].unsqueeze(0).flatten()
    z = (v * v).sum()
    with pytest.raises(RuntimeError, match=VIEW):
        v.mul_(2)
    with pytest.raises(RuntimeError, match=VIEW):
        y.reshape(2, 2).squeeze()[0].zero_()
    y.detach().reshape(2, 2)[0].add_(1)           # a write through another chain of aliases
    assert v._version == y._version == 1
    with pytest.raises(RuntimeError, match=SAVED):
        z.backward()


def test_split_and_chunk_outputs_are_views():
    x = mg.ones(6, requires_grad=True)
    y = x * 2
    a, b = y.split(3)
    z = (a * a).sum()
    with pytest.raises(RuntimeError, match=VIEW):
        b.add_(1)
    y.add_(1)
    with pytest.raises(RuntimeError, match=SAVED):
        z.backward()

    y = x * 2
    p, q, r = y.chunk(3)
    z = (q * q).sum()
    y.detach()[2:4].zero_()
    assert p._version == q._version == r._version == 1
    with pytest.raises(RuntimeError, match=SAVED):
        z.backward()


def test_copies_do_not_share_the_counter():
    x = mg.ones(2, 3, requires_grad=True)
    y = x * 2
    t, c, v = y.T, y.clone(), y.reshape(3, 2)     # transpose copies to C order; reshape views
    with mg.no_grad():
        y.add_(1)
    assert (y._version, v._version, t._version, c._version) == (1, 1, 0, 0)
    # t is a copy, but one standing for PyTorch's view: written in place it first takes y's newer
    # values (the no_grad add, as the view would see it), then writes through to y
    t.mul_(2)
    np.testing.assert_allclose(t.data, np.full((3, 2), 6.0))
    np.testing.assert_allclose(y.data, np.full((2, 3), 6.0))
    (t * t).sum().backward()
    np.testing.assert_allclose(x.grad.data, np.full((2, 3), 48.0))   # PyTorch: t = 2 (2x + 1) -> 8 t


# ---- ordinary in-place (no views) -----------------------------------------------------------------
def test_inplace_on_nonview_nonleaf_still_works_and_is_checked():
    x = _x()
    y = x * 2
    u = y[1:]
    y.add_(1)                                     # y = 2x + 1
    assert u._version == y._version == 1
    v = y.reshape(2, 2)                           # a view taken after the in-place op is current
    (v * v).sum().backward()
    np.testing.assert_allclose(x.grad.data, [12, 12, 12, 12])

    x = _x()
    y = x * 2
    z = (y * y).sum()
    y.add_(1)
    with pytest.raises(RuntimeError, match=SAVED):
        z.backward()


# ---- index arrays modified after the forward --------------------------------------------------------
def _ids():
    return mg.tensor(np.array([0, 1, 1]))


def test_embedding_backward_uses_forward_ids():
    w = mg.ones(4, 2, requires_grad=True)
    ids = _ids()
    y = mg.embedding(ids, w)
    ids[0] = 3
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.data[:, 0], [1, 2, 0, 0])


def test_getitem_backward_uses_forward_index():
    x = mg.ones(4, 2, requires_grad=True)
    ids = _ids()
    y = x[ids]
    ids.data[0] = 3                               # a numpy-level write: no version to check
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data[:, 0], [1, 2, 0, 0])


def test_setitem_backward_uses_forward_index():
    x = mg.ones(4, requires_grad=True)
    v = mg.ones(3, requires_grad=True)
    y = x * 1
    ids = _ids()
    y[ids] = v
    ids[0] = 3
    (y * mg.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [0, 0, 3, 4])
    np.testing.assert_array_equal(v.grad.data, [1, 2, 2])


def test_cross_entropy_backward_uses_forward_targets():
    logits = mg.zeros(3, 4, requires_grad=True)
    targets = _ids()
    loss = F.cross_entropy(logits, targets, reduction="sum")
    targets[0] = 3
    loss.backward()
    expected = np.full((3, 4), 0.25)
    expected[[0, 1, 2], [0, 1, 1]] -= 1
    np.testing.assert_allclose(logits.grad.data, expected, rtol=1e-6)


# ---- outputs that are views of a saved array, and where's mask ----------------------------------
@pytest.mark.parametrize("op", [lambda t: t.std(1), lambda t: t.logsumexp(1), lambda t: t.amax(1),
                                lambda t: t.amin(1), lambda t: t.max(), lambda t: t.min()],
                         ids=["std", "logsumexp", "amax", "amin", "max", "min"])
def test_inplace_on_reduction_output_that_backward_saved_raises(op):
    # the forward saves the keepdim result and returns a reshape of it: the same memory
    x = mg.tensor([[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]], requires_grad=True)
    s = op(x * 1)
    s += 1
    with pytest.raises(RuntimeError, match=SAVED):
        s.sum().backward()


@pytest.mark.parametrize("masked_fill", [False, True])
def test_where_mask_changed_in_place_after_forward_raises(masked_fill):
    x = mg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    m = x > 0
    y = (x * 2).masked_fill(m, 0.0) if masked_fill else mg.where(m, x * 2, 0.0)
    m[0] = False
    with pytest.raises(RuntimeError, match=SAVED):
        y.sum().backward()


def test_where_numpy_mask_is_copied_at_forward():
    x = mg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    m = np.array([True, False, True])
    y = mg.where(m, x * 2, 0.0)
    m[0] = False                                  # a numpy-level write: the op kept its own copy
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, [2, 0, 2])


def test_stale_view_not_requiring_grad_raises_when_its_base_entered_the_graph():
    """The view does not require grad, but its base now does (an in-place op in the graph): using
    the view would silently drop the gradient to p that PyTorch's rebased view gives (found by the
    docs walkthrough)."""
    p = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    base = mg.zeros(3)
    vv = base[0:2]
    base.add_(p * 1)
    with pytest.raises(RuntimeError, match="Take the view again"):
        vv * p[0:2]
    (base[0:2] * p[0:2]).sum().backward()      # taken again: PyTorch's gradient
    np.testing.assert_array_equal(p.grad.data, [2.0, 4.0, 0.0])
