"""Regressions from an audit of minigrad.nn against the PyTorch APIs it is named after.

Each test pins a place where a ported PyTorch script used to get other numbers or an unclear error.
Known values where possible; torch only where the point is interoperability with it.
"""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn

F64 = np.float64


# ---- Module.train() goes through each child's train(), as torch ---------------------------------
class _AlwaysEvalDropout(nn.Module):
    """A block whose train() override keeps its dropout off (a common torch idiom)."""

    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def train(self, mode=True):
        super().train(mode)
        self.drop.train(False)
        return self


def test_train_honours_a_child_train_override():
    outer = nn.Sequential(nn.Linear(2, 2), _AlwaysEvalDropout())
    assert outer.train() is outer
    assert outer.training and outer[0].training and outer[1].training
    assert outer[1].drop.training is False          # was True: the override was bypassed
    x = mg.ones(4, 2)
    np.testing.assert_array_equal(outer[1].drop(x).data, x.data)
    outer.eval()
    assert not any(m.training for m in outer.modules())


def test_train_reaches_every_module_once_shared_or_not():
    shared = nn.Linear(1, 1)
    net = nn.ModuleDict({"a": shared, "b": nn.Sequential(shared, nn.Dropout(0.1))})
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train(True)
    assert all(m.training for m in net.modules())


# ---- Module.requires_grad_ takes torch's keyword -------------------------------------------------
def test_requires_grad_keyword_name():
    lin = nn.Linear(2, 3)
    assert lin.requires_grad_(requires_grad=False) is lin
    assert not any(p.requires_grad for p in lin.parameters())
    lin.requires_grad_()
    assert all(p.requires_grad for p in lin.parameters())


# ---- register_* must not silently replace another attribute --------------------------------------
def test_register_buffer_over_a_parameter_raises():
    lin = nn.Linear(2, 3)
    with pytest.raises(KeyError, match="attribute 'weight' already exists"):
        lin.register_buffer("weight", mg.zeros(3, 2))
    assert [n for n, _ in lin.named_parameters()] == ["weight", "bias"]   # still trainable
    assert list(lin.named_buffers()) == []


def test_register_parameter_or_module_over_other_attributes_raises():
    m = nn.Module()
    m.register_buffer("b", mg.zeros(2))
    m.plain = 3
    with pytest.raises(KeyError, match="attribute 'b' already exists"):
        m.register_parameter("b", nn.Parameter(np.zeros(2, np.float32)))
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        m.add_module("plain", nn.Identity())
    with pytest.raises(KeyError, match="attribute 'forward' already exists"):
        m.register_buffer("forward", mg.zeros(1))
    # re-registering under the same kind keeps working, and assignment still moves a name
    m.register_buffer("b", mg.ones(2))
    np.testing.assert_array_equal(m.b.data, [1, 1])
    m.b = nn.Parameter(np.zeros(2, np.float32))
    assert [n for n, _ in m.named_parameters()] == ["b"] and list(m.named_buffers()) == []


# ---- Module.to(device) ---------------------------------------------------------------------------
def test_module_to_cpu_is_a_no_op_and_other_devices_raise_clearly():
    lin = nn.Linear(2, 3)
    w = lin.weight.data.copy()
    assert lin.to("cpu") is lin and lin.weight.dtype == np.float32
    np.testing.assert_array_equal(lin.weight.data, w)
    lin.to("cpu", mg.float64)
    assert lin.weight.dtype == np.float64 and lin.bias.dtype == np.float64
    lin.to(device="cpu:0", dtype=np.float32)
    assert lin.weight.dtype == np.float32
    with pytest.raises(ValueError, match="CPU only, got device 'cuda'"):
        lin.to("cuda")
    with pytest.raises(TypeError, match="float32 or float64"):
        lin.to(np.int64)


def test_module_to_accepts_a_torch_device():
    torch = pytest.importorskip("torch")
    lin = nn.Linear(2, 3)
    assert lin.to(torch.device("cpu")) is lin
    with pytest.raises(ValueError, match="CPU only"):
        lin.to(torch.device("meta"))


