"""Tensor.register_hook / register_post_accumulate_grad_hook / retain_grad, side by side with torch.

Each `prog(lib)` runs the same program on minigrad (`lib` = minigrad) and torch and returns what it
observed (hook logs, grads); the two must agree. Torch-free checks (errors, all-or-nothing, a GPT
step with per-tensor clipping) run without torch.
"""
import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad.utils.checkpoint import checkpoint


def _np(x):
    if x is None or isinstance(x, (str, bool, int, float)):
        return x
    if isinstance(x, (list, tuple)):
        return [_np(v) for v in x]
    if isinstance(x, mg.Tensor):
        return np.array(x.data, dtype=np.float64)
    return x.detach().double().numpy()          # a torch tensor


def _same(a, b, path="result"):
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: {a!r} vs {b!r}"
        for i, (u, v) in enumerate(zip(a, b)):
            _same(u, v, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), f"{path}: {a!r} vs {b!r}"
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=path)
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


def both(prog):
    """prog(minigrad) and prog(torch) observe the same things; returns minigrad's."""
    torch = pytest.importorskip("torch")
    ours = _np(prog(mg))
    _same(ours, _np(prog(torch)))
    return ours


def leaf(lib, values=(1.0, -2.0, 3.0)):
    return lib.tensor(list(values), requires_grad=True)


def logger(log, name, change=None):
    """A hook that logs (name, grad) and returns change(grad) (None: no replacement)."""
    def hook(g):
        log.append((name, None if g is None else g.clone()))
        return None if change is None else change(g)
    return hook


# ---- firing and replacement -------------------------------------------------------------------
def test_leaf_and_intermediate_hooks():
    def prog(lib):
        log = []
        x = leaf(lib)
        x.register_hook(logger(log, "x", lambda g: g * 3))
        y = x * 2
        y.register_hook(logger(log, "y", lambda g: g + 1))
        (y * y).sum().backward()
        return log, x.grad
    log, _ = both(prog)
    assert [name for name, _ in log] == ["y", "x"]


def test_tensor_used_twice_sees_the_summed_grad_once():
    def prog(lib):
        log = []
        x = leaf(lib)
        x.register_hook(logger(log, "x"))
        y = x * 2
        y.register_hook(logger(log, "y"))
        (y * y + y.sin() + x).sum().backward()
        return log, x.grad
    log, _ = both(prog)
    assert len(log) == 2


def test_replacement_changes_downstream_grads():
    def prog(lib):
        x, w = leaf(lib), leaf(lib, (0.5, 0.25, -1.0))
        y = x.exp()
        y.register_hook(lambda g: g * g - 1)
        z = y * w
        z.register_hook(lambda g: g.tanh())
        w.register_hook(lambda g: g / 2)
        (z.sum() + y.mean()).backward()
        return x.grad, w.grad
    both(prog)


def test_multiple_hooks_run_in_order_each_on_the_previous_result():
    def prog(lib):
        log = []
        x = leaf(lib)
        y = x.sin()
        for name, change in (("a", lambda g: g * 10), ("b", None), ("c", lambda g: g - 1)):
            y.register_hook(logger(log, name, change))
            x.register_hook(logger(log, "x" + name, change))
        (y * 3).sum().backward()
        return log, x.grad
    both(prog)


def test_handle_remove():
    def prog(lib):
        log = []
        x = leaf(lib)
        y = x * 2
        handles = []

        def first(g):
            log.append("first")
            handles[1].remove()           # still runs in this backward, not in the next
        handles.append(y.register_hook(first))
        handles.append(y.register_hook(logger(log, "second", lambda g: g * 5)))
        gone = x.register_hook(lambda g: g * 100)
        gone.remove()
        gone.remove()                      # a second remove is a no-op
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        with x.register_hook(logger(log, "ctx")):
            (x * 1).sum().backward()
        (x * 1).sum().backward()
        return log, x.grad
    log, _ = both(prog)
    assert [e if isinstance(e, str) else e[0] for e in log] == ["first", "second", "first", "ctx"]


def test_retain_grad_stores_the_grad_after_every_hook():
    def prog(lib):
        x = leaf(lib)
        y = x * 2
        y.register_hook(lambda g: g * 10)
        y.retain_grad()                      # torch runs retain_grad last, whatever the order
        y.register_hook(lambda g: g + 1)
        z = y.exp()
        z.retain_grad()
        z.register_hook(lambda g: -g)
        (y * z).sum().backward()
        return y.grad, z.grad, x.grad
    both(prog)


