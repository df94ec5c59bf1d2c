"""nn.Module hooks: forward pre-/post-hooks (order, replacement, kwargs, always_call), handles, global
hooks, and full backward (pre-)hooks compared with torch's on the same modules and weights."""
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.models.gpt import GPT, GPTConfig
from minigrad.nn import module as module_mod

try:
    import torch
except ImportError:                     # the torch comparisons skip; the rest runs
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is the reference for backward hooks")
# torch warns when a full backward hook fires for a module none of whose inputs requires grad; so do we
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")


def _x(shape=(2, 3), seed=0, requires_grad=True):
    return mg.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=mg.float64,
                     requires_grad=requires_grad)


class Echo(nn.Module):
    def forward(self, *args, **kwargs):
        return args, kwargs


class Fails(nn.Module):
    def forward(self, x):
        raise ValueError("forward failed")


# ---- forward hooks -----------------------------------------------------------------------------
def test_pre_and_forward_hooks_run_in_order_and_prepend_goes_first():
    m, log = Echo(), []
    m.register_forward_pre_hook(lambda mod, args: log.append("pre1"))
    m.register_forward_pre_hook(lambda mod, args: log.append("pre0"), prepend=True)
    m.register_forward_hook(lambda mod, args, out: log.append("fwd1"))
    m.register_forward_hook(lambda mod, args, out: log.append("fwd0"), prepend=True)
    m.register_forward_hook(lambda mod, args, out: log.append("fwd2"))
    m(1)
    assert log == ["pre0", "pre1", "fwd0", "fwd1", "fwd2"]


def test_pre_hook_replaces_args_and_wraps_a_single_value():
    m = Echo()
    m.register_forward_pre_hook(lambda mod, args: args[0] + 1)         # not a tuple: wrapped
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 10, "b"))
    m.register_forward_pre_hook(lambda mod, args: None)                # keeps them
    assert m(1, "a", k=2) == ((20, "b"), {"k": 2})


def test_with_kwargs_hooks_see_and_replace_kwargs():
    m, seen = Echo(), []
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args + (3,), {**kwargs, "k": 5}),
                                with_kwargs=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: seen.append((args, kwargs)), with_kwargs=True)
    assert m(1, k=2) == ((1, 3), {"k": 5})
    assert seen == [((1, 3), {"k": 5})]
    m.register_forward_pre_hook(lambda mod, args, kwargs: [args, kwargs], with_kwargs=True)
    with pytest.raises(RuntimeError, match="new_args, new_kwargs"):
        m(1)


def test_forward_hook_replaces_the_output_and_sees_the_replaced_args():
    lin = nn.Linear(3, 2)
    x = _x(requires_grad=False).float()
    seen = []
    lin.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    lin.register_forward_hook(lambda mod, args, out: seen.append(args[0]) or out * 0 + 7)
    lin.register_forward_hook(lambda mod, args, out: out + 1)          # sees the previous one's output
    np.testing.assert_array_equal(lin(x).data, np.full((2, 2), 8, np.float32))
    np.testing.assert_array_equal(seen[0].data, x.data * 2)


def test_always_call_hooks_run_when_forward_raises_then_the_error_propagates():
    m, log = Fails(), []
    m.register_forward_hook(lambda mod, args, out: log.append(("plain", out)))
    m.register_forward_hook(lambda mod, args, out: log.append(("always", args, out)), always_call=True)
    m.register_forward_hook(lambda mod, args, kw, out: log.append(("always kw", kw)), always_call=True,
                            with_kwargs=True)
    with pytest.raises(ValueError, match="forward failed"):
        m(1)
    assert log == [("always", (1,), None), ("always kw", {})]


