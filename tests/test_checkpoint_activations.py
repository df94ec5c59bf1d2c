"""Activation checkpointing (minigrad.utils.checkpoint): grads equal those of the plain run (fp64,
exactly: the recomputation repeats the same ops), for parameters inside as well as arguments; tuple
and non-tensor outputs and arguments; nesting; dropout replayed; autograd.grad; checkpoint_sequential;
GPT and RWKV-7 with gradient_checkpointing_enable(); the tape holds much less; PyTorch's semantics."""
import tracemalloc

import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F
from minigrad import nn
from minigrad.autograd import gradcheck
from minigrad.autograd.function import _root
from minigrad.models import GPT, RWKV7, GPTConfig, RWKV7Config
from minigrad.utils.checkpoint import _Checkpoint, checkpoint, checkpoint_sequential

F64 = np.float64


pytestmark = pytest.mark.usefixtures("one_thread")   # tiny models (tests/conftest.py)


def leaf(*shape, seed=0):
    return mg.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


class Block(nn.Module):
    """Several ops with parameters inside: x -> x + W2 tanh(W1 rms(x) + b) * s."""

    def __init__(self, d=6, seed=0):
        super().__init__()
        mg.manual_seed(seed)
        self.fc1 = nn.Linear(d, 2 * d, dtype=F64)
        self.fc2 = nn.Linear(2 * d, d, dtype=F64)
        self.scale = nn.Parameter(np.linspace(0.5, 1.5, d))

    def forward(self, x, factor=1.0):
        h = F.rms_norm(x, self.scale, 1e-6)
        return x + self.fc2(self.fc1(h).tanh()) * factor


def run(fn, inputs, params, cot_seed=3):
    """Loss <c, fn()> backward; returns (loss, grads of inputs then params) and clears the grads."""
    tensors = list(inputs) + list(params)
    for t in tensors:
        t.grad = None
    out = fn()
    outs = out if isinstance(out, tuple) else (out,)
    rng = np.random.default_rng(cot_seed)
    loss = sum(((o * mg.tensor(rng.standard_normal(o.shape))).sum() for o in outs
                if isinstance(o, mg.Tensor) and o.requires_grad), mg.tensor(0.0, dtype=F64))
    loss.backward()
    grads = [None if t.grad is None else t.grad.data.copy() for t in tensors]
    for t in tensors:
        t.grad = None
    return loss.item(), grads


def assert_same(a, b, tol=0.0):
    (la, ga), (lb, gb) = a, b
    assert la == pytest.approx(lb, rel=tol, abs=tol)
    assert len(ga) == len(gb)
    for i, (x, y) in enumerate(zip(ga, gb)):
        assert (x is None) == (y is None), i
        if x is not None:
            np.testing.assert_allclose(x, y, rtol=tol, atol=tol * max(1.0, np.abs(y).max()), err_msg=str(i))


def nodes_of(*roots):
    seen, out, stack = set(), [], [r._node for r in roots if r._node is not None]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            out.append(node)
            stack.extend(i[0] for i in node.inputs if isinstance(i, tuple))
    return out


def saved_bytes(root, params):
    """Bytes of the distinct arrays the tape below `root` saved for backward, parameters excepted."""
    owned = {id(_root(p.data)) for p in params}
    arrays = {}
    for node in nodes_of(root):
        for a in node.ctx._saved:
            if isinstance(a, np.ndarray) and id(_root(a)) not in owned:
                arrays[id(_root(a))] = _root(a).nbytes
    return sum(arrays.values())


# ---- the function -------------------------------------------------------------------------------
def test_grads_of_arguments_and_parameters_inside_equal_the_plain_run():
    block, x, y = Block(), leaf(2, 3, 6), leaf(2, 3, 6, seed=1)
    params = list(block.parameters())
    plain = run(lambda: block(x) * y, [x, y], params)
    ckpt = run(lambda: checkpoint(block, x) * y, [x, y], params)
    assert_same(plain, ckpt)
    assert all(g is not None for g in ckpt[1])


