"""The GPT's fused kernels: fp64 gradcheck over every input, the same maths composed from primitive
Tensor ops, fp32 vs fp64, PyTorch where installed, and the errors bad inputs raise."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F
from minigrad.autograd import gradcheck
from minigrad.kernels import attention as attention_kernels
from minigrad.ops import attention as attention_ops
from minigrad.ops.rope import rope_tables
from tests.op_helpers import record

RTOL = 1e-6


def leaf(a, requires_grad=True):
    return mg.tensor(np.asarray(a, np.float64), requires_grad=requires_grad)


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def check_grads(family, fn, *inputs, fast=False):
    assert gradcheck(fn, list(inputs), eps=1e-6, atol=1e-10, rtol=RTOL, fast=fast)
    record(family, gradcheck.last_errors)


def assert_fp32_matches_fp64(fn, *arrays, tol=2e-5):
    """fn(Tensors...) on fp32 copies vs fp64: forward and every input gradient."""
    results = []
    for dtype in (np.float32, np.float64):
        ts = [mg.tensor(a.astype(dtype), requires_grad=True) if a.dtype.kind == "f" else a for a in arrays]
        out = fn(*ts)
        (out * mg.tensor(randn(*out.shape, seed=9).astype(dtype))).sum().backward()
        results.append([out.data] + [t.grad.data for t in ts if isinstance(t, mg.Tensor)])
    for lo, hi in zip(*results):
        assert lo.dtype == np.float32 and hi.dtype == np.float64
        np.testing.assert_allclose(lo, hi, rtol=0, atol=tol * max(1.0, np.abs(hi).max()))


# ---------------------------------------------------------------- rms_norm
def rms_norm_composed(x, w, eps):
    return x * ((x * x).mean(axis=-1, keepdims=True) + eps).rsqrt() * w


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 5, 9), (2, 1, 33)])
def test_rms_norm_gradcheck_and_composed(shape):
    x, w = leaf(randn(*shape)), leaf(randn(shape[-1], seed=1))
    check_grads("gpt.rms_norm", lambda a, b: F.rms_norm(a, b, 1e-5), x, w)
    ours, ref = F.rms_norm(x, w, 1e-5), rms_norm_composed(x, w, 1e-5)
    np.testing.assert_allclose(ours.data, ref.data, rtol=1e-13, atol=1e-13)
    g = mg.tensor(randn(*shape, seed=3))
    ours = [t.grad.data.copy() for t in _backprop(ours, g, (x, w))]
    theirs = [t.grad.data.copy() for t in _backprop(ref, g, (x, w))]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_rms_norm_fp32_and_only_weight_grad():
    assert_fp32_matches_fp64(lambda a, b: F.rms_norm(a, b, 1e-5), randn(4, 6, 40), randn(40, seed=1))
    x, w = leaf(randn(3, 8), requires_grad=False), leaf(randn(8, seed=1))
    check_grads("gpt.rms_norm", lambda a, b: F.rms_norm(a, b, 1e-5), x, w)


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 5, 9), (2, 1, 33)])
def test_add_rms_norm_gradcheck_and_composed(shape):
    from minigrad.ops.rms_norm import add_rms_norm
    x, r, w = leaf(randn(*shape)), leaf(randn(*shape, seed=2)), leaf(randn(shape[-1], seed=1))
    both = lambda a, b, c: mg.cat([t.reshape(-1) for t in add_rms_norm(a, b, c, 1e-5)])
    check_grads("gpt.add_rms_norm", both, x, r, w)
    check_grads("gpt.add_rms_norm", lambda a, b, c: add_rms_norm(a, b, c, 1e-5)[1], x, r, w)
    s, y = add_rms_norm(x, r, w, 1e-5)
    ref_s = x + r
    ref_y = rms_norm_composed(ref_s, w, 1e-5)
    np.testing.assert_array_equal(s.data, x.data + r.data)
    np.testing.assert_allclose(y.data, ref_y.data, rtol=1e-13, atol=1e-13)
    cs, cy = mg.tensor(randn(*shape, seed=3)), mg.tensor(randn(*shape, seed=4))
    grads = []
    for outs in ((s, y), (ref_s, ref_y)):
        for t in (x, r, w):
            t.grad = None
        mg.autograd.backward(list(outs), [cs, cy])
        grads.append([t.grad.data.copy() for t in (x, r, w)])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_add_rms_norm_fp32_partial_grads_and_errors():
    from minigrad.ops.rms_norm import add_rms_norm
    both = lambda a, b, c: mg.cat([t.reshape(-1) for t in add_rms_norm(a, b, c, 1e-5)])
    assert_fp32_matches_fp64(both, randn(4, 6, 40), randn(4, 6, 40, seed=2), randn(40, seed=1))
    x, r, w = leaf(randn(3, 8), requires_grad=False), leaf(randn(3, 8, seed=2)), leaf(randn(8, seed=1))
    check_grads("gpt.add_rms_norm", lambda a, b: add_rms_norm(x, a, b)[1], r, w)
    w.requires_grad = False
    check_grads("gpt.add_rms_norm", lambda a: add_rms_norm(x, a, w)[1], r)
    with pytest.raises(ValueError, match="add_rms_norm: r has shape"):
        add_rms_norm(mg.randn(2, 4), mg.randn(2, 5), mg.ones(4))
    with pytest.raises(TypeError, match="mix float32 and float64"):
        add_rms_norm(mg.randn(2, 4), mg.randn(2, 4).double(), mg.ones(4))


def test_rms_norm_weight_grad_same_for_any_thread_count():
    """gw sums fixed row blocks in block order: bit-identical with 1, 2 or 3 threads."""
    from minigrad.ops.rms_norm import add_rms_norm
    from minigrad.threads import get_num_threads, set_num_threads
    x, r = randn(300, 24).astype(np.float32), randn(300, 24, seed=2).astype(np.float32)
    before, grads = get_num_threads(), []
    try:
        for n in (1, 2, 3):
            set_num_threads(n)
            w = mg.tensor(np.ones(24, np.float32), requires_grad=True)
            w2 = mg.tensor(np.ones(24, np.float32), requires_grad=True)
            (add_rms_norm(mg.tensor(x), mg.tensor(r), w)[1] ** 2).sum().backward()
            (F.rms_norm(mg.tensor(x), w2) ** 2).sum().backward()
            grads.append((w.grad.data, w2.grad.data))
    finally:
        set_num_threads(before)
    for g in grads[1:]:
        np.testing.assert_array_equal(g[0], grads[0][0])
        np.testing.assert_array_equal(g[1], grads[0][1])


# ---------------------------------------------------------------- rope
def rope_numpy(x, positions, base, interleaved):
    """x (B, H, T, hd) in fp64, written from the definition."""
    hd = x.shape[-1]
    ang = np.asarray(positions, np.float64)[:, None] * base ** (-np.arange(hd // 2) * 2.0 / hd)
    c, s = np.cos(ang), np.sin(ang)
    if interleaved:
        x0, x1 = x[..., 0::2], x[..., 1::2]
    else:
        x0, x1 = x[..., :hd // 2], x[..., hd // 2:]
    y0, y1 = x0 * c - x1 * s, x0 * s + x1 * c
    y = np.empty_like(x)
    if interleaved:
        y[..., 0::2], y[..., 1::2] = y0, y1
    else:
        y[..., :hd // 2], y[..., hd // 2:] = y0, y1
    return y


def rope_composed(x, positions, base, interleaved):
    """The same rotation from primitive Tensor ops (slices, products, cat)."""
    hd = x.shape[-1]
    ang = np.asarray(positions, np.float64)[:, None] * base ** (-np.arange(hd // 2) * 2.0 / hd)
    c, s = mg.tensor(np.cos(ang)), mg.tensor(np.sin(ang))
    if interleaved:
        pairs = x.reshape(*x.shape[:-1], hd // 2, 2)
        x0, x1 = pairs[..., 0], pairs[..., 1]
        y = mg.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)
        return y.reshape(x.shape)
    x0, x1 = x[..., :hd // 2], x[..., hd // 2:]
    return mg.cat([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("shape,offset", [((2, 3, 5, 6), 0), ((1, 2, 1, 4), 7), ((2, 1, 9, 10), 3)])
def test_rope_gradcheck_and_references(shape, offset, interleaved):
    x = leaf(randn(*shape))
    T = shape[2]
    pos = np.arange(offset, offset + T)
    fn = lambda a: F.rope(a, offset, 10000.0, interleaved)
    check_grads("gpt.rope", fn, x)
    want = rope_numpy(x.data, pos, 10000.0, interleaved)
    np.testing.assert_allclose(fn(x).data, want, rtol=0, atol=1e-13)
    np.testing.assert_allclose(rope_composed(x, pos, 10000.0, interleaved).data, want, atol=1e-13)
    # explicit positions and the (B, T, H, hd) layout give the same rotation
    np.testing.assert_allclose(F.rope(x, pos[::-1].copy(), 10000.0, interleaved).data,
                               rope_numpy(x.data, pos[::-1], 10000.0, interleaved), atol=1e-13)
    xt = leaf(np.ascontiguousarray(x.data.transpose(0, 2, 1, 3)))
    yt = F.rope(xt, offset, 10000.0, interleaved, layout="bthd")
    np.testing.assert_allclose(yt.data.transpose(0, 2, 1, 3), want, atol=1e-13)
    check_grads("gpt.rope", lambda a: F.rope(a, offset, 500.0, interleaved, layout="bthd"), xt)


def test_rope_fp32_tables_cached():
    assert_fp32_matches_fp64(lambda a: F.rope(a, 5), randn(2, 2, 7, 8))
    c1, _ = rope_tables(100, 8, 10000.0, np.float32)
    c2, _ = rope_tables(120, 8, 10000.0, np.float32)
    assert c1 is c2 and c1.dtype == np.float32 and c1.shape[0] >= 120
    assert rope_tables(100, 8, 10000.0, np.float64)[0] is not c1


def test_rope_torch_half_split():
    torch = pytest.importorskip("torch")
    x = randn(2, 3, 6, 8)
    hd = 8
    inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(4, 10, dtype=torch.float64)[:, None] * inv[None]
    emb = torch.cat([ang, ang], -1)                     # HF Llama: cat(freqs, freqs), rotate_half
    tx = torch.from_numpy(x)
    rot = torch.cat([-tx[..., hd // 2:], tx[..., :hd // 2]], -1)
    want = tx * emb.cos() + rot * emb.sin()
    np.testing.assert_allclose(F.rope(leaf(x), 4).data, want.numpy(), atol=1e-13)


# ---------------------------------------------------------------- causal attention
def attention_numpy(q, k, v, scale):
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, 1), np.repeat(v, g, 1)
    s = q @ k.swapaxes(-1, -2) * scale
    T = q.shape[2]
    s = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def attention_composed(q, k, v, scale):
    """Masked softmax attention from primitive Tensor ops (GQA by repeating kv heads)."""
    B, H, T, hd = q.shape
    Tk = k.shape[2]                       # Tk > T: query row i sits at position i + Tk - T
    g = H // k.shape[1]
    if g > 1:
        k = mg.stack([k] * g, dim=2).reshape(B, H, Tk, hd)
        v = mg.stack([v] * g, dim=2).reshape(B, H, Tk, hd)
    s = (q @ k.transpose(-1, -2)) * scale
    mask = mg.tensor(np.where(np.triu(np.ones((T, Tk), bool), 1 + Tk - T), -np.inf, 0.0))
    s = s + mask
    p = (s - s.max(axis=-1, keepdims=True).detach()).exp()
    return (p / p.sum(axis=-1, keepdims=True)) @ v


ATTN_SHAPES = [  # B, Hq, Hkv, T, hd
    (2, 4, 4, 5, 4), (2, 4, 2, 7, 6), (1, 3, 1, 1, 4), (3, 2, 1, 9, 3), (1, 2, 2, 70, 5),
]


@pytest.fixture(params=[(attention_kernels.BLOCK_ROWS, None, 16), (64, 256, 1), (4, 3, 1), (3, 8, 10 ** 9)],
                ids=["default-blocks", "blocks-64x256-keys-transposed", "blocks-4x3-keys-transposed",
                     "blocks-3x8-keys-as-stored"])
def driver(request):
    """Block sizes (query rows, keys): the defaults, and small ones so that tiny inputs cross many
    query and key blocks (the online-softmax rescaling, partial and fully masked key blocks); and
    the forward's two score paths (keys transposed first, or read as stored) on every shape."""
    old = attention_ops.BLOCK_ROWS, attention_ops.BLOCK_KEYS, attention_kernels.TRANSPOSE_MIN_ROWS
    rows, keys, attention_kernels.TRANSPOSE_MIN_ROWS = request.param
    attention_ops.BLOCK_ROWS, attention_ops.BLOCK_KEYS = rows, keys
    yield request.param
    attention_ops.BLOCK_ROWS, attention_ops.BLOCK_KEYS, attention_kernels.TRANSPOSE_MIN_ROWS = old