def test_always_call_hook_errors_are_warnings_and_a_hook_that_ran_is_not_rerun():
    m = Fails()
    m.register_forward_hook(lambda mod, args, out: 1 / 0, always_call=True)
    with pytest.warns(UserWarning, match="always_call=True.*division by zero"):
        with pytest.raises(ValueError, match="forward failed"):
            m(1)
    lin, calls = nn.Linear(3, 2), []
    lin.register_forward_hook(lambda mod, args, out: calls.append(out.shape), always_call=True)
    lin.register_forward_hook(lambda mod, args, out: {}["missing"])      # raises after it ran
    with pytest.raises(KeyError):
        lin(_x(requires_grad=False).float())
    assert calls == [(2, 2)]


# ---- handles, fast path, global hooks ----------------------------------------------------------
def test_handle_remove_is_idempotent_and_cleans_every_dict():
    m, log = Echo(), []
    h = m.register_forward_hook(lambda mod, args, out: log.append(1), with_kwargs=False, always_call=True)
    hk = m.register_forward_hook(lambda mod, args, kw, out: log.append(2), with_kwargs=True)
    assert len(m._forward_hooks) == 2 and list(m._forward_hooks) == [h.id, hk.id]
    assert len(m._forward_hooks_always_called) == 1 and len(m._forward_hooks_with_kwargs) == 1
    m(0)
    h.remove()
    h.remove()
    m(0)
    assert log == [1, 2, 2]
    hk.remove()
    assert not (m._forward_hooks or m._forward_hooks_with_kwargs or m._forward_hooks_always_called
                or m._hook_ids)


def test_handle_as_context_manager():
    m, log = Echo(), []
    with m.register_forward_pre_hook(lambda mod, args: log.append(args)) as h:
        assert isinstance(h, module_mod.RemovableHandle)
        m(1)
    m(2)
    assert log == [(1,)] and len(m._forward_pre_hooks) == 0


def test_a_module_without_hooks_calls_forward_directly(monkeypatch):
    m = nn.Linear(3, 2)
    h = m.register_forward_hook(lambda *a: None)
    h.remove()

    def fail(*args):
        raise AssertionError("the hook path ran")
    monkeypatch.setattr(module_mod, "call_with_hooks", fail)
    m(_x(requires_grad=False).float())


def test_global_forward_hooks_run_for_every_module_before_its_own():
    seq = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
    log = []
    seq[1].register_forward_hook(lambda mod, args, out: log.append("own"))
    with module_mod.register_module_forward_hook(lambda mod, args, out: log.append(type(mod).__name__)), \
            module_mod.register_module_forward_pre_hook(lambda mod, args: log.append("pre")):
        seq(_x(requires_grad=False).float())
    seq(_x(requires_grad=False).float())
    assert log == ["pre", "pre", "Linear", "pre", "Tanh", "own", "Sequential", "own"]


def test_global_backward_hooks_run_for_every_module_before_its_own():
    seq = nn.Sequential(nn.Linear(3, 4, dtype=mg.float64), nn.Tanh())
    log = []
    seq[0].register_full_backward_hook(lambda mod, gi, go: log.append("own"))
    with module_mod.register_module_full_backward_hook(lambda mod, gi, go: log.append(type(mod).__name__)), \
            module_mod.register_module_full_backward_pre_hook(lambda mod, go: log.append("pre")):
        seq(_x()).sum().backward()
    seq(_x()).sum().backward()
    assert log == ["pre", "pre", "Tanh", "pre", "Linear", "own", "Sequential", "own"]


def test_hooks_on_a_submodule_inside_sequential():
    seq = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    x = _x(requires_grad=False).float()
    acts = {}
    with seq[1].register_forward_hook(lambda mod, args, out: acts.update(tanh=out)):
        y = seq(x)
    np.testing.assert_array_equal(acts["tanh"].data, seq[1](seq[0](x)).data)
    with seq[1].register_forward_hook(lambda mod, args, out: out * 0):
        np.testing.assert_array_equal(seq(x).data, np.broadcast_to(seq[2].bias.data, (2, 1)))
    np.testing.assert_array_equal(seq(x).data, y.data)


