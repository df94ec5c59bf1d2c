"""Copies standing for PyTorch views (transpose/permute, strided slices, splits along a later dim,
expand) write through to their source when written in place, as PyTorch's views do: outside the
graph (no_grad, nothing requiring grad) and in it (the source gets a SetItem / inverse-permute node,
so gradients are PyTorch's). Known values first, then the same programs against torch when it is
installed."""
import gc
import weakref

import numpy as np
import pytest

import minigrad as mg

A = np.arange(12.0).reshape(3, 4)


def test_strided_slice_method_writes_the_source():
    x = mg.tensor(A)
    x[:, 1].add_(100)
    x[:, ::2].zero_()
    want = A.copy()
    want[:, 1] += 100
    want[:, ::2] = 0
    np.testing.assert_array_equal(x.data, want)


def test_transpose_and_nested_copies_write_through_every_level():
    x = mg.tensor(A)
    x.T.mul_(2)
    y = x.T[:, ::2]                  # a copy (strided) of a copy (transposed)
    y.fill_(-1)
    want = A * 2
    want[::2, :] = -1
    np.testing.assert_array_equal(x.data, want)
    np.testing.assert_array_equal(y.data, np.full((4, 2), -1.0))


def test_split_and_chunk_along_a_later_dim_write_the_source():
    x = mg.tensor(A)
    a, b = x.split([1, 3], dim=1)
    b.mul_(-1)
    c, _ = x.chunk(2, dim=1)
    c.copy_(mg.tensor(np.ones((3, 2))))
    want = A.copy()
    want[:, 1:] *= -1
    want[:, :2] = 1
    np.testing.assert_array_equal(x.data, want)
    np.testing.assert_array_equal(a.data, A[:, :1])          # a was not written: its old values


def test_permute_3d_row_write():
    x = mg.tensor(A.reshape(3, 2, 2))
    x.permute(2, 0, 1)[0].mul_(0)
    want = A.reshape(3, 2, 2).copy()
    want[:, :, 0] = 0
    np.testing.assert_array_equal(x.data, want)


def test_copy_takes_newer_source_values_before_a_write():
    x = mg.tensor(A)
    col = x[:, 0]
    x.add_(100)                      # col (a copy) still reads the old values ...
    np.testing.assert_array_equal(col.data, A[:, 0])
    col.add_(1)                      # ... but writing it starts from the source's current ones
    np.testing.assert_array_equal(col.data, A[:, 0] + 101)
    np.testing.assert_array_equal(x.data[:, 0], A[:, 0] + 101)
    np.testing.assert_array_equal(x.data[:, 1:], A[:, 1:] + 100)


def test_augmented_assignment_on_a_column_writes_once_more_harmlessly():
    x = mg.tensor(A)
    x[:, 2] += 3
    want = A.copy()
    want[:, 2] += 3
    np.testing.assert_array_equal(x.data, want)


def test_parameter_init_under_no_grad():
    w = mg.nn.Parameter(np.ones((3, 4)))
    version = w._version
    with mg.no_grad():
        w[:, 0].zero_()
        w.T[1].fill_(2.0)
    assert w._version > version      # saved copies of w would be caught by backward
    want = np.ones((3, 4))
    want[:, 0] = 0
    want[:, 1] = 2
    np.testing.assert_array_equal(w.data, want)


def test_leaf_requiring_grad_column_raises_in_the_graph_and_changes_nothing():
    w = mg.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        w[:, 0].mul_(2)
    np.testing.assert_array_equal(w.data, A)


def test_expand_with_repeats_cannot_be_written_in_place():
    e = mg.tensor([1.0, 2.0]).expand(3, 2)
    with pytest.raises(RuntimeError, match="expand"):
        e.add_(1)
    np.testing.assert_array_equal(e.data, [[1, 2]] * 3)
    x = mg.tensor([1.0, 2.0])
    x.expand(1, 2).add_(1)           # no repeated element: a view, written through
    np.testing.assert_array_equal(x.data, [2, 3])


def test_detached_copy_writes_through_and_holds_no_graph():
    a = mg.tensor(np.ones((2, 3)), requires_grad=True)
    y = a * 2
    node = weakref.ref(y._node)
    d = y[:, -1].detach()
    del y
    gc.collect()
    assert node() is None            # a carried `out[:, -1].detach()` keeps no graph alive
    x = mg.tensor(np.zeros((2, 3)))
    x.T.detach().add_(1)
    np.testing.assert_array_equal(x.data, np.ones((2, 3)))
    d.add_(1)                        # its source is gone from the graph; still fine


