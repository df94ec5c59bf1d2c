"""Models composed from minigrad's primitive Tensor ops and nn modules (not the fused GPT/RWKV kernels)
against the same models written in PyTorch, fp64, identical weights copied across: the forward
output, the loss, every parameter gradient and the input gradient, then AdamW steps (weights after
each step). Individual-op tests can miss interactions (tied weights, ignored CE rows, views fed to
matmul, unrolled recurrences, detach across segments); these run the ops together."""
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as MF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = 1e-11   # measured worst: ~2e-14 (a weight after 3 AdamW steps), ~7e-15 (a gradient)


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape
    den = np.max(np.abs(b)) if b.size else 0.0
    return float(np.max(np.abs(a - b)) / (den if den > 0 else 1.0)) if a.size else 0.0


def _copy_torch_to_minigrad(mm, tm, seed=1):
    """Perturb torch's init (so LayerNorm weights etc. are not 1/0) and copy every parameter by name."""
    rng = np.random.default_rng(seed)
    mp, tp = dict(mm.named_parameters()), dict(tm.named_parameters())
    assert list(mp) == list(tp)
    for name, p in tp.items():
        with torch.no_grad():
            p.add_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * 0.1))
        with mg.no_grad():
            mp[name].data[...] = p.detach().numpy()


def _check_training(mm, tm, mg_fwd, t_fwd, mg_x, t_x, steps=3):
    """mg_fwd()/t_fwd() -> (outputs tuple, loss); compare everything, then AdamW `steps` times."""
    mp, tp = dict(mm.named_parameters()), dict(tm.named_parameters())
    mopt = mg.optim.AdamW(list(mp.values()), lr=1e-2, weight_decay=0.1)
    topt = torch.optim.AdamW(list(tp.values()), lr=1e-2, weight_decay=0.1, foreach=False)
    for step in range(steps + 1):
        mg_x.grad = t_x.grad = None
        mopt.zero_grad()
        topt.zero_grad()
        mo, ml = mg_fwd()
        to, tl = t_fwd()
        ml.backward()
        tl.backward()
        for a, b in zip(mo, to):
            assert _rel(a.data, b.detach().numpy()) < TOL, f"forward output, step {step}"
        assert _rel(ml.data, tl.detach().numpy()) < TOL, f"loss, step {step}"
        for n in tp:
            assert tp[n].grad is not None and mp[n].grad is not None, n
            err = _rel(mp[n].grad.data, tp[n].grad.numpy())
            assert err < TOL, f"grad of {n}, step {step}: rel err {err:.3e}"
        err = _rel(mg_x.grad.data, t_x.grad.numpy())
        assert err < TOL, f"input grad, step {step}: rel err {err:.3e}"
        if step == steps:
            break
        mopt.step()
        topt.step()
        for n in tp:
            err = _rel(mp[n].data, tp[n].detach().numpy())
            assert err < TOL, f"{n} after AdamW step {step + 1}: rel err {err:.3e}"


# ---------------------------------------------------------------- 1. MLP classifier, CE ignore_index

def _mlp(lib, d, h, c, approximate, p):
    nn = lib.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(d, h)
            self.act = nn.GELU(approximate=approximate)
            self.ln = nn.LayerNorm(h)
            self.drop = nn.Dropout(p)
            self.fc2 = nn.Linear(h, h)
            self.ln2 = nn.LayerNorm([h])
            self.head = nn.Sequential(nn.Tanh(), nn.Linear(h, c))

        def forward(self, x):
            z = self.drop(self.ln(self.act(self.fc1(x))))
            z = z + self.drop(self.act(self.fc2(z)))
            return self.head(self.ln2(z))
    return MLP()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("approximate,p,eval_mode", [("none", 0.0, False), ("tanh", 0.5, True)])
def test_mlp_classifier_cross_entropy_ignore_index_matches_torch(reduction, approximate, p, eval_mode):
    D, H, C, B, T = 7, 16, 5, 4, 3
    torch.manual_seed(0)
    tm = _mlp(torch, D, H, C, approximate, p).double()
    mm = _mlp(mg, D, H, C, approximate, p).double()
    _copy_torch_to_minigrad(mm, tm)
    if eval_mode:
        tm.eval()
        mm.eval()
    rng = np.random.default_rng(2)
    xn = rng.standard_normal((B, T, D))
    yn = rng.integers(0, C, size=(B * T,))
    yn[[1, 5]] = -100
    w = np.linspace(0.5, 1.5, B * T)
    xt, xm = torch.tensor(xn, requires_grad=True), mg.tensor(xn, requires_grad=True)

    def fwd(model, x, y, F, lib):
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, C), y, ignore_index=-100, reduction=reduction)
        if reduction == "none":
            assert tuple(loss.shape) == (B * T,)
            loss = (loss * lib.tensor(w)).sum()
        return (out,), loss

    _check_training(mm, tm, lambda: fwd(mm, xm, mg.tensor(yn), MF, mg),
                    lambda: fwd(tm, xt, torch.tensor(yn), TF, torch), xm, xt)


# ---------------------------------------------- 2. causal self-attention from primitives, tied weights

V, D, NH, T, B = 11, 16, 4, 6, 3