# ---- backward hooks (minigrad only) -------------------------------------------------------------
def test_backward_hooks_fire_once_per_call_and_per_backward():
    lin = nn.Linear(3, 2, dtype=mg.float64)
    got = []
    lin.register_full_backward_hook(lambda mod, gi, go: got.append(go[0].data.copy()))
    x = _x()
    (lin(x).sum() + 10 * lin(x).sum()).backward()
    assert [g[0, 0] for g in got] == [10.0, 1.0]            # the later call's node runs first
    got.clear()
    y = lin(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert len(got) == 2


def test_hooks_are_those_registered_when_the_module_was_called():
    lin, log = nn.Linear(3, 2, dtype=mg.float64), []
    h = lin.register_full_backward_hook(lambda mod, gi, go: log.append("removed after the call"))
    out = lin(_x())
    h.remove()
    lin.register_full_backward_hook(lambda mod, gi, go: log.append("registered after the call"))
    out.sum().backward()
    assert log == ["removed after the call"]


def test_no_backward_hook_node_outside_grad_mode():
    lin, log = nn.Linear(3, 2, dtype=mg.float64), []
    lin.register_full_backward_hook(lambda mod, gi, go: log.append(1))
    with mg.no_grad():
        out = lin(_x())
    assert not out.requires_grad and log == []


def test_a_later_backward_through_a_kept_input_runs_the_hooks():
    class Keep(nn.Module):
        def forward(self, x):
            self.kept = x                       # the input as forward saw it (after the hook's node)
            return x * 2

    m, log = Keep(), []
    m.register_full_backward_hook(lambda mod, gi, go: log.append(gi[0].data.copy()))
    x = _x((2,))
    y = m(x)
    (m.kept * 3).sum().backward()               # reaches the inputs but not through the outputs
    assert log == [] and np.all(x.grad.data == 3)
    y.sum().backward()                          # the call's nodes were freed once: as torch, it works
    assert len(log) == 1 and np.all(log[0] == 2) and np.all(x.grad.data == 5)


def test_tuple_and_namedtuple_outputs_keep_their_type():
    from collections import namedtuple
    Pair = namedtuple("Pair", "a b")

    class Two(nn.Module):
        def forward(self, x):
            return Pair(x * 2, x * 3)

    m, log = Two(), []
    m.register_full_backward_hook(lambda mod, gi, go: log.append(go))
    out = m(_x((2,)))
    assert isinstance(out, Pair)
    out.b.sum().backward()
    assert log[0][0] is None and np.all(log[0][1].data == 1)


def test_backward_hook_errors():
    lin = nn.Linear(3, 2, dtype=mg.float64)
    lin.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        lin(_x()).sum().backward()
    lin = nn.Linear(3, 2, dtype=mg.float64)
    lin.register_full_backward_hook(lambda mod, gi, go: (gi[0][:1],))
    with pytest.raises(RuntimeError, match=r"shape of grad_input\[0\] from \(2, 3\) to \(1, 3\)"):
        lin(_x()).sum().backward()
    lin = nn.Linear(3, 2, dtype=mg.float64)
    lin.register_full_backward_pre_hook(lambda mod, go: go[0] * 2)
    with pytest.raises(TypeError, match="tuple of grad_output"):
        lin(_x()).sum().backward()
    mix = Echo()
    mix.register_full_backward_hook(lambda mod, gi, go: None)
    with pytest.raises(TypeError, match="share one dtype"):
        mix(_x(), _x().float())
    lin = nn.Linear(3, 2, dtype=mg.float64)
    lin.register_full_backward_hook(lambda mod, gi, go: (mg.ones(2, 3),))
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        with pytest.raises(RuntimeError, match="no input requires gradient should always return None"):
            lin(_x(requires_grad=False)).sum().backward()


def test_inplace_change_of_a_hooked_output_raises_as_in_torch():
    lin = nn.Linear(3, 2, dtype=mg.float64)
    lin.register_full_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="in-place"):
        lin(_x()).add_(1)


