"""nn: Module registration and state_dict, layers (init, forward, gradients), clip_grad_norm_, training."""
import math
import pickle

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim
from minigrad.autograd import gradcheck
from minigrad.ops.linear import linear

F64 = mg.float64


def _t(shape, seed=0, dtype=F64, requires_grad=True):
    rng = np.random.default_rng(seed)
    return mg.tensor(rng.standard_normal(shape), dtype=dtype, requires_grad=requires_grad)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.register_buffer("scale", mg.ones(4))
        self.register_buffer("cache", mg.zeros(2), persistent=False)

    def forward(self, x):
        return self.norm(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(4, 2, bias=False)
        self.gain = nn.Parameter(np.ones(2, dtype=np.float32))
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.drop(self.head(x)) * self.gain


# ---- Module mechanics ---------------------------------------------------------------------------
def test_named_parameters_modules_children():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["gain", "blocks.0.fc.weight", "blocks.0.fc.bias", "blocks.0.norm.weight",
                     "blocks.0.norm.bias", "blocks.1.fc.weight", "blocks.1.fc.bias", "blocks.1.norm.weight",
                     "blocks.1.norm.bias", "head.weight"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in net.parameters())
    assert [n for n, _ in net.named_modules()] == ["", "blocks", "blocks.0", "blocks.0.fc", "blocks.0.norm",
                                                   "blocks.1", "blocks.1.fc", "blocks.1.norm", "head", "drop"]
    assert [type(c).__name__ for c in net.children()] == ["ModuleList", "Linear", "Dropout"]
    assert [n for n, _ in net.named_buffers()] == ["blocks.0.scale", "blocks.0.cache", "blocks.1.scale",
                                                   "blocks.1.cache"]
    assert net.num_parameters() == 2 + 2 * (16 + 4 + 4 + 4) + 8


def test_reassignment_and_deletion():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign Tensor to parameter 'weight'"):
        m.weight = mg.zeros(2, 2)
    m.weight = nn.Parameter(np.zeros((2, 2), dtype=np.float32))
    assert m.weight.data.sum() == 0
    m.bias = None
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    m.extra = nn.Linear(1, 1)
    del m.extra
    assert "extra" not in dict(m.named_children())
    m.plain = 3
    assert m.plain == 3 and "plain" not in dict(m.named_parameters())
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        m.missing  # noqa: B018


def test_assigning_before_super_init_is_explained():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.zeros(1))

    with pytest.raises(AttributeError, match=r"call super\(\).__init__\(\)"):
        Bad()


def test_tied_parameters_are_listed_once_but_saved_under_both_names():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 3)
            self.out = nn.Linear(3, 5, bias=False)
            self.out.weight = self.emb.weight

    m = Tied()
    assert [n for n, _ in m.named_parameters()] == ["emb.weight"]
    assert list(m.state_dict()) == ["emb.weight", "out.weight"]


def test_reassignment_keeps_registration_order_and_deepcopy_keeps_ties():
    import copy

    m = nn.Linear(3, 3)
    m.weight = nn.Parameter(np.zeros((3, 3), dtype=np.float32))
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    ml = nn.ModuleList([nn.Linear(1, 1), nn.Identity(), nn.Linear(1, 2)])
    ml[0] = nn.Identity()
    assert [type(x).__name__ for x in ml] == ["Identity", "Identity", "Linear"]
    tied = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    tied[1].weight = tied[0].weight
    clone = copy.deepcopy(tied)
    assert clone[1].weight is clone[0].weight and clone[0].weight is not tied[0].weight
    np.testing.assert_array_equal(clone[0].weight.data, tied[0].weight.data)


def test_train_eval_propagates():
    net = Net()
    assert net.training and net.drop.training
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_zero_grad_and_requires_grad():
    net = Net()
    for p in net.parameters():
        p.grad = mg.ones_like(p)
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.data.any() for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert net.num_parameters(trainable_only=True) == 0


