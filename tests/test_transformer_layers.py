"""nn.MultiheadAttention and the nn.Transformer* layers against torch in float64: torch's state_dict
loaded into ours, then outputs, attention weights and the gradients of every parameter and input
compared (tight tolerance), over torch's options; gradcheck, errors, deepcopy, a training smoke test."""
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.autograd import gradcheck

torch = pytest.importorskip("torch")

E, H, L, S, N = 12, 3, 5, 7, 2
TOL = dict(rtol=1e-10, atol=1e-10)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")   # torch's nested-tensor / mask notes


def _rng(seed=0):
    return np.random.default_rng(seed)


def _pair(torch_cls, ours_cls, *args, **kwargs):
    """A torch module (fp64, seeded init) and ours with its state_dict loaded."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch_cls(*args, **kwargs).double()
    ours = ours_cls(*args, **kwargs).double()
    ours.load_state_dict(theirs.state_dict())
    return theirs, ours


def _randomise(theirs, ours, seed=1):
    """Non-zero biases and non-unit norms everywhere (torch's init zeros many), in both."""
    rng = _rng(seed)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * 0.3))
    ours.load_state_dict(theirs.state_dict())


def _compare(theirs, ours, arrays, call, masks=None, seed=2):
    """Run `call(module, tensors, masks)` on both; compare outputs, the grads of every parameter
    and of every float array in `arrays` (all require grad) under a random cotangent."""
    masks = masks or {}
    t_in = {k: torch.tensor(a, requires_grad=True) for k, a in arrays.items()}
    m_in = {k: mg.tensor(a, requires_grad=True) for k, a in arrays.items()}
    t_mask = {k: None if m is None else torch.tensor(m) for k, m in masks.items()}
    m_mask = {k: None if m is None else mg.tensor(m) for k, m in masks.items()}
    t_out, m_out = call(theirs, t_in, t_mask), call(ours, m_in, m_mask)
    t_out = t_out if isinstance(t_out, tuple) else (t_out,)
    m_out = m_out if isinstance(m_out, tuple) else (m_out,)
    rng, t_loss, m_loss = _rng(seed), 0, 0
    for t, m in zip(t_out, m_out):
        assert (t is None) == (m is None)
        if t is None:
            continue
        assert tuple(m.shape) == tuple(t.shape)
        np.testing.assert_allclose(m.data, t.detach().numpy(), **TOL)
        c = rng.standard_normal(tuple(t.shape))
        t_loss = t_loss + (t * torch.from_numpy(c)).sum()
        m_loss = m_loss + (m * mg.tensor(c)).sum()
    t_loss.backward()
    m_loss.backward()
    ours_params = dict(ours.named_parameters())
    assert list(ours_params) == [n for n, _ in theirs.named_parameters()]
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(ours_params[name].grad.data, p.grad.numpy(), **TOL, err_msg=name)
    for k in arrays:
        np.testing.assert_allclose(m_in[k].grad.data, t_in[k].grad.numpy(), **TOL, err_msg=k)
    return m_out


def _forward(*names, **kwargs):
    """A `call` for _compare: module(*tensors[names], **kwargs, **masks)."""
    return lambda module, t, m: module(*(t[k] for k in names), **kwargs, **m)


# ---- MultiheadAttention ---------------------------------------------------------------------------
def _bool_mask(shape, seed, p=0.35):
    """Random True (= masked) entries; the first key always allowed, so no row is fully masked."""
    m = _rng(seed).random(shape) < p
    m[..., 0] = False
    return m


def _float_mask(shape, seed):
    return np.where(_bool_mask(shape, seed), -np.inf, _rng(seed + 1).standard_normal(shape) * 0.5)


def _make_mask(kind, n_batch, Lq, Sk, seed=3):
    """attn_mask by kind: bool2 / float2 (L, S), bool3 / float3 (N * H, L, S), causal (float)."""
    if kind is None:
        return None
    if kind == "causal":
        return np.triu(np.full((Lq, Sk), -np.inf), 1)
    shape = (Lq, Sk) if kind.endswith("2") else (n_batch * H, Lq, Sk)
    return _bool_mask(shape, seed) if kind.startswith("bool") else _float_mask(shape, seed)


def _make_kpm(kind, batched, Sk, seed=4):
    if kind is None:
        return None
    shape = (N, Sk) if batched else (Sk,)
    return _bool_mask(shape, seed) if kind == "bool" else _float_mask(shape, seed)