# ---- containers ----------------------------------------------------------------------------------
def test_modulelist_iadd_extends_in_place():
    ml = nn.ModuleList([nn.Linear(1, 1)])
    alias = ml
    ml += [nn.ReLU()]
    ml += nn.ModuleList([nn.Tanh()])
    assert ml is alias and [type(m).__name__ for m in alias] == ["Linear", "ReLU", "Tanh"]
    assert list(alias._modules) == ["0", "1", "2"]
    seq = nn.Sequential(nn.ReLU())
    seq += nn.Sequential(nn.Tanh())
    assert len(seq) == 2


def test_sequential_insert_returns_self():
    seq = nn.Sequential(nn.ReLU())
    assert seq.insert(0, nn.Tanh()) is seq
    assert [type(m).__name__ for m in seq] == ["Tanh", "ReLU"]
    assert nn.ModuleList([nn.ReLU()]).insert(0, nn.Tanh()) is None       # as torch


# ---- load_state_dict takes a torch state dict -------------------------------------------------
def test_load_state_dict_of_torch_tensors():
    torch = pytest.importorskip("torch")
    ref = torch.nn.Linear(2, 3)
    lin = nn.Linear(2, 3)
    lin.load_state_dict(ref.state_dict())                  # torch tensors, read through .numpy()
    np.testing.assert_array_equal(lin.weight.data, ref.weight.detach().numpy())
    np.testing.assert_array_equal(lin.bias.data, ref.bias.detach().numpy())
    sd = {"weight": torch.zeros(3, 2, dtype=torch.bfloat16), "bias": torch.zeros(3)}
    with pytest.raises(RuntimeError, match=r"got torch\.Tensor of dtype torch\.bfloat16.*\.float\(\)"):
        lin.load_state_dict(sd)
    with pytest.raises(RuntimeError, match="dtype mismatch for weight"):   # no silent cast, as before
        lin.load_state_dict({"weight": torch.zeros(3, 2, dtype=torch.float64), "bias": torch.zeros(3)})


# ---- activations take torch's constructor arguments ----------------------------------------------
def test_gelu_approximate():
    x = mg.tensor(np.array([1.0, -2.0]), dtype=mg.float64)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in (1.0, -2.0)])
    c = math.sqrt(2 / math.pi)
    tanh = np.array([0.5 * v * (1 + math.tanh(c * (v + 0.044715 * v ** 3))) for v in (1.0, -2.0)])
    np.testing.assert_allclose(nn.GELU()(x).data, exact, rtol=1e-14)
    np.testing.assert_allclose(nn.GELU(approximate="tanh")(x).data, tanh, rtol=1e-14)
    assert abs(tanh[0] - exact[0]) > 1e-4                    # the two really differ
    assert repr(nn.GELU("tanh")) == "GELU(approximate='tanh')"
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        nn.GELU("fast")


def test_inplace_arguments():
    x = mg.tensor(np.array([-1.0, 2.0]))
    np.testing.assert_array_equal(nn.ReLU(inplace=False)(x).data, [0.0, 2.0])
    nn.SiLU(inplace=False)
    nn.Dropout(p=0.1, inplace=False)
    for make in (lambda: nn.ReLU(inplace=True), lambda: nn.SiLU(True), lambda: nn.Dropout(0.1, inplace=True)):
        with pytest.raises(ValueError, match="inplace=True is not supported"):
            make()
    with pytest.raises(TypeError, match="torch's `inplace` is a keyword argument here"):
        nn.Dropout(0.1, False)                       # torch's positional (p, inplace)
    nn.Dropout(0.1, np.random.default_rng(0))        # minigrad's positional generator still works


# ---- RMSNorm: torch's eps=None and elementwise_affine ----------------------------------------------
def test_rmsnorm_eps_none_is_the_dtype_epsilon():
    x = np.array([[1e-4, -1e-4, 3e-4, 0.0]])
    for dtype in (np.float32, np.float64):
        xd = x.astype(dtype)
        eps = np.finfo(dtype).eps
        want = xd / np.sqrt((xd.astype(F64) ** 2).mean(-1, keepdims=True) + eps)
        got = nn.RMSNorm(4, eps=None, dtype=dtype)(mg.tensor(xd)).data
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-13)
    # minigrad's own default is still 1e-5 (documented), which is far from the eps=None result here
    assert abs(nn.RMSNorm(4, dtype=F64)(mg.tensor(x)).data[0, 2] - 1.5) > 0.4
    assert repr(nn.RMSNorm(4, eps=None)) == "RMSNorm((4,), eps=None, elementwise_affine=True)"