def test_block_keys_for_keeps_block_products_small():
    assert attention_kernels.block_keys_for(64, 64) == 192
    assert attention_kernels.block_keys_for(64, 32) == 256
    assert attention_kernels.block_keys_for(64, 128) == 64
    assert attention_kernels.block_keys_for(64, 100000) == 64
    assert attention_kernels.block_keys_for(32, 64) == 256
    assert attention_kernels.block_keys_for(32, 128) == 192
    for hd in (16, 32, 64, 80, 96, 128):
        keys = attention_kernels.block_keys_for(64, hd)
        assert keys % 64 == 0 and (keys == 64 or 64 * keys * hd <= attention_kernels.SMALL_GEMM_MNK)


@pytest.mark.parametrize("B,Hq,Hkv,T,hd", ATTN_SHAPES)
def test_attention_gradcheck_and_references(driver, B, Hq, Hkv, T, hd):
    q = leaf(randn(B, Hq, T, hd))
    k, v = leaf(randn(B, Hkv, T, hd, seed=1)), leaf(randn(B, Hkv, T, hd, seed=2))
    fn = lambda a, b, c: F.causal_attention(a, b, c)
    if T <= 9:
        check_grads("gpt.causal_attention", fn, q, k, v)
    else:
        check_grads("gpt.causal_attention", fn, q, k, v, fast=True)
    out = fn(q, k, v)
    np.testing.assert_allclose(out.data, attention_numpy(q.data, k.data, v.data, hd ** -0.5), atol=1e-13)
    ref = attention_composed(q, k, v, hd ** -0.5)
    np.testing.assert_allclose(out.data, ref.data, atol=1e-13)
    g = mg.tensor(randn(*out.shape, seed=5))
    ours = [t.grad.data.copy() for t in _backprop(out, g, (q, k, v))]
    theirs = [t.grad.data.copy() for t in _backprop(ref, g, (q, k, v))]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, atol=1e-12)