MHA_CASES = {
    "self": {},
    "self_batch_first": dict(ctor=dict(batch_first=True), mask="bool2", kpm="bool"),
    "unbatched_self": dict(layout="unbatched", mask="float3", kpm="bool"),
    "unbatched_cross_kvdim": dict(layout="unbatched", cross=True, ctor=dict(kdim=8, vdim=10), mask="bool2",
                                  kpm="float"),
    "cross_kvdim": dict(cross=True, ctor=dict(kdim=8, vdim=10)),
    "cross_kvdim_batch_first": dict(cross=True, ctor=dict(kdim=8, vdim=10, batch_first=True), mask="float3"),
    "cross_shared_memory": dict(cross="shared", mask="bool3", kpm="bool"),
    "no_bias": dict(ctor=dict(bias=False), mask="float2"),
    "no_bias_cross_kvdim": dict(cross=True, ctor=dict(bias=False, kdim=8, vdim=10), kpm="bool"),
    "bias_kv": dict(ctor=dict(add_bias_kv=True), mask="bool2", kpm="bool"),
    "zero_attn": dict(ctor=dict(add_zero_attn=True), mask="float3", kpm="float"),
    "bias_kv_zero_attn_cross": dict(cross=True, mask="bool3", kpm="bool", ctor=dict(
        add_bias_kv=True, add_zero_attn=True, kdim=8, vdim=10, batch_first=True)),
    "bool_mask_2d_cross": dict(cross="shared", mask="bool2"),
    "float_mask_2d_cross": dict(cross="shared", mask="float2"),
    "float_mask_3d_cross": dict(cross="shared", mask="float3"),
    "kpm_bool": dict(kpm="bool"),
    "kpm_float_mask_bool": dict(mask="bool2", kpm="float"),
    "causal_hint": dict(mask="causal", is_causal=True),
    "causal_hint_kpm": dict(mask="causal", is_causal=True, kpm="bool"),
    "causal_hint_bias_kv_batch_first": dict(mask="causal", is_causal=True,
                                            ctor=dict(add_bias_kv=True, batch_first=True)),
    "dropout_in_eval": dict(ctor=dict(dropout=0.5), eval=True, mask="bool2", kpm="bool"),
}


def _mha_inputs(case):
    """Input arrays (named q/k/v, or x for self-attention) in the module's layout, and the masks."""
    ctor = case.get("ctor", {})
    kdim, vdim = ctor.get("kdim", E), ctor.get("vdim", E)
    batched = case.get("layout") != "unbatched"
    cross = case.get("cross", False)
    Sk = S if cross else L

    def shape(T, dim):
        if not batched:
            return (T, dim)
        return (N, T, dim) if ctor.get("batch_first") else (T, N, dim)

    rng = _rng(5)
    if not cross:
        arrays = {"x": rng.standard_normal(shape(L, E))}
    elif cross == "shared":
        arrays = {"q": rng.standard_normal(shape(L, E)), "mem": rng.standard_normal(shape(S, E))}
    else:
        arrays = {"q": rng.standard_normal(shape(L, E)), "k": rng.standard_normal(shape(S, kdim)),
                  "v": rng.standard_normal(shape(S, vdim))}
    masks = {"attn_mask": _make_mask(case.get("mask"), N if batched else 1, L, Sk),
             "key_padding_mask": _make_kpm(case.get("kpm"), batched, Sk)}
    return arrays, masks


def _qkv(t):
    if "x" in t:
        return t["x"], t["x"], t["x"]
    if "mem" in t:
        return t["q"], t["mem"], t["mem"]
    return t["q"], t["k"], t["v"]


@pytest.mark.parametrize("weights", ["average", "per_head", "none"])
@pytest.mark.parametrize("name", list(MHA_CASES))
def test_multihead_attention_matches_torch(name, weights):
    case = MHA_CASES[name]
    theirs, ours = _pair(torch.nn.MultiheadAttention, nn.MultiheadAttention, E, H, **case.get("ctor", {}))
    _randomise(theirs, ours)
    if case.get("eval"):
        theirs.eval(), ours.eval()
    arrays, masks = _mha_inputs(case)

    def call(module, t, m):
        return module(*_qkv(t), need_weights=weights != "none", average_attn_weights=weights == "average",
                      is_causal=case.get("is_causal", False), **m)

    out, w = _compare(theirs, ours, arrays, call, masks)
    assert (w is None) == (weights == "none")


