"""HF checkpoint variants GPT computes exactly: RoPE scaling (llama3, linear, dynamic), an explicit
head_dim, attention / MLP biases, Mistral and Qwen2 (minigrad/models/hf_llama.py).

Every variant is a tiny random transformers model saved with `save_pretrained`; `GPT.from_hf` and
`AutoModelForCausalLM.from_pretrained` then read the same directory. Tolerances (relative to the
largest |logit| or |gradient|; seen values in brackets, on this machine):
- fp32 logits 1e-5 [<= 9e-7], fp32 gradients 2e-5 [<= 2e-6 of each parameter's largest];
- fp64 logits against stock transformers 1e-6 [<= 3e-7]: transformers keeps RoPE (inv_freq, angles,
  cos/sin) and RMSNorm in float32 even in a float64 model;
- fp64 with those two float32 islands computed in float64 by transformers' own code (`_float64`:
  its RoPE init function evaluated in float64, the same formulas): logits 1e-12 [<= 1.5e-15],
  gradients 1e-10 [<= 1e-13].
"""
import json

import numpy as np
import pytest

from minigrad.autograd import no_grad
from minigrad.models import GPT, GPTConfig
from minigrad.models.hf_llama import UnsupportedCheckpointError, config_from_hf, config_to_hf

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
torch.set_num_threads(1)

VOCAB = 97
BASE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5,
            initializer_range=0.1, tie_word_embeddings=False)