def test_in_graph_write_through_gradients():
    a = mg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    t = a * 2
    t[:, 0] += 1                     # t = [[3, 4], [7, 8]]
    t.T.mul_(mg.tensor([[1.0], [10.0]]))
    np.testing.assert_array_equal(t.data, [[3, 40], [7, 80]])
    t.sum().backward()
    np.testing.assert_array_equal(a.grad.data, [[2, 20], [2, 20]])


def test_in_graph_write_after_the_source_was_rewritten_in_the_graph_raises():
    a = mg.tensor(A, requires_grad=True)
    t = a * 1
    c = t.T
    t.mul_(2)                        # t gets a new node: c's node (a Permute of old t) is stale
    with pytest.raises(RuntimeError, match="take it anew"):
        c.add_(1)
    np.testing.assert_array_equal(t.data, A * 2)


# ---- the same programs in PyTorch ---------------------------------------------------------------
PROGRAMS = {
    "slice_add_": "x = T(A); x[:, 1].add_(5); out = [x]",
    "T_mul_": "x = T(A); x.T.mul_(2); out = [x]",
    "T_row_fill_": "x = T(A); x.T[1].fill_(7); out = [x]",
    "step_slice_copy_": "x = T(A); x[:, ::2].copy_(T(np.ones((3, 2)))); out = [x]",
    "nested": "x = T(A); y = x.T[:, ::2]; y.zero_(); out = [x, y]",
    "split_dim1": "x = T(A); a, b = x.split([1, 3], dim=1); b.mul_(-1); out = [x, a, b]",
    "stale_then_write": "x = T(A); y = x[:, 0]; x.add_(100); y.add_(1); out = [x, y]",
    "iadd_slice": "x = T(A); x[:, 2] += 3; out = [x]",
    "permute_3d": "x = T(A.reshape(3, 2, 2)); x.permute(2, 0, 1)[0].mul_(0); out = [x]",
    "no_grad_param": "w = T(A, True)\nwith ng():\n    w[:, 0].zero_(); w.T[1].fill_(2)\nout = [w]",
    "no_grad_then_graph": ("a = T(np.ones((2, 3)), True); y = a * 2; t = y.T\nwith ng():\n    y.add_(1)\n"
                           "t.mul_(2); (t * t).sum().backward(); out = [t, y, a.grad]"),
    "graph_T": ("a = T(A, True); t = a * 2; t.T.mul_(T(np.arange(4.0)[:, None])); "
                "(t * t).sum().backward(); out = [t, a.grad]"),
    "graph_slice": ("a = T(A, True); t = a * 1; t[:, 1].mul_(a[:, 0]); "
                    "(t ** 2).sum().backward(); out = [t, a.grad]"),
    "graph_iadd": ("a = T(A, True); t = a * 3; t[:, 1:3] += a[:, :2]; "
                   "(t ** 3).sum().backward(); out = [t, a.grad]"),
    "detach_T": "a = T(A); d = a.T.detach(); d.add_(1); out = [a]",
}


def _run(lib, code):
    if lib == "torch":
        import torch
        env = dict(T=lambda x, rg=False: torch.tensor(x, dtype=torch.float64, requires_grad=rg),
                   ng=torch.no_grad)
    else:
        env = dict(T=lambda x, rg=False: mg.tensor(x, requires_grad=rg), ng=mg.no_grad)
    env.update(A=A, np=np)
    exec(code, env)
    return [np.asarray(o.detach().numpy() if lib == "torch" else o.data) for o in env["out"]]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_matches_pytorch_views(name):
    pytest.importorskip("torch")
    want, got = _run("torch", PROGRAMS[name]), _run("minigrad", PROGRAMS[name])
    assert len(want) == len(got)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_copy_used_in_the_graph_after_its_source_was_rewritten_there_raises():
    x = mg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    t = x * 1
    h = t.T
    t.add_(x)                        # PyTorch's h would see this (and route its grad); the copy cannot
    with pytest.raises(RuntimeError, match="old values"):
        h * 2
    c = (x * 1).T
    c.add_(1)                        # writing the copy itself keeps copy and source in agreement
    np.testing.assert_array_equal((c * 2).data, (x.data.T + 1) * 2)


def test_shallow_copy_of_a_transpose_writes_through_too():
    import copy
    x = mg.tensor(np.zeros((2, 3)))
    copy.copy(x.T).add_(1)           # copy.copy shares the memory, so it shares the write-back
    np.testing.assert_array_equal(x.data, np.ones((2, 3)))