def test_multihead_attention_parameters_and_init_as_torch():
    for kwargs in ({}, dict(kdim=8, vdim=10, bias=False), dict(add_bias_kv=True)):
        theirs = torch.nn.MultiheadAttention(E, H, **kwargs)
        ours = nn.MultiheadAttention(E, H, **kwargs)
        assert [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()] == \
               [(k, v.shape) for k, v in ours.state_dict().items()]
        ours.load_state_dict(theirs.state_dict())           # float32 both: loads as it is
    m = nn.MultiheadAttention(64, 4)
    bound = np.sqrt(6 / (64 + 3 * 64))
    assert np.abs(m.in_proj_weight.data).max() <= bound and np.abs(m.in_proj_weight.data).max() > 0.9 * bound
    assert not m.in_proj_bias.data.any() and not m.out_proj.bias.data.any()
    assert m.in_proj_weight.dtype == mg.float32 and m.head_dim == 16 and m._qkv_same_embed_dim


def test_fully_masked_rows_give_zeros():
    """torch: zeros with need_weights=False (as here), NaN with need_weights=True (here zeros too)."""
    theirs, ours = _pair(torch.nn.MultiheadAttention, nn.MultiheadAttention, E, H)
    x = _rng().standard_normal((L, N, E))
    kpm = np.zeros((N, L), bool)
    kpm[1] = True
    t_out = theirs(*[torch.tensor(x)] * 3, key_padding_mask=torch.tensor(kpm), need_weights=False)[0]
    xs = mg.tensor(x)
    for need_weights in (False, True):
        out, w = ours(xs, xs, xs, key_padding_mask=mg.tensor(kpm), need_weights=need_weights)
        np.testing.assert_allclose(out.data, t_out.detach().numpy(), **TOL)
    assert not w.data[1].any() and np.isfinite(w.data).all()


def test_dropout_acts_on_the_weights_in_training_only():
    mg.manual_seed(0)
    m = nn.MultiheadAttention(E, H, dropout=0.5).double()
    x = mg.tensor(_rng().standard_normal((L, N, E)))
    m.eval()
    out_eval, w_eval = m(x, x, x, average_attn_weights=False)
    m.train()
    out_train, w_train = m(x, x, x, average_attn_weights=False)
    kept = w_train.data != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(w_train.data[kept], 2 * w_eval.data[kept], rtol=1e-12)
    assert not np.allclose(out_train.data, out_eval.data)
    out_nw, _ = m(x, x, x, need_weights=False)               # through F.scaled_dot_product_attention
    assert not np.allclose(out_nw.data, out_eval.data)


def test_multihead_attention_gradcheck():
    """fp64 central differences through every input and parameter of a tiny case with all options."""
    mg.manual_seed(0)
    m = nn.MultiheadAttention(4, 2, add_bias_kv=True, add_zero_attn=True, kdim=3, vdim=5).double()
    rng = _rng(7)
    shapes = ((2, 1, 4), (3, 1, 3), (3, 1, 5))
    q, k, v = (mg.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes)
    mask = mg.tensor(_float_mask((2, 3), 8))
    kpm = mg.tensor(np.array([[False, True, False]]))
    params = list(m.parameters())

    def fn(q, k, v, *_):
        return m(q, k, v, attn_mask=mask, key_padding_mask=kpm, average_attn_weights=False)

    assert gradcheck(fn, [q, k, v, *params], rtol=1e-6)
    assert gradcheck(lambda q, k, v, *_: m(q, k, v, attn_mask=mask, need_weights=False)[0],
                     [q, k, v, *params])


@pytest.mark.parametrize("bad, match", [
    (lambda: nn.MultiheadAttention(10, 3), "divisible"),
    (lambda: nn.MultiheadAttention(0, 1), ">= 1"),
    (lambda: nn.MultiheadAttention(4, 2, dropout=1.5), r"\[0, 1\]"),
])
def test_multihead_attention_constructor_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        bad()