# ---- backward hooks against torch --------------------------------------------------------------
def _modules(kind, lib):
    """The same module in minigrad (lib = mg.nn) or torch (lib = torch.nn)."""
    if kind == "linear":
        return lib.Linear(3, 4)
    if kind == "mlp":
        return lib.Sequential(lib.Linear(3, 5), lib.Tanh(), lib.Linear(5, 2))

    class TwoInputs(lib.Module):               # forward(x, y, scale): y does not require grad
        def __init__(self):
            super().__init__()
            self.lin = lib.Linear(3, 4)

        def forward(self, x, y, scale):
            return self.lin(x) * y * scale

    class TupleOut(lib.Module):                # outputs: used, a non-Tensor, used, unused
        def __init__(self):
            super().__init__()
            self.lin = lib.Linear(3, 4)

        def forward(self, x):
            h = self.lin(x)
            return h * h, "tag", h * 3, h * 5

    return {"two_inputs": TwoInputs, "tuple_out": TupleOut}[kind]()


def _inputs(kind, lib_tensor, x_requires_grad=True):
    rng = np.random.default_rng(1)
    x = lib_tensor(rng.standard_normal((2, 3)), x_requires_grad)
    if kind == "two_inputs":
        return (x, lib_tensor(rng.standard_normal((2, 4)), False), 0.5)
    return (x,)


def _loss(out):
    if isinstance(out, tuple):
        out = out[0].sum() + out[2].sum()      # out[3] gets no gradient
    return (out * out).sum()


def _np(t):
    """A minigrad or torch tensor (or None) as a numpy array."""
    if t is None:
        return None
    return t.data if isinstance(t, mg.Tensor) else t.detach().numpy()


def _pair(kind):
    ours = _modules(kind, nn).to(mg.float64)
    torch.manual_seed(0)
    theirs = _modules(kind, torch.nn).double()
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _run(module, inputs, hooks, pre_hooks=()):
    """Register the hooks (each wrapped to record (grad_input, grad_output) as arrays), run forward
    and backward; return the records and the grads of the inputs and parameters."""
    records = []

    def recorder(hook):
        def wrapped(mod, *grads):
            records.append(tuple(tuple(_np(g) for g in gs) for gs in grads))
            return hook(mod, *grads)
        return wrapped
    for h in pre_hooks:
        module.register_full_backward_pre_hook(recorder(h))
    for h in hooks:
        module.register_full_backward_hook(recorder(h))
    _loss(module(*inputs)).backward()
    grads = [_np(t.grad) for t in inputs if hasattr(t, "requires_grad") and t.requires_grad]
    grads += [_np(p.grad) for p in module.parameters()]
    return records, grads


def _mg_tensor(a, rg):
    return mg.tensor(a, dtype=mg.float64, requires_grad=rg)


def _torch_tensor(a, rg):
    return torch.tensor(a, dtype=torch.float64, requires_grad=rg)


def _assert_same(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, (tuple, list)) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b)
    elif theirs is None:
        assert ours is None
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def _compare(kind, hooks, pre_hooks=(), x_requires_grad=True):
    ours, theirs = _pair(kind)
    got = _run(ours, _inputs(kind, _mg_tensor, x_requires_grad), hooks, pre_hooks)
    want = _run(theirs, _inputs(kind, _torch_tensor, x_requires_grad),
                [_torch_hook(h) for h in hooks], [_torch_hook(h) for h in pre_hooks])
    _assert_same(got, want)
    return got


def _torch_hook(hook):
    """The same hook for torch: minigrad Tensors it returns become torch tensors."""
    def wrapped(mod, *grads):
        out = hook(mod, *grads)
        return out if out is None else tuple(
            torch.from_numpy(g.data.copy()) if isinstance(g, mg.Tensor) else g for g in out)
    return wrapped


def _observe(mod, *grads):
    return None


