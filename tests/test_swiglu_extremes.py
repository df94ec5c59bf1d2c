"""F.swiglu / swiglu_packed (silu(gate) * up) at extreme finite inputs, float32 and float64: the
forward and both gradients, as exact values where sigmoid(gate) is exactly 0, 1/2 or 1 (no torch
needed) and against PyTorch's silu(gate) * up where torch is installed.

Regression: gup was (gout * gate) * sigmoid(gate). With gate = -3e38, gout = -2.5 (float32) or
gate = -1e308 (float64), gout * gate overflowed to inf while sigmoid(gate) is exactly 0, and inf * 0
gave NaN where the answer is gout * silu(gate) = -2.5 * -0 = +0."""
import itertools

import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F
from minigrad.ops.swiglu import swiglu_packed

F32, F64 = np.float32, np.float64
GATES = {F32: (-3e38, -1e30, -100.0, -88.8, -87.0, 0.0, 87.0, 88.8, 100.0, 1e30, 3e38),
         F64: (-1e308, -1e30, -800.0, -745.2, -709.8, -700.0, -100.0, -87.0, 0.0, 87.0, 100.0, 700.0,
               709.8, 745.2, 800.0, 1e30, 1e308)}
UPS = {F32: (-3e38, -1.0, 0.0, 1.0, 3e38), F64: (-1e308, -1.0, 0.0, 1.0, 1e308)}
GOUTS = (1.0, -2.5)
# gates where sigmoid is exactly 0 / exactly 1 in the dtype (e^-gate overflows / 1 + e^-gate rounds to 1)
SAT_LO = {F32: (-3e38, -1e30, -100.0, -88.8), F64: (-1e308, -1e30, -800.0, -745.2)}
SAT_HI = {F32: (88.8, 100.0, 1e30, 3e38), F64: (745.2, 800.0, 1e30, 1e308)}
# a cotangent whose product with a moderate saturated gate (-100 * -1e37, -800 * -1e306) overflows too
BIG_GOUT = {F32: -1e37, F64: -1e306}
PACKED = [pytest.param(False, id="swiglu"), pytest.param(True, id="packed")]


def _grid(dtype, gates, gouts):
    g, u, go = np.array(list(itertools.product(gates, UPS[dtype], gouts)), np.float64).T
    return g.astype(dtype), u.astype(dtype), go.astype(dtype)


def _ours(g, u, go, packed):
    """(h, ggate, gup) of minigrad's fused kernel for 1-D g, u, go."""
    if packed:
        h = mg.tensor(np.stack([g, u], axis=1), requires_grad=True)
        out = swiglu_packed(h)
        out.backward(mg.tensor(go.reshape(-1, 1)))
        return out.data.ravel(), h.grad.data[:, 0], h.grad.data[:, 1]
    gt, ut = mg.tensor(g, requires_grad=True), mg.tensor(u, requires_grad=True)
    out = F.swiglu(gt, ut)
    out.backward(mg.tensor(go))
    return out.data, gt.grad.data, ut.grad.data


def _assert_same(name, got, want, dtype, g, u, go):
    """NaN where want is NaN, the same infinities, the same sign on zeros, close elsewhere."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == dtype, (name, got.dtype)
    rtol, tiny = (1e-5, 1e-37) if dtype == F32 else (1e-12, 1e-300)
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.isnan(got) == np.isnan(want)
        inf = np.isinf(got) | np.isinf(want)
        ok &= np.isnan(want) | ~inf | (got == want)
        fin = ~np.isnan(want) & ~inf
        ok &= ~fin | (np.abs(got.astype(F64) - want) <= rtol * np.abs(want.astype(F64)) + tiny)
        ok &= ~(fin & (want == 0)) | (np.signbit(got) == np.signbit(want))
    bad = [f"gate={g[i]:g} up={u[i]:g} gout={go[i]:g}: {got[i]!r} want {want[i]!r}"
           for i in np.flatnonzero(~ok)]
    assert not bad, f"{name}, {np.dtype(dtype).name}: {len(bad)} mismatches\n" + "\n".join(bad[:20])


@pytest.mark.parametrize("packed", PACKED)
@pytest.mark.parametrize("dtype", [F32, F64], ids=["fp32", "fp64"])
def test_swiglu_saturated_gate_exact(dtype, packed):
    """sigmoid(gate) exactly 0, 1/2 or 1: every output follows from silu = -0 / 0 / gate."""
    gouts = GOUTS + (BIG_GOUT[dtype],)
    g, u, go = _grid(dtype, SAT_LO[dtype] + (0.0,) + SAT_HI[dtype], gouts)
    s = np.where(g < 0, 0.0, np.where(g > 0, 1.0, 0.5)).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        silu = np.where(g < 0, np.copysign(dtype(0), g), np.where(g > 0, g, 0.0)).astype(dtype)
        want_h = silu * u
        want_gup = go * silu
        want_gg = go * u * s * np.where(g < 0, 1 + g, 1).astype(dtype)   # 1 + g (1 - s)
    h, gg, gup = _ours(g, u, go, packed)
    assert not np.isnan(h).any() and not np.isnan(gup).any()       # silu(gate) and gout finite
    neg = g < 0
    assert np.all(gup[neg] == 0) and np.all(np.signbit(gup[neg]) == (go[neg] > 0))   # the old NaN
    for name, got, want in (("h", h, want_h), ("ggate", gg, want_gg), ("gup", gup, want_gup)):
        _assert_same(name, got, want, dtype, g, u, go)


@pytest.mark.parametrize("packed", PACKED)
@pytest.mark.parametrize("dtype", [F32, F64], ids=["fp32", "fp64"])
def test_swiglu_extremes_match_torch(dtype, packed):
    """torch.nn.functional.silu(gate) * up, forward and both autograd gradients, over the whole grid
    (including where torch gives inf, or NaN from inf * 0 in ggate)."""
    torch = pytest.importorskip("torch")
    g, u, go = _grid(dtype, GATES[dtype], GOUTS + (BIG_GOUT[dtype],))
    tg, tu = torch.tensor(g, requires_grad=True), torch.tensor(u, requires_grad=True)
    out = torch.nn.functional.silu(tg) * tu
    out.backward(torch.tensor(go))
    ours = _ours(g, u, go, packed)
    for name, got, want in zip(("h", "ggate", "gup"), ours, (out.detach(), tg.grad, tu.grad)):
        _assert_same(name, got, want.numpy(), dtype, g, u, go)


def test_swiglu_fp32_denormal_sigmoid_window():
    # regression: mg_expf (kernels/_vmath.h) returned inf for x in [88.38, 88.72], where expf is
    # finite (2^128 in the exponent bits), so float32 sigmoid(gate) was 0 there instead of ~4e-39
    g = np.array([-88.5], F32)
    u = np.array([3e38], F32)
    want = -88.5 / (1.0 + np.exp(88.5)) * 3e38          # float64: -97.5
    h = F.swiglu(mg.tensor(g), mg.tensor(u)).data
    np.testing.assert_allclose(h, [want], rtol=1e-3)