def _backprop(out, g, leaves):
    for t in leaves:
        t.grad = None
    (out * g).sum().backward()
    return leaves


def test_attention_bthd_layout_and_scale(driver):
    q, k, v = randn(2, 6, 4, 8), randn(2, 6, 2, 8, seed=1), randn(2, 6, 2, 8, seed=2)
    tr = lambda a: np.ascontiguousarray(a.transpose(0, 2, 1, 3))
    want = attention_numpy(tr(q), tr(k), tr(v), 0.7)
    out = F.causal_attention(leaf(q), leaf(k), leaf(v), scale=0.7, layout="bthd")
    np.testing.assert_allclose(tr(out.data), want, atol=1e-13)
    check_grads("gpt.causal_attention", lambda a, b, c: F.causal_attention(a, b, c, 0.7, "bthd"),
                leaf(q), leaf(k), leaf(v))


@pytest.mark.parametrize("layout,out_layout", [("bhtd", "bthd"), ("bthd", "bhtd")])
def test_attention_output_layout_differs_from_input(driver, layout, out_layout):
    q, k, v = randn(2, 4, 19, 8), randn(2, 2, 19, 8, seed=1), randn(2, 2, 19, 8, seed=2)   # bhtd
    tr = lambda a: np.ascontiguousarray(a.transpose(0, 2, 1, 3))
    ins = (q, k, v) if layout == "bhtd" else (tr(q), tr(k), tr(v))
    want = attention_numpy(q, k, v, 0.5)
    out = F.causal_attention(*(leaf(a) for a in ins), scale=0.5, layout=layout, out_layout=out_layout)
    assert out.data.flags.c_contiguous
    np.testing.assert_allclose(out.data if out_layout == "bhtd" else tr(out.data), want, atol=1e-13)
    check_grads("gpt.causal_attention",
                lambda a, b, c: F.causal_attention(a, b, c, 0.5, layout, out_layout), *(leaf(a) for a in ins))
    with pytest.raises(ValueError, match="out_layout"):
        F.causal_attention(*(leaf(a) for a in ins), layout=layout, out_layout="tbhd")