def test_multihead_attention_forward_errors():
    m = nn.MultiheadAttention(E, H, kdim=8, vdim=10).double()
    q, k, v = (mg.tensor(_rng().standard_normal(s)) for s in ((L, N, E), (S, N, 8), (S, N, 10)))
    with pytest.raises(ValueError, match="kdim, vdim"):
        m(q, v, v)
    with pytest.raises(ValueError, match="3-D .* 2-D"):
        m(q, k[0], v)
    with pytest.raises(ValueError, match="one sequence length"):
        m(q, k, v[:3])
    with pytest.raises(ValueError, match="batch size"):
        m(q[:, :1], k, v)
    with pytest.raises(ValueError, match="attn_mask must be"):
        m(q, k, v, attn_mask=mg.tensor(np.zeros((S, L), bool)))
    with pytest.raises(ValueError, match="attn_mask must be"):
        m(q, k, v, attn_mask=mg.tensor(np.zeros((N, L, S), bool)))
    with pytest.raises(ValueError, match="key_padding_mask must be"):
        m(q, k, v, key_padding_mask=mg.tensor(np.zeros((S, N), bool)))
    with pytest.raises(TypeError, match="only bool and float"):
        m(q, k, v, key_padding_mask=mg.tensor(np.zeros((N, S), np.int64)))
    with pytest.raises(TypeError, match="query's dtype"):
        m(q, k, v, attn_mask=mg.zeros(L, S))                   # float32 mask, float64 query
    with pytest.raises(ValueError, match="needs attn_mask"):
        m(q, k, v, is_causal=True)
    with pytest.raises(TypeError, match="Tensor"):
        m(q.numpy(), k, v)


# ---- Transformer layers ---------------------------------------------------------------------------
D_FF = 16


def _src(batch_first, T=L, seed=5):
    return _rng(seed).standard_normal((N, T, E) if batch_first else (T, N, E))


def _gelu_tanh(lib):
    return lambda x: (torch.nn.functional.gelu(x, approximate="tanh") if lib is torch
                      else F.gelu(x, approximate="tanh"))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_layer_matches_torch(norm_first, activation, batch_first):
    kw = dict(dim_feedforward=D_FF, dropout=0.1, activation=activation, batch_first=batch_first,
              norm_first=norm_first)
    theirs, ours = _pair(torch.nn.TransformerEncoderLayer, nn.TransformerEncoderLayer, E, H, **kw)
    _randomise(theirs, ours)
    theirs.eval(), ours.eval()
    masks = {"src_mask": _bool_mask((L, L), 3), "src_key_padding_mask": _float_mask((N, L), 4)}
    _compare(theirs, ours, {"src": _src(batch_first)}, _forward("src"), masks)


def test_encoder_layer_unbatched_callable_activation_no_bias():
    kw = dict(dim_feedforward=D_FF, dropout=0.0, bias=False, layer_norm_eps=1e-3)
    torch.manual_seed(0)
    theirs = torch.nn.TransformerEncoderLayer(E, H, activation=_gelu_tanh(torch), **kw).double()
    ours = nn.TransformerEncoderLayer(E, H, activation=_gelu_tanh(mg), **kw).double()
    ours.load_state_dict(theirs.state_dict())
    _randomise(theirs, ours)
    masks = {"src_mask": _float_mask((H, L, L), 3)}
    _compare(theirs, ours, {"src": _rng().standard_normal((L, E))}, _forward("src"),
             masks)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mask", ["causal_detected", "causal_hint", "bool"])
def test_encoder_matches_torch(norm_first, mask):
    kw = dict(dim_feedforward=D_FF, dropout=0.0, norm_first=norm_first, batch_first=True)
    torch.manual_seed(0)
    t_layer = torch.nn.TransformerEncoderLayer(E, H, **kw).double()
    theirs = torch.nn.TransformerEncoder(t_layer, 2, norm=torch.nn.LayerNorm(E).double())
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, **kw).double(), 2,
                                 norm=nn.LayerNorm(E).double())
    ours.load_state_dict(theirs.state_dict())
    _randomise(theirs, ours)
    src_mask = _bool_mask((L, L), 3) if mask == "bool" else _make_mask("causal", N, L, L)
    is_causal = True if mask == "causal_hint" else None
    kpm = None if mask == "causal_detected" else _bool_mask((N, L), 4)
    masks = {"mask": src_mask, "src_key_padding_mask": kpm}
    _compare(theirs, ours, {"src": _src(True)}, _forward("src", is_causal=is_causal),
             masks)