def test_tuple_and_non_tensor_outputs_and_non_tensor_arguments():
    block, x, w = Block(), leaf(4, 6), leaf(6, seed=1)

    def fn(x, w, how, factor=1.0):
        h = block(x, factor)
        return (h * w, "tag", None, (h.sum(-1), 7)) if how == "tuple" else h

    params = list(block.parameters())
    seen = []

    def checked(out):
        seen.append(out[1:])
        return (out[0], out[3][0])

    plain = run(lambda: checked(fn(x, w, "tuple", factor=0.5)), [x, w], params)
    ckpt = run(lambda: checked(checkpoint(fn, x, w, "tuple", factor=0.5)), [x, w], params)
    assert_same(plain, ckpt)
    assert seen[1][:2] == ("tag", None) and seen[1][2][1] == 7
    # tensors nested in the arguments (tuples, lists, dicts) are tracked as inputs
    nested = lambda d: fn(d["pair"][0], d["pair"][1][0], "tensor")
    assert_same(run(lambda: nested({"pair": (x, [w])}), [x, w], params),
                run(lambda: checkpoint(nested, {"pair": (x, [w])}), [x, w], params))


def test_an_input_not_requiring_grad_and_none_requiring_grad():
    block, x = Block(), leaf(3, 6)
    const = mg.tensor(np.random.default_rng(5).standard_normal((3, 6)))
    params = list(block.parameters())
    fn = lambda a, b: block(a + b)
    assert_same(run(lambda: fn(x, const), [x, const], params),
                run(lambda: checkpoint(fn, x, const), [x, const], params))
    # no argument requires grad: the parameters inside still get theirs (PyTorch's use_reentrant=False)
    plain = run(lambda: block(const), [const], params)
    ckpt = run(lambda: checkpoint(block, const), [const], params)
    assert_same(plain, ckpt)
    assert ckpt[1][0] is None and all(g is not None for g in ckpt[1][1:])


def test_nested_checkpoints():
    outer, inner, x = Block(seed=1), Block(seed=2), leaf(2, 6)
    params = list(outer.parameters()) + list(inner.parameters())
    fn = lambda t, ck: outer(ck(inner, t) * 2.0)
    plain = run(lambda: fn(x, lambda f, t: f(t)), [x], params)
    nested = run(lambda: checkpoint(fn, x, checkpoint), [x], params)
    assert_same(plain, nested)


def test_dropout_inside_replays_its_masks():
    block, x = Block(), leaf(8, 6)
    params = list(block.parameters())
    fn = lambda t: F.dropout(block(F.dropout(t, 0.3)), 0.5)

    def seeded(f):
        mg.manual_seed(123)
        out = run(f, [x], params)
        return out, mg.random.get_rng_state()

    (plain, after_plain) = seeded(lambda: fn(x))
    (ckpt, after_ckpt) = seeded(lambda: checkpoint(fn, x))
    assert_same(plain, ckpt)
    assert after_ckpt == after_plain          # backward leaves the global stream where it was
    gen = mg.random.default_generator()
    run(lambda: checkpoint(fn, x), [x], params)
    assert mg.random.default_generator() is gen       # and the generator object (a DataLoader may hold it)
    (loose, _) = seeded(lambda: checkpoint(fn, x, preserve_rng_state=False))
    assert not np.allclose(loose[1][0], plain[1][0])      # fresh masks: other (wrong) grads


def test_autograd_grad_retain_graph_and_leaf_grads():
    block, x = Block(), leaf(3, 6)
    w = block.fc1.weight
    want = run(lambda: block(x), [x], [w])[1]
    block.zero_grad()
    cot = np.random.default_rng(3).standard_normal((3, 6))

    out = checkpoint(block, x)
    loss = (out * mg.tensor(cot)).sum()
    gx, gw = mg.autograd.grad(loss, [x, w], retain_graph=True)
    np.testing.assert_array_equal(gx.data, want[0])
    np.testing.assert_array_equal(gw.data, want[1])
    assert x.grad is None and w.grad is None                # grad() touches no .grad
    (gw_only,) = mg.autograd.grad(loss, [w], retain_graph=True)
    np.testing.assert_array_equal(gw_only.data, want[1])
    assert block.fc2.weight.grad is None                     # inputs= keeps only its inputs
    loss.backward(retain_graph=True)                         # a retained graph recomputes again
    loss.backward()
    np.testing.assert_allclose(w.grad.data, 2 * want[1], rtol=1e-15)
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_no_grad_just_runs():
    block, x = Block(), leaf(3, 6)
    with mg.no_grad():
        out = checkpoint(block, x)
    assert not out.requires_grad
    with mg.no_grad():
        np.testing.assert_array_equal(out.data, block(x).data)