# T, hd: the float32 kernels transpose keys / values in 16 x 16 register tiles (mg_transpose_f)
# with ragged rows (T % 16) and columns (hd % 16) copied one by one; (bthd: row stride > hd)
@pytest.mark.parametrize("T,hd", [(33, 16), (16, 24), (47, 72), (20, 64), (31, 8)])
@pytest.mark.parametrize("layout", ["bhtd", "bthd"])
def test_attention_fp32(driver, T, hd, layout):
    arrays = [randn(2, 4, T, hd), randn(2, 2, T, hd, seed=1), randn(2, 2, T, hd, seed=2)]
    if layout == "bthd":
        arrays = [np.ascontiguousarray(a.transpose(0, 2, 1, 3)) for a in arrays]
    assert_fp32_matches_fp64(lambda q, k, v: F.causal_attention(q, k, v, layout=layout), *arrays)


def test_attention_inference_matches_training_path(driver):
    q, k, v = randn(2, 4, 10, 8), randn(2, 2, 10, 8, seed=1), randn(2, 2, 10, 8, seed=2)
    full = F.causal_attention(leaf(q), leaf(k), leaf(v)).data
    for t in range(10):          # the last rows against all earlier keys, as with a KV cache
        for rows in (1, 10 - t):
            lo = max(t + 1 - rows, 0)
            o = attention_ops.attention_inference(q[:, :, lo:t + 1], k[:, :, :t + 1], v[:, :, :t + 1])
            np.testing.assert_allclose(o, full[:, :, lo:t + 1], atol=1e-13)