def test_hook_on_a_view_or_slice():
    def prog(lib):
        log = []
        x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
        y = x * 1
        col = y[:, 0]                        # strided: a copy in minigrad, a view in torch
        row = y[1]                           # contiguous: a view in both
        flat = y.reshape(-1)
        col.register_hook(logger(log, "col", lambda g: g * 5))
        row.register_hook(logger(log, "row", lambda g: g + 1))
        flat.register_hook(logger(log, "flat"))
        (col * col).sum().backward(retain_graph=True)
        (row.sum() + (flat * flat).sum()).backward()
        return log, x.grad
    both(prog)


def test_root_tensors_get_their_hooks():
    def prog(lib):
        log = []
        x = leaf(lib)
        x.register_hook(logger(log, "x", lambda g: g * 2))
        x.backward(lib.ones(3))
        y = x * 3
        y.register_hook(logger(log, "y", lambda g: g * 2))
        y.backward(lib.ones(3))
        return log, x.grad
    both(prog)


def test_unused_output_of_a_reached_node_gets_none():
    def prog(lib):
        log = []
        x = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        a, b = (x * 1).split(2)
        b.register_hook(logger(log, "b"))
        a.register_hook(logger(log, "a"))
        (a * 2).sum().backward()
        return log, x.grad
    log, _ = both(prog)
    assert log[0] == ["b", None]


def test_hook_survives_the_tensor_object():
    def prog(lib):
        log = []
        x = leaf(lib)
        y = x * 2
        y.register_hook(logger(log, "y", lambda g: g * 4))
        loss = (y * y).sum()
        del y
        loss.backward()
        return log, x.grad
    both(prog)


def test_hooks_stay_with_the_version_they_were_registered_on():
    def prog(lib):
        log = []
        x = leaf(lib)
        y = x * 2
        y.register_hook(logger(log, "before"))
        y.mul_(3)
        y.register_hook(logger(log, "after", lambda g: g * 2))
        (y * y).sum().backward()
        return log, x.grad
    both(prog)


def test_hooks_run_with_grad_mode_off():
    def prog(lib):
        seen = []
        x = leaf(lib)
        y = x * 2
        y.register_hook(lambda g: seen.append(lib.is_grad_enabled()))
        x.register_hook(lambda g: seen.append(lib.is_grad_enabled()))
        x.register_post_accumulate_grad_hook(lambda t: seen.append(lib.is_grad_enabled()))
        y.sum().backward()
        return seen
    assert both(prog) == [False, False, False]


# ---- autograd.grad ---------------------------------------------------------------------------
def test_autograd_grad_runs_the_hooks_of_inputs_and_of_tensors_on_the_way():
    def prog(lib):
        log = []
        x, w = leaf(lib), leaf(lib, (2.0, 0.5, 1.0))
        x.register_hook(logger(log, "x", lambda g: g * 3))
        x.register_post_accumulate_grad_hook(lambda t: log.append("post"))
        y = x * w
        y.register_hook(logger(log, "y", lambda g: g + 1))
        z = y.sin()
        z.register_hook(logger(log, "z", lambda g: g * 2))
        loss = (z * z).sum()
        (gx,) = lib.autograd.grad(loss, [x], retain_graph=True)
        (gy,) = lib.autograd.grad(loss, y)
        return log, gx, gy, x.grad, w.grad
    log, *_ = both(prog)
    assert [name for name, _ in log] == ["z", "y", "x", "z", "y"]


# ---- post-accumulate hooks -------------------------------------------------------------------
def test_post_accumulate_hook_sees_the_updated_grad():
    def prog(lib):
        log = []
        x = leaf(lib)
        x.register_hook(lambda g: g * 2)
        x.register_post_accumulate_grad_hook(lambda t: log.append(t.grad.clone()))
        (x * x).sum().backward()
        (x * x).sum().backward()
        return log, x.grad
    both(prog)


# ---- activation checkpointing ----------------------------------------------------------------
def test_hooks_around_and_inside_a_checkpointed_function():
    def prog(lib):
        log = []
        x = leaf(lib)
        w = leaf(lib, (0.5, -1.0, 2.0))
        h = x * 2
        for t, name in ((x, "x"), (w, "w"), (h, "h")):
            t.register_hook(logger(log, name, lambda g: g * 3))

        def block(a):
            b = a * w
            b.register_hook(logger(log, "inner", lambda g: g + 1))   # fires once, on the recomputation
            return b.sin()
        if lib is mg:
            out = checkpoint(block, h)
        else:
            from torch.utils.checkpoint import checkpoint as torch_checkpoint
            out = torch_checkpoint(block, h, use_reentrant=False)
        out.register_hook(logger(log, "out", lambda g: g * 2))
        (out * out).sum().backward()
        return sorted(log, key=lambda e: e[0]), x.grad, w.grad
    both(prog)