def test_clear_errors_leave_every_grad_as_it_was():
    block, x = Block(), leaf(3, 6)
    hidden = x * 2.0                                         # history the function reaches by closure
    loss = checkpoint(lambda t: block(t) * hidden, x).sum() + x.sum()
    with pytest.raises(RuntimeError, match="does not receive as an argument"):
        loss.backward()
    assert x.grad is None and all(p.grad is None for p in block.parameters())

    loss = checkpoint(block, x).sum()
    with mg.no_grad():
        x.add_(1.0)                                          # the recomputation would see new values
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()
    with pytest.raises(TypeError, match="use_reentrant"):
        checkpoint(block, x, use_reentrant="no")


# ---- checkpoint_sequential ----------------------------------------------------------------------
def test_checkpoint_sequential():
    mg.manual_seed(0)
    seq = nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(5, 5, dtype=F64), nn.Tanh())],
                        nn.Linear(5, 2, dtype=F64))
    x = leaf(4, 5)
    params = list(seq.parameters())
    plain = run(lambda: seq(x), [x], params)
    for segments in (1, 2, 3, 7):
        assert_same(plain, run(lambda s=segments: checkpoint_sequential(seq, s, x), [x], params))
    assert_same(plain, run(lambda: checkpoint_sequential(list(seq.children()), 3, x), [x], params))
    out = checkpoint_sequential(seq, 3, x)                   # segments of 2: 2 checkpointed + the rest
    assert sum(n.fn is _Checkpoint for n in nodes_of(out)) == 2
    for bad in (0, 8, 2.0):
        with pytest.raises(ValueError, match="segments"):
            checkpoint_sequential(seq, bad, x)


# ---- models -------------------------------------------------------------------------------------
def tiny_gpt(tied):
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, d_model=8, n_layer=3, n_head=2, n_kv_head=1, ffn_hidden=6,
                          max_seq_len=16, tie_embeddings=tied), dtype=F64)
    rng = np.random.default_rng(1)
    for p in model.parameters():
        p.data[...] = rng.standard_normal(p.shape) * (0.5 if p.ndim == 2 else 0.3) + (p.ndim == 1)
    return model


def tiny_rwkv():
    model = RWKV7(RWKV7Config(vocab_size=7, d_model=8, n_layer=3, head_size=4, d_decay_lora=3, d_aaa_lora=4,
                              d_mv_lora=2, d_gate_lora=5, ffn_hidden=12), dtype=F64, seed=0)
    rng = np.random.default_rng(0)
    for p in model.parameters():            # the official init zeroes some projections
        p.data += 0.3 * rng.standard_normal(p.shape)
    return model


def model_grads(model, idx, on):
    (model.gradient_checkpointing_enable if on else model.gradient_checkpointing_disable)()
    V = model.config.vocab_size
    target = np.random.default_rng(7).integers(0, V, idx.shape)
    params = list(model.parameters())
    loss_grads = run(lambda: F.cross_entropy(model(idx).reshape(-1, V), target.reshape(-1)), [], params)
    model.gradient_checkpointing_disable()
    return loss_grads


@pytest.mark.parametrize("make", [lambda: tiny_gpt(True), lambda: tiny_gpt(False), tiny_rwkv],
                         ids=["gpt-tied", "gpt-untied", "rwkv7"])
def test_models_loss_and_every_gradient_equal_with_checkpointing(make):
    model = make()
    idx = np.random.default_rng(2).integers(0, model.config.vocab_size, (2, 6))
    plain = model_grads(model, idx, False)
    ckpt = model_grads(model, idx, True)
    assert all(g is not None for g in ckpt[1])
    assert_same(plain, ckpt, tol=1e-12)
    # one checkpoint node per layer when enabled and grad is on; none when off or under no_grad
    model.gradient_checkpointing_enable()
    assert model.is_gradient_checkpointing
    n_ckpt = sum(n.fn is _Checkpoint for n in nodes_of(model(idx)))
    assert n_ckpt == model.config.n_layer
    with mg.no_grad():
        assert model(idx)._node is None
    model.generate(idx, 2, temperature=0)                    # decoding never checkpoints
    model.gradient_checkpointing_disable()
    assert not any(n.fn is _Checkpoint for n in nodes_of(model(idx)))
    with pytest.raises(TypeError, match="unknown"):
        model.gradient_checkpointing_enable({"use_reentrantt": False})