def test_repr_is_readable():
    text = repr(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.LayerNorm(4), nn.Dropout(0.1)))
    assert text == ("Sequential(\n"
                    "  (0): Linear(in_features=3, out_features=4, bias=True)\n"
                    "  (1): ReLU()\n"
                    "  (2): LayerNorm((4,), eps=1e-05, elementwise_affine=True)\n"
                    "  (3): Dropout(p=0.1)\n"
                    ")")
    assert repr(nn.Parameter(np.zeros(2, dtype=np.float32))).startswith("Parameter containing:\ntensor(")


def test_to_dtype_keeps_parameter_identity():
    net = Net()
    weight = net.head.weight
    weight.grad = mg.ones_like(weight)
    net.to(mg.float64)
    assert net.head.weight is weight
    assert all(p.dtype == F64 for p in net.parameters())
    assert all(b.dtype == F64 for b in net.buffers())
    assert weight.grad.dtype == F64
    assert net(mg.randn(5, 4, dtype=F64)).dtype == F64
    with pytest.raises(TypeError, match="float32 or float64"):
        net.to(np.int64)


# ---- state_dict ----------------------------------------------------------------------------------
def test_state_dict_is_a_copy_and_round_trips():
    mg.manual_seed(0)
    a = Net()
    sd = a.state_dict()
    # PyTorch's order: a module's own parameters, then its own buffers, then its children's entries
    assert list(sd) == ["gain", "blocks.0.scale", "blocks.0.fc.weight", "blocks.0.fc.bias",
                        "blocks.0.norm.weight", "blocks.0.norm.bias", "blocks.1.scale", "blocks.1.fc.weight",
                        "blocks.1.fc.bias", "blocks.1.norm.weight", "blocks.1.norm.bias", "head.weight"]
    assert all(isinstance(v, np.ndarray) for v in sd.values())
    sd["head.weight"][...] = 7.0
    assert not (a.head.weight.data == 7.0).any()
    b = Net()
    weight = b.head.weight
    result = b.load_state_dict(pickle.loads(pickle.dumps(sd)))
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert b.head.weight is weight and (weight.data == 7.0).all()
    for name, value in a.state_dict().items():
        if name != "head.weight":
            np.testing.assert_array_equal(b.state_dict()[name], value)
    x = mg.randn(3, 4)
    a.eval(), b.eval()
    a.load_state_dict(b.state_dict())
    np.testing.assert_array_equal(a(x).data, b(x).data)


def test_load_state_dict_reports_every_problem_at_once_and_changes_nothing():
    net = Net()
    before = net.state_dict()
    sd = net.state_dict()
    del sd["gain"], sd["blocks.1.scale"]
    sd["head.bias"] = np.zeros(2, np.float32)
    sd["blocks.0.fc.weight"] = np.zeros((3, 4), np.float32)
    sd["blocks.0.fc.bias"] = np.zeros(4, np.float64)
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(sd)
    msg = str(info.value)
    assert msg.startswith("Error(s) in loading state_dict for Net:")
    assert 'Missing key(s) in state_dict: "gain", "blocks.1.scale"' in msg
    assert 'Unexpected key(s) in state_dict: "head.bias"' in msg
    assert ("size mismatch for blocks.0.fc.weight: copying a param with shape (3, 4) from the checkpoint, "
            "the shape in the current model is (4, 4)") in msg
    assert "dtype mismatch for blocks.0.fc.bias: the checkpoint has float64, the model has float32" in msg
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(value, before[name])


def test_load_state_dict_non_strict():
    net = Net()
    sd = {"head.weight": np.ones((2, 4), np.float32), "extra": np.zeros(1)}
    missing, unexpected = net.load_state_dict(sd, strict=False)
    assert unexpected == ["extra"] and "gain" in missing and "head.weight" not in missing
    assert (net.head.weight.data == 1).all()
    with pytest.raises(RuntimeError, match="size mismatch for head.weight"):
        net.load_state_dict({"head.weight": np.ones((4, 2), np.float32)}, strict=False)


def test_load_state_dict_bumps_versions():
    m = nn.Linear(2, 2)
    y = (m.weight * m.weight).sum()
    m.load_state_dict(m.state_dict())
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