def test_rmsnorm_without_affine():
    norm = nn.RMSNorm(3, elementwise_affine=False, dtype=F64)
    assert list(norm.parameters()) == [] and list(norm.state_dict()) == [] and norm.weight is None
    y = norm(mg.tensor(np.array([[3.0, 0.0, -3.0]]))).data
    np.testing.assert_allclose(y, [[3 / math.sqrt(6 + 1e-5), 0.0, -3 / math.sqrt(6 + 1e-5)]], rtol=1e-14)


def test_rmsnorm_matches_torch_defaults_with_eps_none():
    torch = pytest.importorskip("torch")
    x = (np.random.default_rng(0).standard_normal((3, 8)) * 1e-4).astype(np.float32)
    for affine in (True, False):
        ours = nn.RMSNorm(8, eps=None, elementwise_affine=affine)(mg.tensor(x)).data
        theirs = torch.nn.RMSNorm(8, elementwise_affine=affine)(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


# ---- optimizers take named_parameters() (torch >= 2.6) and refuse sets ----------------------------
def _quadratic_grads(params):
    for p in params:
        p.grad = mg.tensor(2 * p.data)       # d/dp sum(p^2)


def test_optimizer_accepts_named_parameters_with_identical_updates():
    from minigrad import optim

    mg.manual_seed(0)
    a = nn.Linear(3, 2, dtype=F64)
    b = nn.Linear(3, 2, dtype=F64)
    b.load_state_dict(a.state_dict())
    oa = optim.AdamW(a.named_parameters(), lr=0.1)
    ob = optim.AdamW(b.parameters(), lr=0.1)
    assert oa.param_groups[0]["param_names"] == ["weight", "bias"]
    assert oa.param_groups[0]["params"] == [a.weight, a.bias]
    for _ in range(3):
        _quadratic_grads(a.parameters())
        _quadratic_grads(b.parameters())
        oa.step()
        ob.step()
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    sd = oa.state_dict()
    assert sd["param_groups"][0]["param_names"] == ["weight", "bias"]
    oc = optim.AdamW(a.named_parameters(), lr=1.0)
    oc.load_state_dict(sd)
    assert oc.param_groups[0]["lr"] == 0.1


def test_optimizer_named_groups_are_all_or_none():
    from minigrad import optim

    lin = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="mixes"):
        optim.SGD([("weight", lin.weight), lin.bias])
    with pytest.raises(ValueError, match="with names .* or all without"):
        optim.SGD([{"params": [("weight", lin.weight)]}, {"params": [lin.bias]}])
    opt = optim.SGD([{"params": [("weight", lin.weight)], "lr": 0.5}, {"params": [("bias", lin.bias)]}],
                    lr=0.1)
    assert [g["param_names"] for g in opt.param_groups] == [["weight"], ["bias"]]


def test_optimizer_refuses_a_set_of_parameters_in_a_group():
    from minigrad import optim

    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="not a set"):
        optim.AdamW([{"params": set(lin.parameters())}])
    with pytest.raises(TypeError, match="not a set"):
        optim.SGD([lin.weight], lr=0.1).add_param_group({"params": {lin.bias}})


def test_clip_grad_accepts_foreach():
    p = nn.Parameter(np.zeros(4, F64))
    p.grad = mg.tensor(np.full(4, 1.5))
    norm = nn.utils.clip_grad_norm_([p], 1.0, foreach=True)
    assert float(norm.data) == 3.0
    np.testing.assert_allclose(p.grad.data, 1.5 / (3.0 + 1e-6))
    nn.utils.clip_grad_value_([p], 0.1, foreach=None)
    np.testing.assert_array_equal(p.grad.data, 0.1)