# ---- errors (no torch needed) ----------------------------------------------------------------
def test_errors():
    msg = "cannot register a hook on a tensor that doesn't require gradient"
    for t in (mg.tensor([1.0, 2.0]), mg.tensor([1, 2]), mg.tensor([1.0]).detach()):
        with pytest.raises(RuntimeError, match=msg):
            t.register_hook(lambda g: g)
        with pytest.raises(RuntimeError, match=msg):
            t.register_post_accumulate_grad_hook(lambda t: None)
    x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(TypeError, match="callable"):
        x.register_hook(3)

    def short(g):
        return g[:2]
    cases = [(short, RuntimeError, "hook 'short' has changed the size of value"),
             (lambda g: g.double(), RuntimeError, "changed the type of value .was float32 got float64"),
             (lambda g: g.data, TypeError, "expected Tensor, but hook '<lambda>' returned 'ndarray'")]
    for hook, err, match in cases:
        for on_leaf in (False, True):
            x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
            y = x * 2
            handle = (x if on_leaf else y).register_hook(hook)
            with pytest.raises(err, match=match):
                y.sum().backward()
            handle.remove()


def test_a_failing_hook_leaves_every_grad_as_it_was():
    x, w = mg.tensor([1.0, 2.0], requires_grad=True), mg.tensor([3.0, 4.0], requires_grad=True)
    w.grad = mg.tensor([1.0, 1.0])
    fired = []
    w.register_post_accumulate_grad_hook(lambda t: fired.append(t))

    def boom(g):
        raise ValueError("boom")
    handle = x.register_hook(boom)
    with pytest.raises(ValueError, match="boom"):
        (x * w).sum().backward()
    assert x.grad is None and w.grad.tolist() == [1.0, 1.0] and not fired
    handle.remove()
    (x * w).sum().backward()
    assert x.grad.tolist() == [3.0, 4.0] and w.grad.tolist() == [2.0, 3.0] and fired == [w]


def test_a_hook_that_keeps_its_grad_does_not_alias_the_leaf_grad():
    kept = []
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(kept.append)
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    assert [k.tolist() for k in kept] == [[3.0, 3.0], [3.0, 3.0]] and x.grad.tolist() == [6.0, 6.0]


# ---- a training step with per-tensor gradient clipping ---------------------------------------
def _gpt_step(clip):
    from minigrad.models import GPT, GPTConfig

    mg.manual_seed(0)
    cfg = GPTConfig(vocab_size=32, d_model=32, n_layer=2, n_head=4, ffn_hidden=64, max_seq_len=16)
    model = GPT(cfg)
    handles = [p.register_hook(clip) for p in model.parameters()] if clip else []
    opt = mg.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 32, (2, 16))
    loss = F.cross_entropy(model(ids).reshape(-1, 32), mg.tensor(rng.integers(0, 32, 32)))
    loss.backward()
    grads = [p.grad.data.copy() for p in model.parameters()]
    opt.step()
    for h in handles:
        h.remove()
    return grads, [p.data.copy() for p in model.parameters()]


def test_per_tensor_gradient_clipping_in_a_gpt_step():
    max_norm = 0.05

    def clip(g):
        norm = float(np.sqrt((g.data.astype(np.float64) ** 2).sum()))
        return g * min(1.0, max_norm / (norm + 1e-6))
    raw, _ = _gpt_step(None)
    clipped, params = _gpt_step(clip)
    assert any(np.linalg.norm(g) > max_norm * 1.01 for g in raw)      # some grads were clipped
    for g, c in zip(raw, clipped):
        expected = g * min(1.0, max_norm / (float(np.linalg.norm(g.astype(np.float64))) + 1e-6))
        np.testing.assert_allclose(c, expected, rtol=1e-6, atol=1e-9)
        assert np.linalg.norm(c) <= max_norm * 1.0001
    assert all(np.isfinite(p).all() for p in params)


def test_copies_do_not_take_the_hooks():
    def prog(lib):
        import copy

        x = leaf(lib)
        x.register_hook(lambda g: g * 10)
        y = copy.deepcopy(x)
        (y * 1).sum().backward()
        return y.grad
    both(prog)


@pytest.mark.parametrize("write", ["mul_", "add_", "setitem", "twice"])
def test_retain_grad_follows_the_tensor_through_in_place_writes(write):
    """retain_grad() then an in-place write: .grad is the grad of the new value (torch), while a hook
    registered before the write stays with the old value."""
    def prog(lib):
        log = []
        x = leaf(lib)
        y = x * 2
        y.retain_grad()
        y.register_hook(logger(log, "old"))
        if write == "mul_":
            y.mul_(3)
        elif write == "add_":
            y.add_(x)
        elif write == "setitem":
            y[1] = x[0] * 5
        else:
            y.mul_(3)
            y.add_(1.0)
        (y * y * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        return log, y.grad, x.grad
    both(prog)