# original length 64: wavelengths 2 pi / theta_i of head_dim 16, base 5000 fall in all three llama3
# bands (< 64/4 kept, 64/4 .. 64/1 interpolated, > 64 divided by the factor)
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64, "rope_theta": 5000.0}
VARIANTS = {
    "llama3-rope": ("LlamaConfig", dict(rope_parameters=LLAMA3)),
    "linear-rope": ("LlamaConfig", dict(rope_parameters={"rope_type": "linear", "factor": 4.0,
                                                         "rope_theta": 5e3})),
    "dynamic-rope": ("LlamaConfig", dict(rope_parameters={"rope_type": "dynamic", "factor": 2.0})),
    "head_dim-gqa": ("LlamaConfig", dict(head_dim=24, num_attention_heads=8, num_key_value_heads=2)),
    "attention_bias": ("LlamaConfig", dict(attention_bias=True)),
    "attention_bias-tied": ("LlamaConfig", dict(attention_bias=True, tie_word_embeddings=True)),
    "mlp_bias": ("LlamaConfig", dict(mlp_bias=True)),
    "mistral": ("MistralConfig", dict(sliding_window=32, head_dim=24)),
    "qwen2-tied": ("Qwen2Config", dict(tie_word_embeddings=True)),
    "qwen2": ("Qwen2Config", dict(rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
    "all": ("LlamaConfig", dict(rope_parameters=LLAMA3, head_dim=24, attention_bias=True, mlp_bias=True)),
}
DYNAMIC_64 = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64}
IDS = np.random.default_rng(0).integers(0, VOCAB, (2, 24))


@pytest.fixture(autouse=True)
def _no_hub_kernels(monkeypatch):
    monkeypatch.setenv("USE_HUB_KERNELS", "0")   # transformers 5 would try the (uninstalled) `kernels` hub


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """variant -> a directory holding a random transformers model of it (norms around 1, random biases)."""
    cache = {}

    def get(name):
        if name not in cache:
            cls, over = VARIANTS[name]
            torch.manual_seed(len(cache))
            config = getattr(transformers, cls)(**{**BASE, **over})
            model = transformers.AutoModelForCausalLM.from_config(config)
            with torch.no_grad():
                for pname, p in model.named_parameters():
                    if pname.endswith("norm.weight"):
                        p.copy_(1 + 0.1 * torch.randn_like(p))
                    elif pname.endswith(".bias"):
                        p.copy_(0.1 * torch.randn_like(p))
            cache[name] = str(tmp_path_factory.mktemp(name))
            model.save_pretrained(cache[name])
        return cache[name]
    return get


def _hf(path, dtype=torch.float32):
    return transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()


def _float64(ref):
    """`ref` (a float64 transformers model) with its float32 islands in float64: inv_freq from its
    own RoPE init function evaluated with torch.float = float64, angles and cos/sin in float64, and
    its RMSNorm formula without the float32 cast."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    rot = ref.model.rotary_emb
    init = ROPE_INIT_FUNCTIONS.get(rot.rope_type, rot.compute_default_rope_parameters)
    float32, torch.float = torch.float, torch.float64
    try:
        inv_freq, scale = init(ref.config)
    finally:
        torch.float = float32
    assert inv_freq.dtype == torch.float64

    def rope(x, position_ids):
        angles = position_ids[..., None].double() * inv_freq
        emb = torch.cat((angles, angles), -1)
        return emb.cos() * scale, emb.sin() * scale

    def norm(m):
        return lambda h: m.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + m.variance_epsilon))

    rot.forward = rope
    for m in ref.modules():
        if type(m).__name__.endswith("RMSNorm"):
            m.forward = norm(m)
    return ref


def _ref_logits(ref, ids):
    with torch.no_grad():
        return ref(torch.from_numpy(np.asarray(ids))).logits.numpy()


def _logits(model, ids):
    with no_grad():
        return model(np.asarray(ids)).data


def _close(got, want, rel, what=""):
    np.testing.assert_allclose(got, want, rtol=0, atol=rel * np.abs(want).max(), err_msg=what)


# ----------------------------------------------------------------------------------------------
# against transformers


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_logits_match_transformers(saved, variant):
    path = saved(variant)
    ours32, ours64 = GPT.from_hf(path), GPT.from_hf(path, dtype=np.float64)
    assert ours32.config == ours64.config
    _close(_logits(ours32, IDS), _ref_logits(_hf(path), IDS), 1e-5, "fp32")
    _close(_logits(ours64, IDS), _ref_logits(_hf(path, torch.float64), IDS), 1e-6, "fp64, stock transformers")
    _close(_logits(ours64, IDS), _ref_logits(_float64(_hf(path, torch.float64)), IDS), 1e-12, "fp64")


def test_variants_map_to_the_intended_config(saved):
    cfg = {name: GPT.from_hf(saved(name)).config for name in ("llama3-rope", "head_dim-gqa", "mistral",
                                                               "qwen2-tied", "dynamic-rope")}
    assert cfg["llama3-rope"].rope_scaling == {k: v for k, v in LLAMA3.items() if k != "rope_theta"}
    assert cfg["llama3-rope"].rope_base == 5000.0
    gqa = cfg["head_dim-gqa"]
    assert (gqa.head_dim, gqa.n_head, gqa.kv_heads) == (24, 8, 2)
    assert (cfg["mistral"].hf_model_type, cfg["mistral"].sliding_window, cfg["mistral"].max_seq_len) == (
        "mistral", 32, 32)                                       # min(max_position_embeddings, window)
    q = cfg["qwen2-tied"]
    assert (q.hf_model_type, q.attention_bias, q.o_proj_bias, q.mlp_bias, q.tie_embeddings) == (
        "qwen2", True, False, False, True)
    assert cfg["dynamic-rope"].rope_scaling == {"rope_type": "dynamic", "factor": 2.0,
                                                "original_max_position_embeddings": 128}


def test_rope_frequencies_match_transformers(saved):
    """The scaled inverse frequencies against transformers' own (computed in float32 there)."""
    from minigrad.ops.rope import rope_inv_freq
    for variant in ("llama3-rope", "linear-rope", "dynamic-rope", "all"):
        cfg = GPT.from_hf(saved(variant)).config
        want = _hf(saved(variant)).model.rotary_emb.inv_freq.double().numpy()
        got = rope_inv_freq(cfg.head_dim, cfg.rope_base, cfg.rope_scaling)
        np.testing.assert_allclose(got, want, rtol=4e-7, atol=0, err_msg=variant)   # seen 1.8e-7


@pytest.mark.parametrize("variant", ["llama3-rope", "head_dim-gqa", "attention_bias-tied", "mlp_bias",
                                     "mistral", "qwen2-tied", "all"])
def test_greedy_generation(saved, variant):
    """KV-cache greedy decoding = argmax decoding with full forwards = transformers' greedy generate."""
    path = saved(variant)
    ours, ref = GPT.from_hf(path), _hf(path)
    prompt, n_new = IDS[:, :5], 14                   # 19 positions: inside Mistral's window of 32
    got = np.asarray(ours.generate(prompt, n_new, temperature=0).data)
    seq = prompt
    for _ in range(n_new):
        seq = np.concatenate([seq, _logits(ours, seq)[:, -1].argmax(-1)[:, None]], 1)
    np.testing.assert_array_equal(got, seq)
    ref.generation_config.eos_token_id = None
    p = torch.from_numpy(prompt)
    with torch.no_grad():
        want = ref.generate(p, attention_mask=torch.ones_like(p), max_new_tokens=n_new, do_sample=False,
                            pad_token_id=0).numpy()
    np.testing.assert_array_equal(got, want)


def _grads(model, ids, targets):
    from minigrad import functional as F
    from minigrad import tensor
    loss = F.cross_entropy(model(ids).reshape(-1, VOCAB), tensor(targets.reshape(-1)), ignore_index=-100)
    loss.backward()
    return {name: p.grad.data for name, p in model.named_parameters()}


def _ref_grads(ref, ids, targets):
    logits = ref(torch.from_numpy(ids)).logits
    torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), torch.from_numpy(targets).reshape(-1),
                                      ignore_index=-100).backward()
    return {name.removeprefix("model."): p.grad.numpy() for name, p in ref.named_parameters()}