@needs_torch
@pytest.mark.parametrize("kind", ["linear", "mlp", "two_inputs", "tuple_out"])
def test_grad_input_and_grad_output_match_torch(kind):
    records, _ = _compare(kind, [_observe], [_observe])
    assert len(records) == 2                   # the pre-hook, then the full hook, once each


@needs_torch
def test_two_inputs_grad_input_has_zeros_for_a_tensor_without_grad_and_none_for_a_number():
    (pre, (grad_input, grad_output)), _ = _compare("two_inputs", [_observe], [_observe])
    assert grad_input[1].shape == (2, 4) and not grad_input[1].any() and grad_input[2] is None


@needs_torch
def test_tuple_outputs_grad_output_is_none_for_non_tensors_and_outputs_without_gradient():
    (pre, (grad_input, grad_output)), _ = _compare("tuple_out", [_observe], [_observe])
    assert [g is None for g in grad_output] == [False, True, False, True]


@needs_torch
@pytest.mark.parametrize("kind", ["linear", "mlp", "tuple_out"])
def test_hook_fires_with_grad_input_none_when_no_input_requires_grad(kind):
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        records, _ = _compare(kind, [_observe], x_requires_grad=False)
    assert records[0][0] == (None,)


def _double_and_zero_last(mod, grad_input, grad_output):
    return (grad_input[0] * 2,) + tuple(None if g is None else g * 0 for g in grad_input[1:])


@needs_torch
@pytest.mark.parametrize("kind", ["linear", "mlp", "two_inputs", "tuple_out"])
def test_replacing_grad_input_changes_the_input_grads_only(kind):
    _, grads = _compare(kind, [_double_and_zero_last])
    _, plain = _compare(kind, [_observe])
    np.testing.assert_allclose(grads[0], 2 * plain[0])
    for a, b in zip(grads[1:], plain[1:]):                 # the module's own parameters: unchanged
        np.testing.assert_array_equal(a, b)


@needs_torch
def test_later_hooks_see_the_replaced_grad_input():
    records, _ = _compare("linear", [_double_and_zero_last, _observe])
    np.testing.assert_allclose(records[1][0][0], 2 * records[0][0][0])


@needs_torch
@pytest.mark.parametrize("kind", ["linear", "mlp", "tuple_out"])
def test_backward_pre_hook_replacing_grad_output(kind):
    def scale(mod, grad_output):
        return tuple(None if g is None else g * 3 for g in grad_output)
    records, grads = _compare(kind, [_observe], [scale])
    _, plain = _compare(kind, [_observe])
    for a, b in zip(grads, plain):                         # everything inside the module scales
        np.testing.assert_allclose(a, 3 * b)
    np.testing.assert_allclose(records[1][1][0], 3 * records[0][0][0])


@needs_torch
def test_backward_pre_hook_returning_none_entries_stops_those_gradients():
    _, grads = _compare("tuple_out", [_observe], [lambda mod, go: (None, None, go[2], None)])
    assert grads[0].any()


# ---- the shipped models ------------------------------------------------------------------------
def _gpt():
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=32, d_model=16, n_layer=2, n_head=2, max_seq_len=16))
    return model, np.random.default_rng(0).integers(0, 32, (2, 5))


def test_forward_hooks_capture_and_replace_gpt_activations():
    model, ids = _gpt()
    acts = {}
    for name in ("layers.0.self_attn", "layers.0.mlp", "layers.1.mlp.down_proj"):
        model.get_submodule(name).register_forward_hook(
            lambda mod, args, out, name=name: acts.update({name: out}))
    logits = model(ids)
    assert sorted(acts) == ["layers.0.mlp", "layers.0.self_attn", "layers.1.mlp.down_proj"]
    assert all(a.shape == (2, 5, 16) for a in acts.values())
    with model.layers[1].mlp.register_forward_hook(lambda mod, args, out: out * 0):
        zeroed = model(ids)
    assert not np.allclose(zeroed.data, logits.data)
    np.testing.assert_array_equal(model(ids).data, logits.data)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_backward_hooks_on_a_gpt_submodule(checkpointing):
    model, ids = _gpt()
    if checkpointing:
        model.gradient_checkpointing_enable()
    got = []
    model.layers[0].mlp.register_full_backward_hook(lambda mod, gi, go: got.append((gi[0], go[0])))
    model(ids).sum().backward()
    assert len(got) == 1 and got[0][0].shape == got[0][1].shape == (2, 5, 16)
    grad_w = model.layers[0].mlp.down_proj.weight.grad.data.copy()
    emb = model.embed_tokens.weight.grad.data.copy()
    model.zero_grad()
    model.layers[0].mlp.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0,))
    model(ids).sum().backward()
    np.testing.assert_array_equal(model.layers[0].mlp.down_proj.weight.grad.data, grad_w)
    assert not np.allclose(model.embed_tokens.weight.grad.data, emb)