# ---- layers ---------------------------------------------------------------------------------------
def test_linear_default_init_matches_pytorch_bounds():
    mg.manual_seed(0)
    m = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    assert m.weight.shape == (300, 400) and m.bias.shape == (300,)
    assert m.weight.dtype == mg.float32
    for p in (m.weight, m.bias):
        assert np.abs(p.data).max() <= bound
    assert np.abs(m.weight.data).max() > 0.99 * bound
    assert m.weight.data.std() == pytest.approx(bound / math.sqrt(3), rel=0.01)  # U(-b, b): std b/sqrt(3)
    mg.manual_seed(0)
    np.testing.assert_array_equal(nn.Linear(400, 300).weight.data, m.weight.data)  # seeded


@pytest.mark.parametrize("x_shape", [(3, 4), (2, 3, 4), (4,), (1, 1, 4)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_gradcheck(x_shape, bias):
    x, w = _t(x_shape, 1), _t((5, 4), 2)
    b = _t((5,), 3) if bias else None
    assert gradcheck(lambda *a: linear(*a), [x, w, b])
    assert max(gradcheck.last_errors) < 1e-6


def test_linear_matches_numpy_and_torch():
    x, w, b = _t((2, 3, 4), 1), _t((5, 4), 2), _t((5,), 3)
    y = linear(x, w, b)
    np.testing.assert_allclose(y.data, x.data @ w.data.T + b.data, rtol=1e-14)
    torch = pytest.importorskip("torch")
    tx, tw, tb = (torch.tensor(t.data, requires_grad=True) for t in (x, w, b))
    g = np.random.default_rng(4).standard_normal(y.shape)
    y.backward(mg.tensor(g, dtype=F64))
    torch.nn.functional.linear(tx, tw, tb).backward(torch.tensor(g))
    for ours, theirs in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(ours.grad.data, theirs.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_linear_shape_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"linear: input \(2, 3\) @ weight.T \(4, 5\): last dim 3 and "
                                         r"in_features 4 differ"):
        nn.Linear(4, 5)(mg.randn(2, 3))


def test_embedding_lookup_grad_and_range():
    mg.manual_seed(1)
    emb = nn.Embedding(6, 3, dtype=F64)
    assert abs(emb.weight.data.mean()) < 1.5  # N(0, 1)
    ids = np.array([[1, 4, 1], [0, 5, 1]])
    out = emb(mg.tensor(ids))
    np.testing.assert_array_equal(out.data, emb.weight.data[ids])
    out.sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.data[:, 0], [1, 3, 0, 0, 1, 1])  # scatter-add
    for bad in ([0, 6], [-1]):
        with pytest.raises(IndexError, match="outside"):
            emb(np.array(bad))
    assert gradcheck(lambda w: emb(ids), [emb.weight])


def test_embedding_padding_idx():
    emb = nn.Embedding(4, 2, padding_idx=0)
    assert not emb.weight.data[0].any()
    emb(np.array([0, 1, 0])).sum().backward()
    assert not emb.weight.grad.data[0].any() and emb.weight.grad.data[1].all()


def _layer_norm_ref(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _rms_norm_ref(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


@pytest.mark.parametrize("shape", [(3, 5), (2, 1, 7), (1, 4)])
def test_norms_forward_and_gradcheck(shape):
    x = _t(shape, 5)
    ln = nn.LayerNorm(shape[-1], eps=1e-5, dtype=F64)
    rms = nn.RMSNorm(shape[-1], eps=1e-5, dtype=F64)
    rng = np.random.default_rng(6)
    for p in (ln.weight, ln.bias, rms.weight):
        p.data[...] = rng.standard_normal(p.shape)
    np.testing.assert_allclose(ln(x).data, _layer_norm_ref(x.data, ln.weight.data, ln.bias.data, 1e-5),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(rms(x).data, _rms_norm_ref(x.data, rms.weight.data, 1e-5), rtol=1e-12)
    assert gradcheck(lambda x, w, b: ln(x), [x, ln.weight, ln.bias])
    assert max(gradcheck.last_errors) < 1e-6
    assert gradcheck(lambda x, w: rms(x), [x, rms.weight])
    assert max(gradcheck.last_errors) < 1e-6


def test_norms_match_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(7).standard_normal((2, 3, 8)).astype(np.float32)
    ours_ln, theirs_ln = nn.LayerNorm(8), torch.nn.LayerNorm(8)
    np.testing.assert_allclose(ours_ln(mg.tensor(x)).data, theirs_ln(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    ours_rms, theirs_rms = nn.RMSNorm(8), torch.nn.RMSNorm(8, eps=1e-5)
    np.testing.assert_allclose(ours_rms(mg.tensor(x)).data, theirs_rms(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_norm_options_and_errors():
    assert [n for n, _ in nn.LayerNorm(4, elementwise_affine=False).named_parameters()] == []
    assert [n for n, _ in nn.LayerNorm(4, bias=False).named_parameters()] == ["weight"]
    with pytest.raises(ValueError, match=r"RMSNorm: expected input \(\.\.\., 4\), got shape \(2, 3\)"):
        nn.RMSNorm(4)(mg.randn(2, 3))


def test_dropout():
    x = mg.ones(200, 100, requires_grad=True)
    drop = nn.Dropout(0.25, generator=np.random.default_rng(0))
    y = drop(x)
    kept = y.data != 0
    assert kept.mean() == pytest.approx(0.75, abs=0.01)
    np.testing.assert_allclose(y.data[kept], 1 / 0.75, rtol=1e-6)           # inverted scaling
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, y.data)                      # grad = mask / (1 - p)
    # seeded through minigrad.manual_seed when no generator is given
    mg.manual_seed(3)
    a = nn.Dropout(0.5)(mg.ones(50))
    mg.manual_seed(3)
    np.testing.assert_array_equal(nn.Dropout(0.5)(mg.ones(50)).data, a.data)
    assert nn.Dropout(0.5).eval()(x) is x
    assert nn.Dropout(0.0)(x) is x
    assert not nn.Dropout(1.0)(x).data.any()
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
        nn.Dropout(1.5)


def test_containers():
    layers = [nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)]
    seq = nn.Sequential(*layers)
    assert len(seq) == 3 and seq[-1] is layers[2] and list(seq) == layers
    assert isinstance(seq[:2], nn.Sequential) and len(seq[:2]) == 2
    x = mg.randn(4, 2)
    np.testing.assert_array_equal(seq(x).data, layers[2](layers[1](layers[0](x))).data)
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml.append(nn.Linear(1, 2)).extend([nn.Linear(2, 2)])
    ml.insert(0, nn.Identity())
    assert [type(m).__name__ for m in ml] == ["Identity", "Linear", "Linear", "Linear"]
    assert [n for n, _ in ml.named_parameters()][:2] == ["1.weight", "1.bias"]
    with pytest.raises(IndexError, match="out of range"):
        ml[4]
    md = nn.ModuleDict({"a": nn.Linear(1, 1)})
    assert "a" in md and [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias"]


def test_trunc_normal_far_in_a_tail_and_bad_bounds():
    # audit: rejection sampling never finished for [a, b] far from the mean (a=8, b=9 hung)
    t = mg.zeros(2000)
    nn.init.trunc_normal_(t, 0.0, 1.0, a=8.0, b=9.0, generator=np.random.default_rng(0))
    assert 8.0 <= t.data.min() and t.data.max() <= 9.0 and t.data.mean() < 8.2   # piled near a
    nn.init.trunc_normal_(t, 0.0, 1.0, a=-0.5, b=0.5, generator=np.random.default_rng(0))
    assert abs(t.data.std() - 0.2835) < 0.01          # torch's std of N(0, 1) truncated to [-0.5, 0.5]
    assert np.all(nn.init.trunc_normal_(t, 3.0, 0.0, a=-1.0, b=1.0).data == 1.0)
    for bad in (dict(a=1.0, b=0.0), dict(std=-1.0), dict(mean=float("nan"))):
        with pytest.raises(ValueError, match="trunc_normal_"):
            nn.init.trunc_normal_(t, **bad)


def test_module_api_extras_match_torch():
    # audit: train("no") was accepted; get_submodule / get_parameter, Parameter(requires_grad=False),
    # LayerNorm((C,)) and the conv gains were missing
    m = nn.Module()
    m.block = nn.Module()
    m.block.lin = nn.Linear(2, 3)
    assert m.get_submodule("block.lin") is m.block.lin and m.get_submodule("") is m
    assert m.get_parameter("block.lin.bias") is m.block.lin.bias
    with pytest.raises(AttributeError, match="no submodule 'nope'"):
        m.get_submodule("block.nope")
    with pytest.raises(AttributeError, match="no parameter 'nope'"):
        m.get_parameter("block.lin.nope")
    with pytest.raises(ValueError, match="mode must be a bool"):
        m.train("no")
    assert not nn.Parameter(np.zeros(2, np.float32), requires_grad=False).requires_grad
    assert nn.LayerNorm((8,)).dim == 8 and nn.RMSNorm([4]).dim == 4
    assert nn.LayerNorm((2, 8)).weight.shape == (2, 8)      # multi-dim: tests/test_torch_api_gaps.py
    assert nn.init.calculate_gain("conv3d") == nn.init.calculate_gain("conv_transpose2d") == 1.0


def test_shared_submodule_is_saved_under_every_name_as_in_torch():
    # audit: a module registered under two names appeared in state_dict under its first name only,
    # so a torch checkpoint of such a model did not load with strict=True
    torch = pytest.importorskip("torch")
    m = nn.Module()
    m.enc = nn.Linear(2, 2)
    m.alias = m.enc
    t = torch.nn.Module()
    t.enc = torch.nn.Linear(2, 2)
    t.alias = t.enc
    assert list(m.state_dict()) == list(t.state_dict())
    m.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    np.testing.assert_array_equal(m.enc.weight.data, t.enc.weight.detach().numpy())
    assert len(list(m.parameters())) == 2
    assert [n for n, _ in m.named_parameters(remove_duplicate=False)] == \
        [n for n, _ in t.named_parameters(remove_duplicate=False)]


def test_container_list_and_dict_operations_match_torch():
    # audit: del / pop / insert / extend / + / update were missing or raised AttributeError
    lins = [nn.Linear(1, i + 1) for i in range(4)]
    s = nn.Sequential(*lins[:3])
    del s[1]
    assert list(s._modules) == ["0", "1"] and s[1] is lins[2]
    s.insert(1, lins[1])
    s[2] = lins[3]
    assert [m.out_features for m in s] == [1, 2, 4]
    assert s.pop() is lins[3] and len(s) == 2
    s.extend([lins[2]])
    del s[:2]
    assert list(s) == [lins[2]]
    both = nn.ModuleList(lins[:2]) + nn.ModuleList(lins[2:])
    assert isinstance(both, nn.ModuleList) and list(both) == lins
    del both[-1]
    assert list(both._modules) == ["0", "1", "2"]
    d = nn.ModuleDict({"a": lins[0]})
    d.update({"b": lins[1]})
    d.update([("c", lins[2])])
    del d["a"]
    assert d.pop("b") is lins[1] and list(d.keys()) == ["c"]
    d.clear()
    assert len(d) == 0


def test_init_helpers():
    t = mg.zeros(64, 32)
    nn.init.xavier_uniform_(t, generator=np.random.default_rng(0))
    assert np.abs(t.data).max() <= math.sqrt(6 / 96)
    nn.init.trunc_normal_(t, std=1.0, a=-0.5, b=0.5, generator=np.random.default_rng(0))
    assert np.abs(t.data).max() <= 0.5
    assert nn.init.ones_(t).data.all()
    with pytest.raises(ValueError, match=">= 2 dims"):
        nn.init.kaiming_uniform_(mg.zeros(3))


# ---- clip_grad_norm_ ------------------------------------------------------------------------------
def _with_grads(*grads):
    params = []
    for g in grads:
        p = nn.Parameter(np.zeros(np.shape(g), dtype=np.float64))
        p.grad = mg.tensor(np.array(g, dtype=np.float64))
        params.append(p)
    return params


def test_clip_grad_norm_by_hand():
    params = _with_grads([3.0, 0.0], [[4.0]])             # total norm 5
    total = nn.utils.clip_grad_norm_(params, max_norm=1.0)
    assert total.item() == 5.0
    coef = 1.0 / (5.0 + 1e-6)
    np.testing.assert_allclose(params[0].grad.data, [3 * coef, 0.0], rtol=1e-15)
    np.testing.assert_allclose(params[1].grad.data, [[4 * coef]], rtol=1e-15)
    params = _with_grads([3.0, 0.0], [[4.0]])
    assert nn.utils.clip_grad_norm_(params, max_norm=10.0).item() == 5.0    # under the limit: unchanged
    np.testing.assert_array_equal(params[0].grad.data, [3.0, 0.0])
    params = _with_grads([3.0, -7.0], [[4.0]])
    assert nn.utils.clip_grad_norm_(params, 1.0, norm_type=math.inf).item() == 7.0


def test_clip_grad_norm_non_finite():
    params = _with_grads([1.0, np.inf])
    with pytest.raises(RuntimeError, match="total norm of order 2.0 of the gradients is inf"):
        nn.utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    assert np.isinf(params[0].grad.data[1])               # untouched when raising
    total = nn.utils.clip_grad_norm_(_with_grads([1.0, np.nan]), 1.0)
    assert math.isnan(total.item())


def test_clip_grad_norm_inf_sees_a_nan_in_any_grad():
    # audit: Python's max() skipped a NaN that was not in the first grad, so norm_type=inf returned a
    # finite norm, error_if_nonfinite did not raise and the NaN reached the optimizer
    params = _with_grads([1.0, -2.0], [np.nan, 0.5])
    with pytest.raises(RuntimeError, match="of order inf of the gradients is nan"):
        nn.utils.clip_grad_norm_(params, 1.0, norm_type=math.inf, error_if_nonfinite=True)
    assert math.isnan(nn.utils.clip_grad_norm_(params, 1.0, norm_type=math.inf).item())


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    grads = [rng.standard_normal(s) for s in [(5, 4), (4,), (3, 3, 2)]]
    ours = _with_grads(*grads)
    theirs = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for t, g in zip(theirs, grads):
        t.grad = torch.tensor(g)
    for norm_type in (2.0, 1.0, math.inf, -math.inf, 0.0, 3.0):
        a = nn.utils.clip_grad_norm_(ours, 0.5, norm_type=norm_type)
        b = torch.nn.utils.clip_grad_norm_(theirs, 0.5, norm_type=norm_type)
        assert a.item() == pytest.approx(b.item(), rel=1e-12)
        for p, t in zip(ours, theirs):
            np.testing.assert_allclose(p.grad.data, t.grad.numpy(), rtol=1e-12)


# ---- training -------------------------------------------------------------------------------------
@pytest.mark.parametrize("make_opt", [lambda ps: optim.AdamW(ps, lr=3e-2, weight_decay=1e-4),
                                      lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True)],
                         ids=["adamw", "sgd-nesterov"])
def test_tiny_mlp_learns(make_opt):
    mg.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (128, 2)).astype(np.float32)
    y = (np.sin(3 * x[:, :1]) * x[:, 1:]).astype(np.float32)
    model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = make_opt(list(model.parameters()))
    xt, yt = mg.tensor(x), mg.tensor(y)
    baseline = float(np.mean((y - y.mean()) ** 2))
    for _ in range(300):
        loss = ((model(xt) - yt) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    assert loss.item() < 0.05 * baseline, (loss.item(), baseline)


def test_optimizer_step_invalidates_graphs_that_saved_the_old_weights():
    m = nn.Linear(2, 2)
    opt = optim.SGD(m.parameters(), lr=0.1)
    loss = m(mg.randn(3, 2)).sum()
    loss.backward(retain_graph=True)
    opt.step()
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


def test_linear_bias_grad_of_float32_sums_in_float64():
    # gy = 2^24 in row 0, ones below: summed one row at a time in float32 every +1 rounds away
    gy = np.ones((1001, 2), np.float32)
    gy[0] = 2.0 ** 24
    x = mg.tensor(np.zeros((1001, 3), np.float32))
    w = mg.tensor(np.zeros((2, 3), np.float32), requires_grad=True)
    b = mg.tensor(np.zeros(2, np.float32), requires_grad=True)
    linear(x, w, b).backward(mg.tensor(gy))
    assert b.grad.dtype == mg.float32
    np.testing.assert_array_equal(b.grad.data, 2.0 ** 24 + 1000)