@pytest.mark.parametrize("variant", ["all", "qwen2"])
def test_gradients_match_torch(saved, variant):
    """Every parameter's gradient (biases included) of a token cross-entropy through transformers'
    autograd, fp32 and fp64."""
    path = saved(variant)
    targets = np.roll(IDS, -1, axis=1)
    targets[:, -1] = -100
    for dtype, tdtype, rel in ((np.float32, torch.float32, 2e-5), (np.float64, torch.float64, 1e-10)):
        ref = _hf(path, tdtype)
        want = _ref_grads(_float64(ref) if dtype == np.float64 else ref, IDS, targets)
        got = _grads(GPT.from_hf(path, dtype=dtype), IDS, targets)
        assert got.keys() == want.keys()
        assert any(name.endswith(".bias") for name in got)
        for name, g in want.items():
            _close(got[name], g, rel, f"{variant} {np.dtype(dtype)} {name}")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_save_hf_round_trip(saved, variant, tmp_path):
    """from_hf -> save_hf -> transformers: the same architecture, settings and logits."""
    path = saved(variant)
    ours = GPT.from_hf(path)
    ours.save_hf(str(tmp_path))
    ref, back = _hf(path), _hf(str(tmp_path))
    assert type(back) is type(ref)
    for key in ("attention_bias", "mlp_bias", "tie_word_embeddings", "rope_parameters", "sliding_window",
                "num_key_value_heads"):
        assert getattr(back.config, key, None) == getattr(ref.config, key, None), key
    head_dim = [getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads for c in (back.config,
                                                                                               ref.config)]
    assert head_dim[0] == head_dim[1]
    _close(_ref_logits(back, IDS), _ref_logits(ref, IDS), 1e-7)
    again = GPT.from_hf(str(tmp_path))
    assert again.config == ours.config
    assert all(np.array_equal(v.data, again.state_dict()[k].data) for k, v in ours.state_dict().items())