def test_backward_hook_with_int_inputs_gets_none():
    emb, got = nn.Embedding(5, 3), []
    emb.register_full_backward_hook(lambda mod, gi, go: got.append((gi, go[0].shape)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        emb(mg.tensor([[1, 2]])).sum().backward()
    assert got == [((None,), (1, 2, 3))]
    assert any("no inputs require gradients" in str(w.message) for w in caught)


@pytest.mark.parametrize("tied", [True, False])
def test_hooks_on_gpt_layers_and_norms_fire_and_change_nothing(tied):
    """A hooked model runs its layers and norms as modules (unfused): every layer, norm and the
    untied head fire, and logits, grads and KV-cache generation equal the fused path's."""
    from minigrad.models import RWKV7, RWKV7Config

    cfg = GPTConfig(vocab_size=32, d_model=16, n_layer=3, n_head=2, max_seq_len=16, tie_embeddings=tied)
    mg.manual_seed(0)
    model = GPT(cfg, dtype=np.float64)
    ids = np.random.default_rng(0).integers(0, 32, (2, 5))

    def run():
        model.zero_grad()
        out = model(ids)
        (out * out).sum().backward()
        return out.data, {k: p.grad.data.copy() for k, p in model.named_parameters()}

    plain_logits, plain_grads = run()
    plain_gen = model.generate(ids[:, :3], 4, temperature=0).numpy()
    names = [f"layers.{i}{part}" for i in range(3) for part in ("", ".input_layernorm",
                                                                 ".post_attention_layernorm")] + ["norm"]
    names += [] if tied else ["lm_head"]
    fired = []
    handles = [model.get_submodule(n).register_forward_hook(lambda m, a, o, n=n: fired.append(n))
               for n in names]
    logits, grads = run()
    assert sorted(set(fired)) == sorted(names)
    np.testing.assert_allclose(logits, plain_logits, rtol=1e-12, atol=1e-12)
    for k in plain_grads:
        np.testing.assert_allclose(grads[k], plain_grads[k], rtol=1e-10, atol=1e-12, err_msg=k)
    np.testing.assert_array_equal(model.generate(ids[:, :3], 4, temperature=0).numpy(), plain_gen)
    for h in handles:
        h.remove()
    fired.clear()
    rwkv = RWKV7(RWKV7Config(vocab_size=32, d_model=16, n_layer=2, head_size=8), dtype=np.float64, seed=0)
    plain, state = rwkv(ids, return_state=True)
    names = ["blocks.0", "blocks.1", "blocks.0.ln0", "blocks.1.ln2", "ln_out", "head"]
    for n in names:
        rwkv.get_submodule(n).register_forward_hook(lambda m, a, o, n=n: fired.append(n))
    hooked, hooked_state = rwkv(ids, return_state=True)
    assert sorted(set(fired)) == sorted(names)
    np.testing.assert_allclose(hooked.data, plain.data, rtol=1e-12, atol=1e-12)
    for s, t in zip(hooked_state, state):
        for a, b in zip(s, t):
            np.testing.assert_allclose(a.data, b.data, rtol=1e-12, atol=1e-12)