def test_rwkv7_carried_state_and_v_first_gradcheck_through_checkpointed_blocks():
    """fp64 finite differences through checkpointed blocks: the grads of every parameter (v_first of
    layer 0 feeds every later block's value residual) and of a carried input state."""
    model = tiny_rwkv()
    model.gradient_checkpointing_enable()
    idx = np.random.default_rng(2).integers(0, 7, (2, 5))
    with mg.no_grad():
        _, start = model(idx[:, :2], return_state=True)
    start = [tuple(mg.tensor(s.data, requires_grad=True) for s in layer) for layer in start]

    def chunk(*_):
        logits, end = model(idx[:, 2:], state=start, return_state=True)
        return (logits, *[s for layer in end for s in layer])

    inputs = [s for layer in start for s in layer] + list(model.parameters())
    assert gradcheck(chunk, inputs, eps=1e-6, rtol=1e-6, atol=1e-9, fast=True, n_projections=2)


def test_gpt_gradcheck_with_checkpointing():
    model = tiny_gpt(False)
    model.gradient_checkpointing_enable()
    idx = np.random.default_rng(2).integers(0, 11, (2, 4))
    assert gradcheck(lambda *_: model(idx), list(model.parameters()), eps=1e-6, rtol=1e-6, atol=1e-9,
                     fast=True, n_projections=2)


def test_saved_activations_and_peak_memory_drop():
    mg.manual_seed(0)
    cfg = GPTConfig(vocab_size=256, d_model=128, n_layer=4, n_head=4, ffn_hidden=344, max_seq_len=64)
    model = GPT(cfg)
    params = list(model.parameters())
    idx = np.random.default_rng(0).integers(0, 256, (4, 65))

    def loss_fn():
        return F.cross_entropy(model(idx[:, :-1]).reshape(-1, 256), idx[:, 1:].reshape(-1))

    def measure(on):
        (model.gradient_checkpointing_enable if on else model.gradient_checkpointing_disable)()
        model.zero_grad()
        loss_fn().backward()                                 # warm-up: grads exist, tables built
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        loss = loss_fn()
        tape = saved_bytes(loss, params)
        loss.backward()
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        model.gradient_checkpointing_disable()
        return tape, peak

    tape_plain, peak_plain = measure(False)
    tape_ckpt, peak_ckpt = measure(True)
    # the tape keeps each layer's two inputs instead of its dozen activations
    assert tape_ckpt < 0.35 * tape_plain, (tape_ckpt, tape_plain)
    assert peak_ckpt < 0.7 * peak_plain, (peak_ckpt, peak_plain)


# ---- PyTorch --------------------------------------------------------------------------------------
def test_matches_torch_checkpoint_semantics():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    block = Block()
    tblock = torch.nn.ModuleDict({"fc1": torch.nn.Linear(6, 12), "fc2": torch.nn.Linear(12, 6)}).double()
    with torch.no_grad():
        for name in ("fc1", "fc2"):
            for p in ("weight", "bias"):
                getattr(tblock[name], p).copy_(torch.from_numpy(getattr(getattr(block, name), p).data))
    tscale = torch.nn.Parameter(torch.from_numpy(block.scale.data.copy()))

    def tfn(x, factor):
        h = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * tscale
        return x + tblock["fc2"](torch.tanh(tblock["fc1"](h))) * factor

    xs = np.random.default_rng(0).standard_normal((2, 3, 6))
    cot = np.random.default_rng(1).standard_normal((2, 3, 6))
    for x_requires_grad in (True, False):      # also: no input requires grad, params still get grads
        x = mg.tensor(xs, requires_grad=x_requires_grad)
        tx = torch.tensor(xs, requires_grad=x_requires_grad)
        (checkpoint(block, x, 0.5) * mg.tensor(cot)).sum().backward()
        (torch_checkpoint(tfn, tx, 0.5, use_reentrant=False) * torch.from_numpy(cot)).sum().backward()
        pairs = [(block.fc1.weight, tblock["fc1"].weight), (block.fc2.bias, tblock["fc2"].bias),
                 (block.scale, tscale)] + ([(x, tx)] if x_requires_grad else [])
        for ours, theirs in pairs:
            np.testing.assert_allclose(ours.grad.data, theirs.grad.numpy(), rtol=1e-12, atol=1e-14)
            ours.grad, theirs.grad = None, None