@pytest.mark.parametrize("transpose_from", [1, 10 ** 9])
@pytest.mark.parametrize("blocks", [(64, 256), (2, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_attention_kernel_with_past_keys(blocks, dtype, transpose_from, monkeypatch):
    """The raw kernels with Tk > Tq (rows see past keys, as in decoding) against composed ops."""
    from minigrad.threads import serial_blas
    monkeypatch.setattr(attention_kernels, "TRANSPOSE_MIN_ROWS", transpose_from)
    B, Hq, Hkv, Tq, Tk, hd = 2, 4, 2, 5, 9, 6
    q = leaf(randn(B, Hq, Tq, hd))
    k, v = leaf(randn(B, Hkv, Tk, hd, seed=1)), leaf(randn(B, Hkv, Tk, hd, seed=2))
    go = randn(B, Hq, Tq, hd, seed=3)
    ref = attention_composed(q, k, v, 0.4)
    (ref * mg.tensor(go)).sum().backward()
    a = [x.data.astype(dtype) for x in (q, k, v)]
    o, lse = np.empty_like(a[0]), np.empty((B, Hq, Tq), dtype)
    grads = [np.full_like(x, np.nan) for x in a]
    with serial_blas():
        attention_kernels.attention_forward(*a, o, lse, 0.4, *blocks)
        attention_kernels.attention_backward(*a, o, lse, go.astype(dtype), *grads, 0.4, *blocks)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(o, ref.data, atol=tol)
    for got, leaf_ in zip(grads, (q, k, v)):
        np.testing.assert_allclose(got, leaf_.grad.data, atol=tol * 10)


def test_attention_torch_sdpa():
    torch = pytest.importorskip("torch")
    q, k, v = randn(2, 4, 37, 16), randn(2, 4, 37, 16, seed=1), randn(2, 4, 37, 16, seed=2)
    tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    g = randn(*q.shape, seed=4)
    tout.backward(torch.from_numpy(g))
    mq, mk, mv = leaf(q), leaf(k), leaf(v)
    out = F.causal_attention(mq, mk, mv)
    (out * mg.tensor(g)).sum().backward()
    np.testing.assert_allclose(out.data, tout.detach().numpy(), atol=1e-12)
    for ours, theirs in ((mq, tq), (mk, tk), (mv, tv)):
        np.testing.assert_allclose(ours.grad.data, theirs.grad.numpy(), atol=1e-12)


# ---------------------------------------------------------------- cross entropy
def cross_entropy_numpy(z, t, ignore_index, reduction):
    lse = np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1)) + z.max(-1)
    keep = t != ignore_index
    loss = np.where(keep, lse - z[np.arange(len(t)), np.where(keep, t, 0)], 0.0)
    return {"none": loss, "sum": loss.sum(), "mean": loss.sum() / keep.sum()}[reduction]


def cross_entropy_composed(z, t, ignore_index, reduction):
    keep = t != ignore_index
    m = z.max(axis=-1, keepdims=True).detach()
    logp = z - m - (z - m).exp().sum(axis=-1, keepdims=True).log()
    onehot = np.zeros(z.shape)
    onehot[np.arange(len(t))[keep], t[keep]] = 1
    loss = -(logp * mg.tensor(onehot)).sum(axis=-1)
    return {"none": loss, "sum": loss.sum(), "mean": loss.sum() / keep.sum()}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("N,V", [(1, 1), (5, 7), (12, 33)])
def test_cross_entropy_gradcheck_and_references(N, V, reduction):
    z = leaf(randn(N, V) * 3)
    t = np.random.default_rng(1).integers(0, V, N)
    if N > 2:
        t[1] = -100
    fn = lambda a: F.cross_entropy(a, t, reduction=reduction)
    check_grads("gpt.cross_entropy", fn, z)
    want = cross_entropy_numpy(z.data, t, -100, reduction)
    np.testing.assert_allclose(fn(z).data, want, rtol=1e-13, atol=1e-13)
    ref = cross_entropy_composed(z, t, -100, reduction)
    np.testing.assert_allclose(ref.data, want, rtol=1e-12, atol=1e-12)
    g = randn(*np.shape(want), seed=2)
    ours = _backprop(fn(z), mg.tensor(g), (z,))[0].grad.data.copy()
    theirs = _backprop(ref, mg.tensor(g), (z,))[0].grad.data.copy()
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def cross_entropy_smoothed_numpy(z, t, w, eps, ignore_index, reduction):
    """torch's label-smoothed, class-weighted loss in plain numpy: (1 - eps) w_t (-log p_t) +
    (eps / V) sum_c w_c (-log p_c), 0 on ignored rows; 'mean' over the targets' total weight."""
    logp = z - z.max(-1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    wt = np.where(keep, w[safe], 0.0)
    rows = np.arange(len(t))
    loss = (1 - eps) * wt * -logp[rows, safe] + np.where(keep, eps / z.shape[1] * (w * -logp).sum(-1), 0.0)
    return {"none": loss, "sum": loss.sum(), "mean": loss.sum() / wt.sum()}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("N,V", [(1, 1), (5, 7), (12, 33)])
@pytest.mark.parametrize("weighted,eps", [(True, 0.0), (False, 0.2), (True, 0.3), (True, 1.0)])
def test_cross_entropy_weight_smoothing_gradcheck_and_reference(N, V, reduction, weighted, eps):
    z = leaf(randn(N, V) * 3)
    t = np.random.default_rng(1).integers(0, V, N)
    if N > 2:
        t[1] = -100
    w = np.random.default_rng(2).uniform(0.3, 2.0, V) if weighted else np.ones(V)
    wt = mg.tensor(w) if weighted else None
    fn = lambda a: F.cross_entropy(a, t, weight=wt, label_smoothing=eps, reduction=reduction)
    check_grads("gpt.cross_entropy", fn, z)
    want = cross_entropy_smoothed_numpy(z.data, t, w, eps, -100, reduction)
    np.testing.assert_allclose(fn(z).data, want, rtol=1e-13, atol=1e-13)
    assert_fp32_matches_fp64(lambda a: F.cross_entropy(
        a, t, weight=None if wt is None else mg.tensor(w.astype(a.data.dtype)), label_smoothing=eps,
        reduction=reduction), z.data)


def test_cross_entropy_custom_ignore_fp32_and_torch():
    z, t = randn(9, 17) * 4, np.random.default_rng(3).integers(0, 17, 9)
    t[[0, 4]] = 3
    check_grads("gpt.cross_entropy", lambda a: F.cross_entropy(a, t, ignore_index=3), leaf(z))
    assert_fp32_matches_fp64(lambda a: F.cross_entropy(a, t, ignore_index=3, reduction="none"), z)
    allign = F.cross_entropy(leaf(z), np.full(9, -100))
    assert np.isnan(allign.item())
    torch = pytest.importorskip("torch")
    for reduction in ("mean", "sum", "none"):
        tz = torch.from_numpy(z).requires_grad_()
        tl = torch.nn.functional.cross_entropy(tz, torch.from_numpy(t), ignore_index=3, reduction=reduction)
        tl.sum().backward()
        mz = leaf(z)
        ml = F.cross_entropy(mz, t, ignore_index=3, reduction=reduction)
        ml.sum().backward()
        np.testing.assert_allclose(ml.data, tl.detach().numpy(), atol=1e-12)
        np.testing.assert_allclose(mz.grad.data, tz.grad.numpy(), atol=1e-12)


def test_cross_entropy_large_logits_stable():
    z = np.array([[1000.0, 0.0, -1000.0]], np.float32)
    assert np.isclose(F.cross_entropy(mg.tensor(z), np.array([0])).item(), 0.0)


# ---------------------------------------------------------------- swiglu
@pytest.mark.parametrize("shape", [(1,), (3, 7), (2, 3, 11)])
def test_swiglu_gradcheck_and_composed(shape):
    g, u = leaf(randn(*shape) * 2), leaf(randn(*shape, seed=1))
    check_grads("gpt.swiglu", F.swiglu, g, u)
    out = F.swiglu(g, u)
    ref = g * g.sigmoid() * u
    np.testing.assert_allclose(out.data, ref.data, rtol=1e-13, atol=1e-14)
    cot = mg.tensor(randn(*shape, seed=3))
    ours = [t.grad.data.copy() for t in _backprop(out, cot, (g, u))]
    theirs = [t.grad.data.copy() for t in _backprop(ref, cot, (g, u))]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_swiglu_fp32_and_extremes():
    assert_fp32_matches_fp64(F.swiglu, randn(5, 64) * 3, randn(5, 64, seed=1))
    big = mg.tensor(np.array([-200.0, 200.0, 0.0], np.float32))
    assert np.all(np.isfinite(F.swiglu(big, mg.ones(3)).data))


# ---------------------------------------------------------------- validation
def test_bad_inputs_raise_clear_errors():
    x32, x64 = mg.randn(2, 4), mg.randn(2, 4).double()
    with pytest.raises(TypeError, match="mix float32 and float64"):
        F.rms_norm(x32, mg.ones(4).double())
    with pytest.raises(ValueError, match="rms_norm: weight has shape"):
        F.rms_norm(x32, mg.ones(3))
    with pytest.raises(ValueError, match="head size must be even"):
        F.rope(mg.randn(1, 1, 2, 5), 0)
    with pytest.raises(ValueError, match="offset"):
        F.rope(mg.randn(1, 1, 2, 4), -1)
    with pytest.raises(ValueError, match="multiple of kv heads"):
        F.causal_attention(mg.randn(1, 3, 4, 8), mg.randn(1, 2, 4, 8), mg.randn(1, 2, 4, 8))
    with pytest.raises(ValueError, match="same shape"):
        F.causal_attention(mg.randn(1, 2, 4, 8), mg.randn(1, 2, 4, 8), mg.randn(1, 2, 3, 8))
    with pytest.raises(IndexError, match="targets contains 7"):
        F.cross_entropy(mg.randn(3, 7), np.array([0, 7, 1]))
    with pytest.raises(IndexError, match="targets contains -1"):
        F.cross_entropy(mg.randn(3, 7), np.array([0, -1, 1]))
    with pytest.raises(TypeError, match="integer"):
        F.cross_entropy(mg.randn(3, 7), np.array([0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(mg.randn(3, 7), np.array([0, 1, 1]), reduction="avg")
    with pytest.raises(ValueError, match="swiglu: up has shape"):
        F.swiglu(x32, mg.randn(2, 5))
    with pytest.raises(TypeError, match="mix float32 and float64"):
        F.swiglu(x32, x64)


# ---------------------------------------------------------------- packed projections (model fast path)
@pytest.mark.parametrize("layout", ["bthd", "bhtd"])
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("B,T,Hq,Hkv,offset", [(2, 5, 3, 1, 0), (2, 5, 2, 2, 5), (1, 1, 4, 2, 3),
                                                (3, 8, 4, 2, 1)])
def test_split_qkv_rope_gradcheck_and_reference(B, T, Hq, Hkv, offset, interleaved, layout):
    from minigrad.ops.rope import split_qkv_rope
    hd = 6
    y = leaf(randn(B, T, (Hq + 2 * Hkv) * hd))
    fn = lambda a, pos=offset: split_qkv_rope(a, pos, Hq, Hkv, 1e4, interleaved, layout)
    check_grads("gpt.split_qkv_rope", fn, y)
    heads = y.data.reshape(B, T, Hq + 2 * Hkv, hd)
    as_bhtd = lambda a: np.ascontiguousarray(a.transpose(0, 2, 1, 3))
    for pos in (np.arange(offset, offset + T), np.arange(offset, offset + T)[::-1].copy()):
        q, k, v = fn(y, offset if pos[0] == offset else pos)
        if layout == "bthd":
            q, k, v = (as_bhtd(t.data) for t in (q, k, v))
        else:
            q, k, v = (t.data for t in (q, k, v))
        for got, lo, hi in ((q, 0, Hq), (k, Hq, Hq + Hkv)):
            want = rope_numpy(as_bhtd(heads[:, :, lo:hi]), pos, 1e4, interleaved)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-13)
        np.testing.assert_array_equal(v, as_bhtd(heads[:, :, Hq + Hkv:]))
    packed = lambda a: mg.cat([t.reshape(-1) for t in fn(a)])
    assert_fp32_matches_fp64(packed, randn(B, T, (Hq + 2 * Hkv) * hd))


def test_split_qkv_rope_strided_grads_and_errors():
    """Upstream grads in any strides (unit last) give the same gradient; bad shapes raise."""
    from minigrad.kernels import rope as rope_kernels
    from minigrad.ops.rope import split_qkv_rope
    y = leaf(randn(2, 3, 4 * 8))
    q, k, v = split_qkv_rope(y, 2, 2, 1, layout="bhtd")
    gs = [randn(*t.shape, seed=i) for i, t in enumerate((q, k, v))]
    mg.autograd.backward([q, k, v], [mg.tensor(g) for g in gs])
    want = y.grad.data.copy()
    y.grad = None
    q, k, v = split_qkv_rope(y, 2, 2, 1, layout="bhtd")
    strided = [mg.tensor(np.asfortranarray(g)) for g in gs]      # non-unit last stride -> copied
    mg.autograd.backward([q, k, v], strided)
    np.testing.assert_allclose(y.grad.data, want, rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="n_head"):
        split_qkv_rope(mg.randn(1, 2, 7 * 4), 0, 3, 1)
    with pytest.raises(ValueError, match="layout"):
        split_qkv_rope(mg.randn(1, 2, 5 * 4), 0, 3, 1, layout="tbhd")
    cos, sin = rope_tables(4, 4, 1e4, np.float64)
    out = np.empty((1, 2, 3, 4))
    with pytest.raises(ValueError, match="heads"):
        rope_kernels.qkv_rope_forward(np.zeros((1, 2, 6, 4)), out, out[:, :, :1], out[:, :, :1], cos, sin,
                                      np.arange(2), False)
    with pytest.raises(IndexError, match="positions"):
        rope_kernels.qkv_rope_forward(np.zeros((1, 2, 5, 4)), out, out[:, :, :1], out[:, :, :1], cos, sin,
                                      np.array([0, 99]), False)


def test_swiglu_packed_gradcheck_and_reference():
    from minigrad.ops.swiglu import swiglu_packed
    h = leaf(randn(2, 3, 14))
    check_grads("gpt.swiglu", swiglu_packed, h)
    g, u = h.data[..., :7], h.data[..., 7:]
    np.testing.assert_allclose(swiglu_packed(h).data, g / (1 + np.exp(-g)) * u, rtol=1e-13, atol=1e-14)
    assert_fp32_matches_fp64(swiglu_packed, randn(4, 64) * 3)
    with pytest.raises(ValueError, match="even"):
        swiglu_packed(mg.randn(2, 5))


@pytest.mark.parametrize("dtype,offset", [(np.float32, 1e6), (np.float32, 1e7), (np.float32, 1e30),
                                          (np.float64, 1e15)])
def test_cross_entropy_keeps_a_large_common_offset_exact(dtype, offset):
    # audit: loss = lse - z_t with lse = m + log(s) rounded to m's magnitude, so 1e6 + [0, 1, 2, 3]
    # gave 3.4375 (fp32) and 1e30 + [...] a loss of 0 with "probabilities" summing to 4
    shift = np.array([0.0, 1.0, 2.0, 3.0])
    z = (offset + shift).astype(dtype)
    exact_shift = z.astype(np.float64) - z.astype(np.float64).max()      # what the rounding left
    p = np.exp(exact_shift) / np.exp(exact_shift).sum()
    logits = mg.tensor(z[None], requires_grad=True)
    loss = F.cross_entropy(logits, np.array([0]))
    loss.backward()
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(loss.item(), -np.log(p[0]), rtol=tol)
    np.testing.assert_allclose(logits.grad.data[0], p - [1, 0, 0, 0], atol=tol)


def test_cross_entropy_gradient_of_masked_logits_is_exactly_zero():
    # audit: the float32 exp clamped -inf to -87.3 and returned 1.2e-38 instead of 0
    logits = mg.tensor(np.array([[0.5, -np.inf, 1.0, -np.inf]], np.float32), requires_grad=True)
    F.cross_entropy(logits, np.array([2])).backward()
    assert logits.grad.data[0, 1] == 0.0 and logits.grad.data[0, 3] == 0.0


@pytest.mark.parametrize("hd", [8, 12])
def test_attention_backward_recomputes_the_forward_probabilities(hd):
    # audit: the backward multiplied an unscaled block product by `scale` while the forward let
    # BLAS scale it, so P differed by |score| eps: with one key P is 1 and gv must equal go exactly
    rng = np.random.default_rng(0)
    q = mg.tensor(rng.standard_normal((1, 2, 1, hd)).astype(np.float32) * 40, requires_grad=True)
    k = mg.tensor(rng.standard_normal((1, 2, 1, hd)).astype(np.float32) * 40, requires_grad=True)
    v = mg.tensor(rng.standard_normal((1, 2, 1, hd)).astype(np.float32), requires_grad=True)
    go = rng.standard_normal((1, 2, 1, hd)).astype(np.float32)
    F.causal_attention(q, k, v).backward(mg.tensor(go))
    np.testing.assert_array_equal(v.grad.data, go)