def _tiny_gpt(lib):
    nn = lib.nn
    hd = D // NH

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(D)
            self.q = nn.Linear(D, D)
            self.k = nn.Linear(D, D, bias=False)
            self.v = nn.Linear(D, D)
            self.o = nn.Linear(D, D)
            self.ln2 = nn.LayerNorm(D)
            self.ff = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

        def forward(self, x, mask):
            b, t, _ = x.shape
            h = self.ln1(x)
            q = self.q(h).reshape(b, t, NH, hd).transpose(1, 2)
            k = self.k(h).view(b, t, NH, hd).permute(0, 2, 1, 3)
            v = self.v(h).reshape(b, t, NH, hd).transpose(1, 2)
            att = (q @ k.transpose(-2, -1) * (1.0 / math.sqrt(hd))).masked_fill(mask, float("-inf"))
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, D)
            x = x + self.o(y)
            return x + self.ff(self.ln2(x))

    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, D)
            self.wpe = nn.Parameter(lib.zeros(T, D))
            self.blocks = nn.ModuleList([Block() for _ in range(2)])
            self.lnf = nn.LayerNorm(D)
            self.lm_head = nn.Linear(D, V, bias=False)
            self.lm_head.weight = self.wte.weight        # weight tying

        def forward(self, idx, extra):
            t = idx.shape[1]
            x = self.wte(idx) + self.wpe[:t] + extra
            mask = lib.tensor(np.triu(np.ones((t, t), dtype=bool), k=1))
            for blk in self.blocks:
                x = blk(x, mask)
            return self.lm_head(self.lnf(x))
    return TinyGPT()


def test_primitive_causal_transformer_with_tied_weights_matches_torch():
    torch.manual_seed(0)
    tm = _tiny_gpt(torch).double()
    mm = _tiny_gpt(mg).double()
    _copy_torch_to_minigrad(mm, tm)
    assert mm.lm_head.weight is mm.wte.weight
    rng = np.random.default_rng(2)
    idx = rng.integers(0, V, size=(B, T))
    idx[0, :3] = 4                       # repeated ids: the embedding backward accumulates
    tgt = np.roll(idx, -1, axis=1)
    tgt[:, -1] = -100
    en = rng.standard_normal((B, T, D)) * 0.1
    et, em = torch.tensor(en, requires_grad=True), mg.tensor(en, requires_grad=True)

    def mf():
        out = mm(mg.tensor(idx), em)
        return (out,), MF.cross_entropy(out.reshape(-1, V), mg.tensor(tgt.reshape(-1)))

    def tf():
        out = tm(torch.tensor(idx), et)
        return (out,), TF.cross_entropy(out.reshape(-1, V), torch.tensor(tgt.reshape(-1)))

    _check_training(mm, tm, mf, tf, em, et)


# ------------------------------------------------------ 3. unrolled GRU, truncated BPTT with detach

I_, H_, T_, B_, O_ = 5, 8, 6, 3, 4


def _gru(lib):
    nn = lib.nn

    class GRU(nn.Module):
        def __init__(self):
            super().__init__()
            self.wx = nn.Linear(I_, 3 * H_)
            self.wh = nn.Linear(H_, 3 * H_, bias=False)
            self.bh = nn.Parameter(lib.zeros(3 * H_))
            self.h0 = nn.Parameter(lib.zeros(1, H_))
            self.out = nn.Linear(2 * H_, O_)

        def forward(self, xs, h=None):
            if h is None:
                h = self.h0.expand(xs.shape[1], H_)
            hs = []
            for t in range(xs.shape[0]):
                gx, gh = self.wx(xs[t]), self.wh(h) + self.bh
                r = (gx[:, :H_] + gh[:, :H_]).sigmoid()
                z = lib.sigmoid(gx[:, H_:2 * H_] + gh[:, H_:2 * H_])
                n = (gx[:, 2 * H_:] + r * gh[:, 2 * H_:]).tanh()
                h = (1 - z) * n + z * h
                hs.append(h)
            hseq = lib.stack(hs, dim=1)
            feat = lib.cat([hseq.mean(1), hseq[:, -1, :]], dim=-1)
            return self.out(feat), hseq, h
    return GRU()


@pytest.mark.parametrize("tbptt", [False, True])
def test_unrolled_gru_and_truncated_bptt_match_torch(tbptt):
    torch.manual_seed(0)
    tm = _gru(torch).double()
    mm = _gru(mg).double()
    _copy_torch_to_minigrad(mm, tm)
    rng = np.random.default_rng(2)
    xn = rng.standard_normal((2 * T_, B_, I_))
    yn = rng.standard_normal((B_, O_))
    xt, xm = torch.tensor(xn, requires_grad=True), mg.tensor(xn, requires_grad=True)

    def fwd(m, x, y):
        if not tbptt:
            o, hseq, _ = m(x)
            return (o, hseq), ((o - y) ** 2).mean() + (hseq[:, ::2, 1::3] ** 2).sum() * 0.01
        o1, _, h = m(x[:T_])
        o2, hs2, _ = m(x[T_:], h.detach())   # no gradient from segment 2 into segment 1
        loss = ((o1 - y) ** 2).mean() + ((o2 - y) ** 2).mean() + (hs2[:, 1:5:2, :] ** 2).sum() * 0.01
        return (o1, o2, hs2), loss

    _check_training(mm, tm, lambda: fwd(mm, xm, mg.tensor(yn)), lambda: fwd(tm, xt, torch.tensor(yn)),
                    xm, xt)


def test_gradcheck_unrolled_gru_every_parameter_and_input():
    mg.manual_seed(0)
    mm = _gru(mg).double()
    with mg.no_grad():
        for p in mm.parameters():
            p.data[...] = np.random.default_rng(p.numel()).standard_normal(p.shape) * 0.5
    xs = mg.tensor(np.random.default_rng(3).standard_normal((3, 2, I_)), requires_grad=True)
    inputs = [xs] + list(mm.parameters())      # gradcheck perturbs each in place; fn reads them
    assert mg.autograd.gradcheck(lambda *_: mm(xs)[:2], inputs, rtol=1e-6)
