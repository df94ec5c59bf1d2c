"""The tape engine, Function API, grad modes and gradcheck — with ops defined here, independent of ops/."""
import gc
import threading
import weakref

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import Function, GradcheckError, gradcheck, no_grad


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return (g * b if ctx.needs_input_grad[0] else None), (g * a if ctx.needs_input_grad[1] else None)


class Total(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.shape = a.shape
        return a.sum()

    @staticmethod
    def backward(ctx, g):
        return np.broadcast_to(g, ctx.shape)


class Split2(Function):
    """Two outputs: (2a, a^2)."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return 2 * a, a * a

    @staticmethod
    def backward(ctx, g1, g2):
        (a,) = ctx.saved_tensors
        return 2 * g1 + 2 * a * g2


class WrongSquare(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return 2.01 * a * g


def f64(*shape, rg=True, seed=0):
    rng = np.random.default_rng(seed)
    return mg.Tensor(rng.standard_normal(shape), requires_grad=rg)


def test_broadcast_grads_are_reduced_centrally():
    x, y = f64(3, 1, 4), f64(5, 1, seed=1)
    Total.apply(Mul.apply(x, y)).backward()
    assert x.grad.shape == (3, 1, 4) and y.grad.shape == (5, 1)
    np.testing.assert_allclose(x.grad.data, np.full((3, 1, 4), y.data.sum()))
    np.testing.assert_allclose(y.grad.data, np.full((5, 1), x.data.sum()))


def test_reused_input_grads_sum_and_leaves_accumulate():
    x = f64(4)
    Total.apply(Mul.apply(x, x)).backward()
    np.testing.assert_allclose(x.grad.data, 2 * x.data)
    Total.apply(Mul.apply(x, x)).backward()
    np.testing.assert_allclose(x.grad.data, 4 * x.data)
    assert isinstance(x.grad, mg.Tensor)


class _GradFrom(Function):
    """y = x; backward returns whatever `pick(gy)` gives (to probe how leaves take grads)."""

    @staticmethod
    def forward(ctx, x, y, pick):
        ctx.pick = pick
        return x + y

    @staticmethod
    def backward(ctx, gy):
        return (*ctx.pick(gy), None)


def test_leaf_keeps_a_fresh_grad_without_copying_but_never_a_shared_one():
    made = []

    def fresh(gy):
        g = gy * 2.0
        made.append(weakref.ref(g))
        return g, None

    x, y = f64(3), f64(3, rg=False)
    _GradFrom.apply(x, y, fresh).backward(np.ones(3))
    if mg.autograd.engine.EXACT_REFCOUNTS:
        assert x.grad.data is made[0]()      # adopted: nothing else held it

    kept = np.full(3, 5.0)
    x.grad = None
    _GradFrom.apply(x, y, lambda gy: (kept, None)).backward(np.ones(3))
    kept[:] = -1                             # the op's own array stays the op's
    np.testing.assert_array_equal(x.grad.data, 5.0)

    x2 = f64(3, seed=2)
    x.grad = None
    _GradFrom.apply(x, x2, lambda gy: (lambda g: (g, g))(gy * 3.0)).backward(np.ones(3))
    assert not np.shares_memory(x.grad.data, x2.grad.data)   # one array returned for two leaves
    x.grad.data += 1
    np.testing.assert_array_equal(x2.grad.data, 3.0)

    view_base = np.full((2, 3), 7.0)
    x.grad = None
    _GradFrom.apply(x, y, lambda gy: (view_base[0], None)).backward(np.ones(3))
    view_base[0] = 0                         # a view is never kept
    np.testing.assert_array_equal(x.grad.data, 7.0)


def test_multiple_outputs_and_unused_output_gets_zero_grad():
    x = f64(3)
    a, b = Split2.apply(x)
    Total.apply(b).backward()
    np.testing.assert_allclose(x.grad.data, 2 * x.data)
    assert gradcheck(lambda t: Split2.apply(t), [f64(2, 3)])


def test_chain_of_100k_ops_has_no_recursion():
    a = mg.tensor(1.0, dtype=mg.float64, requires_grad=True)
    one = mg.tensor(1.0, dtype=mg.float64)
    h = a
    for _ in range(100_000):
        h = Mul.apply(h, one)
    h.backward()
    assert a.grad.item() == 1.0
    del h
    gc.collect()


def test_second_backward_raises_and_retain_graph_allows_it():
    x = f64(3)
    y = Total.apply(Mul.apply(x, x))
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.data, 4 * x.data)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_second_backward_through_ops_that_saved_nothing_works():
    # as in PyTorch, only a node whose saved values were freed cannot be run again
    x = mg.ones(4, requires_grad=True)
    a, b = x.chunk(2)
    a.sum().backward()
    b.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0, 1.0]
    y = (x + 1).reshape(2, 2).sum()
    y.backward()
    y.backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0, 3.0]
    for z in ((x * x).sum(), x[[0, 1]].sum()):          # saved x / the index array: freed
        z.backward()
        with pytest.raises(RuntimeError, match="second time"):
            z.backward()


def test_saved_tensors_are_freed_after_backward():
    x = f64(1000)
    y = Mul.apply(x, x)
    node = y._node
    ref = weakref.ref(node.ctx)
    Total.apply(y).backward()
    assert node.ctx._freed and node.ctx._saved is None
    del y, node
    gc.collect()
    assert ref() is None or ref()._freed


def test_inplace_modification_of_saved_tensor_is_detected():
    x = f64(3)
    a = mg.Tensor(np.ones(3), requires_grad=False)
    y = Mul.apply(x, a)
    a._bump_version()  # what every in-place op does
    with pytest.raises(RuntimeError, match="modified in place"):
        Total.apply(y).backward()


def test_retain_grad_on_intermediate():
    x = f64(3)
    y = Mul.apply(x, x).retain_grad()
    Total.apply(Mul.apply(y, y)).backward()
    np.testing.assert_allclose(y.grad.data, 2 * y.data)
    np.testing.assert_allclose(x.grad.data, 4 * x.data ** 3)


def test_no_grad_records_nothing_and_is_thread_local_and_a_decorator():
    x = f64(3)
    with no_grad():
        y = Mul.apply(x, x)
        seen = {}
        t = threading.Thread(target=lambda: seen.setdefault("on", mg.is_grad_enabled()))
        t.start()
        t.join()
    assert not y.requires_grad and y._node is None and seen["on"] is True

    @no_grad()
    def f(t):
        return Mul.apply(t, t)

    assert not f(x).requires_grad
    with no_grad():
        with mg.enable_grad():
            assert Mul.apply(x, x).requires_grad


def test_grad_mode_forms_as_pytorch():
    """set_grad_enabled as a plain call, a context and a decorator; no_grad / enable_grad bare as
    decorators (found by the docs walkthrough: the plain call did nothing, `@no_grad` raised)."""
    x = f64(3)
    try:
        mg.set_grad_enabled(False)
        assert not mg.is_grad_enabled() and not Mul.apply(x, x).requires_grad
    finally:
        mg.set_grad_enabled(True)
    assert mg.is_grad_enabled()
    with mg.set_grad_enabled(False):
        assert not mg.is_grad_enabled()
    assert mg.is_grad_enabled()

    @mg.set_grad_enabled(False)
    def off(t):
        return Mul.apply(t, t)

    assert mg.is_grad_enabled() and not off(x).requires_grad and mg.is_grad_enabled()

    @no_grad
    def g(t):
        return Mul.apply(t, t)

    @mg.enable_grad
    def h(t):
        return Mul.apply(t, t)

    assert g.__name__ == "g" and not g(x).requires_grad
    with no_grad():
        assert h(x).requires_grad
    with pytest.raises(TypeError, match="takes no arguments"):
        no_grad(3)


def test_mixed_dtypes_raise():
    x = mg.randn(3, requires_grad=True)
    y = f64(3)
    with pytest.raises(TypeError, match="float32 and float64"):
        Mul.apply(x, y)


def test_fp32_stays_fp32():
    x = mg.randn(3, requires_grad=True)
    y = Mul.apply(x, x)
    Total.apply(y).backward()
    assert y.dtype == np.float32 and x.grad.dtype == np.float32


def test_gradcheck_catches_wrong_backward_and_names_input():
    with pytest.raises(GradcheckError, match=r"input 0 shape \(2, 3\).*analytic"):
        gradcheck(lambda t: WrongSquare.apply(t), [f64(2, 3)])
    with pytest.raises(GradcheckError):
        gradcheck(lambda t: WrongSquare.apply(t), [f64(20, 30)], fast=True)
    with pytest.raises(TypeError, match="float64"):
        gradcheck(lambda t: Mul.apply(t, t), [mg.randn(3, requires_grad=True)])


def test_backward_needs_scalar_or_gradient():
    x = f64(3)
    y = Mul.apply(x, x)
    with pytest.raises(RuntimeError, match="scalar"):
        y.backward()
    y.backward(np.ones(3))
    np.testing.assert_allclose(x.grad.data, 2 * x.data)


def test_detect_anomaly_names_op_and_call_site():
    class Log(Function):
        @staticmethod
        def forward(ctx, a):
            return np.log(a)

        @staticmethod
        def backward(ctx, g):
            return g

    x = mg.Tensor(np.array([-1.0, 1.0]), requires_grad=True)
    with mg.detect_anomaly():
        with pytest.raises(FloatingPointError, match=r"Log produced NaN/inf.*test_autograd.py"):
            with np.errstate(invalid="ignore"):
                Log.apply(x)


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(TypeError):
        mg.tensor([1, 2], requires_grad=True)


def test_constructors_and_repr():
    assert mg.zeros(2, 3).shape == (2, 3) and mg.zeros(2, 3).dtype == np.float32
    assert mg.ones((2,), dtype=mg.float64).dtype == np.float64
    assert mg.arange(5).dtype == np.int64 and mg.arange(0.0, 1.0, 0.25).shape == (4,)
    assert mg.full((2, 2), 3.0).data.sum() == 12
    mg.manual_seed(0)
    a = mg.randn(3).data
    mg.manual_seed(0)
    assert (mg.randn(3).data == a).all()
    assert mg.zeros_like(mg.ones(2, dtype=mg.float64)).dtype == np.float64
    t = mg.from_numpy(np.arange(3.0))
    assert t.dtype == np.float64
    assert "requires_grad=True" in repr(mg.ones(2, requires_grad=True))
    assert mg.tensor(2.5).item() == 2.5


def test_constructors_reject_what_pytorch_rejects():
    for data in (2 ** 63, [2 ** 63, 1], [[1], [-2 ** 63 - 1]], 2 ** 64):
        with pytest.raises(OverflowError, match="does not fit in int64"):
            mg.tensor(data)                    # numpy would make uint64, float64 or object
    assert mg.tensor([-2 ** 63, 2 ** 63 - 1]).dtype == mg.int64
    assert mg.tensor([2 ** 63, 1.5]).dtype == mg.float32          # a float among them: float
    assert mg.tensor([1.5, 2 ** 70]).tolist() == [1.5, float(2 ** 70)]
    for data in ([None, 1.0], [None, 2 ** 63]):        # not numbers: no silent NaN
        with pytest.raises(TypeError, match="unsupported dtype object"):
            mg.tensor(data)
    for make in (mg.zeros, mg.ones, mg.randn, mg.rand):
        with pytest.raises(TypeError, match="size must be a tuple of ints"):
            make(2.5)
        with pytest.raises(TypeError, match="size must be a tuple of ints"):
            make((2, 1.0))
    assert mg.zeros(np.int64(2), 3).shape == (2, 3)


def _leading_heavy(rows=1001, cols=2):
    """float32 (rows, cols): 2^24 in row 0, ones below. Summed over dim 0 in float32 one row at a
    time each +1 rounds away (2^24 + 1 = 2^24): exact 2^24 + rows - 1, representable in float32."""
    a = np.ones((rows, cols), np.float32)
    a[0] = 2.0 ** 24
    return a


def test_broadcast_grads_of_float32_are_summed_in_float64():
    for shape in [(2,), (1, 2)]:            # leading dim added / size-1 dim stretched
        b = mg.Tensor(np.zeros(shape, np.float32), requires_grad=True)
        Total.apply(Mul.apply(mg.Tensor(_leading_heavy()), b)).backward()
        assert b.grad.dtype == mg.float32
        np.testing.assert_array_equal(b.grad.data, np.full(shape, 2.0 ** 24 + 1000))


class _SumOnes(Function):
    """y = sum(a), not computed (0): backward is all the work, the leaf's += of 1s."""

    @staticmethod
    def forward(ctx, a):
        ctx.shape = a.shape
        return np.zeros((), a.dtype)

    @staticmethod
    def backward(ctx, g):
        return np.broadcast_to(g, ctx.shape)


def test_concurrent_backward_into_a_shared_leaf_loses_nothing():
    x = mg.zeros(1 << 20, requires_grad=True)
    threads_, reps = 4, 50

    def work():
        for _ in range(reps):
            _SumOnes.apply(x).backward()             # adds 1 to every element (numpy drops the GIL)

    ts = [threading.Thread(target=work) for _ in range(threads_)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    np.testing.assert_array_equal(x.grad.data, threads_ * reps)


class _Flaky(Function):
    """y = 2a; backward raises while `fail` is set."""

    fail = True

    @staticmethod
    def forward(ctx, a):
        return 2 * a

    @staticmethod
    def backward(ctx, g):
        if _Flaky.fail:
            raise ValueError("transient failure")
        return 2 * g


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
def test_failed_backward_accumulates_nothing_and_a_retry_is_exact(error, monkeypatch):
    w, u = f64(3), f64(3, seed=1)
    losses = [Total.apply(Mul.apply(_Flaky.apply(w), w))]           # sum(2w w): grad 4w
    h = Mul.apply(u, u).retain_grad()
    losses.append(Total.apply(Mul.apply(h, mg.ones(3, dtype=mg.float64))))  # sum(u u): grad 2u
    # newest first: h's and u's grads and w's direct part are complete when _Flaky's backward runs
    _Flaky.fail = True
    if error is KeyboardInterrupt:
        def interrupt(ctx, g):
            raise KeyboardInterrupt
        monkeypatch.setattr(_Flaky, "backward", staticmethod(interrupt))
    with pytest.raises(error):
        mg.autograd.backward(losses, retain_graph=True)
    assert w.grad is None and u.grad is None and h.grad is None
    monkeypatch.undo()
    _Flaky.fail = False
    mg.autograd.backward(losses)
    np.testing.assert_allclose(w.grad.data, 4 * w.data)
    np.testing.assert_allclose(u.grad.data, 2 * u.data)
    np.testing.assert_allclose(h.grad.data, 1.0)


def test_backward_returning_the_wrong_number_of_grads_raises():
    class Extra(Function):
        @staticmethod
        def forward(ctx, a):
            return 2 * a

        @staticmethod
        def backward(ctx, g):
            return 2 * g, 100 * g

    class Missing(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    x = f64(2)
    with pytest.raises(RuntimeError, match=r"Extra.backward returned an incorrect number of gradients "
                                           r"\(expected 1, got 2\)"):
        Total.apply(Extra.apply(x)).backward()
    with pytest.raises(RuntimeError, match=r"expected 2, got 1"):
        Total.apply(Missing.apply(x, x)).backward()
    assert x.grad is None


def test_autograd_grad_of_leaves_and_intermediates_leaves_dot_grad_alone():
    """torch.autograd.grad's contract: gradients returned, no .grad written (also for other leaves),
    intermediate inputs allowed, unused inputs an error unless allow_unused."""
    x = mg.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=mg.float64, requires_grad=True)
    w = mg.tensor([1.5, -2.0], dtype=mg.float64, requires_grad=True)
    unused = mg.tensor([1.0], dtype=mg.float64, requires_grad=True)
    h = x * w                                   # intermediate
    y = (h * h).sum()
    gx, gh, gw = mg.autograd.grad(y, [x, h, w], retain_graph=True)
    np.testing.assert_allclose(gh.data, 2 * h.data)
    np.testing.assert_allclose(gx.data, 2 * h.data * w.data)
    np.testing.assert_allclose(gw.data, (2 * h.data * x.data).sum(0))
    assert x.grad is None and w.grad is None and unused.grad is None
    with pytest.raises(RuntimeError, match="not used"):
        mg.autograd.grad(y, [unused], retain_graph=True)
    assert mg.autograd.grad(y, [unused, w], allow_unused=True, retain_graph=True)[0] is None
    (gy,) = mg.autograd.grad(y, y, retain_graph=True)
    assert gy.item() == 1.0
    g2 = mg.autograd.grad([h], [x], grad_outputs=[mg.ones(2, 2, dtype=mg.float64)])[0]
    np.testing.assert_allclose(g2.data, np.broadcast_to(w.data, (2, 2)))
    with pytest.raises(NotImplementedError, match="create_graph"):
        mg.autograd.grad(y, [x], create_graph=True)


def test_autograd_grad_matches_pytorch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(5).standard_normal((3, 4))
    x = mg.tensor(a, requires_grad=True)
    h = (x * 2).tanh()
    y = (h.softmax(-1) * h).sum()
    got = mg.autograd.grad(y, [x, h])
    tx = torch.tensor(a, requires_grad=True)
    th = (tx * 2).tanh()
    want = torch.autograd.grad((th.softmax(-1) * th).sum(), [tx, th])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.data, w.numpy(), rtol=1e-12, atol=1e-14)