def test_plain_llama_config_is_written_as_before(tmp_path):
    """No new keys for a plain model: config_to_hf's dict and config_from_hf's kwargs are unchanged."""
    cfg = GPTConfig(vocab_size=50, d_model=32, n_layer=1, n_head=4, n_kv_head=2, tie_embeddings=False)
    GPT(cfg).save_hf(str(tmp_path))
    with open(tmp_path / "config.json") as f:
        hf = json.load(f)
    assert not {"rope_scaling", "sliding_window", "use_sliding_window"} & set(hf)
    assert (hf["model_type"], hf["head_dim"], hf["attention_bias"], hf["mlp_bias"]) == (
        "llama", 8, False, False)
    assert set(config_from_hf(hf)) == {"vocab_size", "d_model", "n_layer", "n_head", "n_kv_head",
                                       "ffn_hidden", "max_seq_len", "rope_base", "norm_eps", "tie_embeddings"}


# ----------------------------------------------------------------------------------------------
# the pieces


def test_plain_rope_tables_unchanged_and_scaled_ones_cached_apart():
    from minigrad.ops.rope import rope_tables
    hd, base = 16, 5000.0
    inv = float(base) ** (-np.arange(0, hd // 2, dtype=np.float64) * 2.0 / hd)     # the formula before
    cos, sin = rope_tables(40, hd, base, np.float32)
    angles = np.arange(cos.shape[0], dtype=np.float64)[:, None] * inv
    np.testing.assert_array_equal(cos, np.cos(angles).astype(np.float32))
    np.testing.assert_array_equal(sin, np.sin(angles).astype(np.float32))
    scaling = {k: v for k, v in LLAMA3.items() if k != "rope_theta"}
    scaled = rope_tables(40, hd, base, np.float32, scaling)[0]
    assert scaled is not cos and not np.array_equal(scaled, cos)
    assert rope_tables(40, hd, base, np.float32, dict(scaling))[0] is scaled
    assert rope_tables(40, hd, base, np.float32, DYNAMIC_64)[0] is cos     # plain RoPE within its length


def test_rope_op_takes_the_scaling():
    """F.rope and split_qkv_rope rotate by the scaled frequencies (against a direct numpy rotation)."""
    from minigrad import functional as F
    from minigrad import tensor
    from minigrad.ops.rope import check_rope_scaling, rope_inv_freq, split_qkv_rope
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 6, 16))                 # (B, H, T, hd)
    scaling = dict(LLAMA3)                                  # an HF dict, rope_theta included
    ang = np.arange(4, 10)[:, None] * rope_inv_freq(16, 5000.0, check_rope_scaling(scaling, base=5000.0))
    cos, sin = np.cos(ang), np.sin(ang)
    x1, x2 = x[..., :8], x[..., 8:]
    want = np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    np.testing.assert_allclose(F.rope(tensor(x), 4, 5000.0, scaling=scaling).data, want, rtol=0, atol=1e-14)
    packed = np.concatenate([x, x, x], 1).transpose(0, 2, 1, 3).reshape(1, 6, 3 * 3 * 16)
    q, k, v = split_qkv_rope(tensor(packed), 4, 3, 3, 5000.0, layout="bhtd", scaling=scaling)
    np.testing.assert_allclose(q.data, want, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(q.data, k.data)
    with pytest.raises(ValueError, match="dynamic RoPE scaling beyond"):
        F.rope(tensor(x), 60, scaling=DYNAMIC_64)


def test_lora_on_biased_projections(saved):
    """The packed GEMM + stacked bias equals calling each projection (LoRA dropout active: B = 0, so
    the adapters add nothing and both paths must give the base model's logits)."""
    from minigrad.nn.lora import LoraConfig, apply_lora
    path = saved("all")
    want = _logits(GPT.from_hf(path, dtype=np.float64), IDS)
    model = apply_lora(GPT.from_hf(path, dtype=np.float64),
                       LoraConfig(r=2, lora_dropout=0.5, target_modules="all-linear"))
    model.train()                                           # dropout active: projections called one by one
    _close(_logits(model, IDS), want, 1e-14)
    model.eval()                                            # packed: W + s B A stacked, biases stacked
    _close(_logits(model, IDS), want, 1e-14)


# ----------------------------------------------------------------------------------------------
# what stays unsupported, and checked values


def _config(**over):
    return {"model_type": "llama", **BASE, **over}


@pytest.mark.parametrize("over, field", [
    (dict(rope_parameters={"rope_type": "yarn", "factor": 4.0}), "yarn"),
    (dict(rope_scaling={"rope_type": "longrope", "short_factor": [1.0]}), "rope_scaling"),
    (dict(rope_parameters={**LLAMA3, "partial_rotary_factor": 0.5}), "partial_rotary_factor"),
    (dict(model_type="qwen2", use_sliding_window=True, sliding_window=16), "use_sliding_window"),
    (dict(model_type="gemma"), "model_type"),
])
def test_unsupported_checkpoints_are_rejected(over, field):
    with pytest.raises(UnsupportedCheckpointError, match=field):
        config_from_hf(_config(**over))


@pytest.mark.parametrize("over, field", [
    (dict(rope_parameters={"rope_type": "llama3", "factor": 8.0}), "low_freq_factor"),
    (dict(rope_parameters={"rope_type": "linear", "factor": -2.0}), "factor"),
    (dict(head_dim=7), "head_dim"),
    (dict(model_type="mistral", sliding_window=0), "sliding_window"),
    (dict(attention_bias="yes"), "attention_bias"),
])
def test_bad_values_are_named(over, field):
    with pytest.raises(ValueError, match=field):
        GPTConfig(**config_from_hf(_config(**over)))


def test_config_from_hf_follows_transformers_defaults():
    mistral = config_from_hf(_config(model_type="mistral", max_position_embeddings=10000))
    assert mistral["sliding_window"] == mistral["max_seq_len"] == 4096     # MistralConfig's default window
    assert "sliding_window" not in config_from_hf(_config(model_type="mistral", sliding_window=None))
    # transformers' Mistral has no biases whatever its config says
    assert "attention_bias" not in config_from_hf(_config(model_type="mistral", attention_bias=True))
    windowless = GPTConfig(vocab_size=50, d_model=32, n_layer=1, n_head=4, hf_model_type="mistral")
    hf = config_to_hf(windowless)
    assert hf["sliding_window"] is None and "sliding_window" not in config_from_hf(hf)  # null: no window
    top = config_from_hf(_config(rope_scaling=dict(LLAMA3), original_max_position_embeddings=32))
    assert top["rope_scaling"]["original_max_position_embeddings"] == 32  # transformers: the top level wins


def test_limits_that_keep_the_variants_exact(saved):
    kw = dict(vocab_size=50, d_model=32, n_layer=1, n_head=4)
    with pytest.raises(ValueError, match="sliding_window"):
        GPTConfig(**kw, hf_model_type="mistral", sliding_window=16, max_seq_len=17)
    with pytest.raises(ValueError, match="original_max_position_embeddings"):
        GPTConfig(**kw, max_seq_len=65, rope_scaling=DYNAMIC_64)
    with pytest.raises(ValueError, match="rope_type 'yarn'"):
        GPTConfig(**kw, rope_scaling={"rope_type": "yarn", "factor": 2.0})
    with pytest.raises(ValueError, match="unknown keys"):
        GPTConfig(**kw, rope_scaling={"rope_type": "linear", "factor": 2.0, "beta_fast": 32})
    assert GPTConfig(**kw, rope_scaling={"rope_type": "default", "rope_theta": 1e4}).rope_scaling is None
    with pytest.raises(ValueError, match="Mistral"):
        GPTConfig(**kw, hf_model_type="mistral", attention_bias=True)
    with pytest.raises(ValueError, match="attention_bias=True"):
        GPTConfig(**kw, hf_model_type="qwen2")
    mistral = GPT.from_hf(saved("mistral"))
    with pytest.raises(ValueError, match="max_seq_len 32"):
        mistral.generate(IDS[:, :20], 13)