def _decoder_masks(batch_first, T=L):
    return {"tgt_mask": _make_mask("causal", N, T, T), "memory_mask": _bool_mask((T, S), 6),
            "tgt_key_padding_mask": _bool_mask((N, T), 7), "memory_key_padding_mask": _float_mask((N, S), 8)}


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_matches_torch(norm_first, batch_first):
    kw = dict(dim_feedforward=D_FF, dropout=0.1, activation="gelu", batch_first=batch_first,
              norm_first=norm_first)
    theirs, ours = _pair(torch.nn.TransformerDecoderLayer, nn.TransformerDecoderLayer, E, H, **kw)
    _randomise(theirs, ours)
    theirs.eval(), ours.eval()
    arrays = {"tgt": _src(batch_first), "memory": _src(batch_first, T=S, seed=6)}
    _compare(theirs, ours, arrays, _forward("tgt", "memory", tgt_is_causal=True),
             _decoder_masks(batch_first))


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_matches_torch(norm_first):
    kw = dict(dim_feedforward=D_FF, dropout=0.0, norm_first=norm_first)
    torch.manual_seed(0)
    theirs = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(E, H, **kw).double(), 2,
                                         norm=torch.nn.LayerNorm(E).double())
    ours = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, **kw).double(), 2,
                                 norm=nn.LayerNorm(E).double())
    ours.load_state_dict(theirs.state_dict())
    _randomise(theirs, ours)
    arrays = {"tgt": _src(False), "memory": _src(False, T=S, seed=6)}
    masks = _decoder_masks(False)
    masks["tgt_key_padding_mask"] = None                     # tgt_mask detected causal: the causal path
    _compare(theirs, ours, arrays, _forward("tgt", "memory"), masks)


def test_transformer_matches_torch():
    kw = dict(d_model=E, nhead=H, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=D_FF,
              dropout=0.0, batch_first=True)
    theirs, ours = _pair(torch.nn.Transformer, nn.Transformer, **kw)
    _randomise(theirs, ours)
    arrays = {"src": _src(True, T=S, seed=6), "tgt": _src(True)}
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(L, dtype=mg.float64).numpy()
    masks = {"tgt_mask": tgt_mask, "src_key_padding_mask": _bool_mask((N, S), 4),
             "memory_key_padding_mask": _bool_mask((N, S), 4)}
    _compare(theirs, ours, arrays, _forward("src", "tgt"), masks)


def test_generate_square_subsequent_mask_and_transformer_init():
    m = nn.Transformer.generate_square_subsequent_mask(4)
    assert m.dtype == mg.float32
    np.testing.assert_array_equal(m.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    assert nn.Transformer.generate_square_subsequent_mask(3, dtype=mg.float64).dtype == mg.float64
    t = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8)
    w = t.encoder.layers[0].linear1.weight.data
    assert np.abs(w).max() <= np.sqrt(6 / 16)                    # xavier_uniform_ on every matrix
    assert [k for k in t.state_dict()] == [k for k in torch.nn.Transformer(8, 2, 1, 1, 8).state_dict()]


def test_layers_are_deep_copies():
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=D_FF)
    enc = nn.TransformerEncoder(layer, 3)
    w = [enc.layers[i].self_attn.in_proj_weight for i in range(3)]
    assert len({id(p) for p in w} | {id(layer.self_attn.in_proj_weight)}) == 4
    np.testing.assert_array_equal(w[0].data, w[2].data)
    with mg.no_grad():
        w[0].data[...] = 0
    assert w[1].data.any() and layer.self_attn.in_proj_weight.data.any()
    names = [n for n, _ in enc.named_parameters()]
    assert names[0] == "layers.0.self_attn.in_proj_weight" and len(names) == 3 * len(list(layer.parameters()))
    assert "norm1.weight" in dict(layer.named_parameters())
    dec = nn.TransformerDecoderLayer(E, H, dim_feedforward=D_FF)
    assert "multihead_attn.out_proj.weight" in dict(dec.named_parameters())


def test_layer_errors():
    with pytest.raises(ValueError, match="activation"):
        nn.TransformerEncoderLayer(E, H, activation="tanh")
    with pytest.raises(ValueError, match="divisible"):
        nn.TransformerDecoderLayer(10, 3)
    t = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8)
    with pytest.raises(ValueError, match="batch size"):
        t(mg.zeros(3, 2, 8), mg.zeros(3, 1, 8))
    with pytest.raises(ValueError, match="d_model"):
        t(mg.zeros(3, 2, 8), mg.zeros(3, 2, 4))


def test_encoder_trains():
    mg.manual_seed(0)
    model = nn.Sequential(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True),
                          nn.Linear(8, 1))
    opt = mg.optim.AdamW(model.parameters(), lr=1e-2)
    rng = _rng(0)
    x = mg.tensor(rng.standard_normal((16, 4, 8)).astype(np.float32))
    y = x.sum(axis=1, keepdims=True).mean(axis=-1, keepdims=True)     # needs mixing across positions
    losses = []
    for _ in range(60):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]
