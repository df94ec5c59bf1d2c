"""LoRA (minigrad/nn/lora.py) on the fused GPT and RWKV-7: zero init, gradients (fp64 gradcheck of A
and B only), the fused paths against the explicit formula, merge / unload / disable, dropout, generate,
adapter state dicts and PEFT directories (against PEFT itself when installed), bad input."""
import json

import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F
from minigrad import nn
from minigrad.autograd import gradcheck
from minigrad.io import load_safetensors
from minigrad.models import GPT, RWKV7, GPTConfig, RWKV7Config
from minigrad.nn.lora import lora_layers

pytestmark = pytest.mark.usefixtures("one_thread")   # tiny models (tests/conftest.py)

GPT_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"]
RWKV_TARGETS = ["receptance", "key", "value", "output", "head"]     # att's four, ffn's key/value, head
RWKV_TINY = dict(vocab_size=7, d_model=8, n_layer=2, head_size=4, d_decay_lora=3, d_aaa_lora=4,
                 d_mv_lora=2, d_gate_lora=5, ffn_hidden=12)


def tiny_gpt(tied=False, dtype=np.float64, seed=0):
    """O(1) random weights, so that every path carries signal."""
    mg.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=11, d_model=8, n_layer=2, n_head=2, n_kv_head=1, ffn_hidden=6,
                          max_seq_len=16, tie_embeddings=tied), dtype=dtype)
    rng = np.random.default_rng(seed + 1)
    for p in model.parameters():
        p.data[...] = rng.standard_normal(p.shape) * (0.5 if p.ndim == 2 else 0.3) + (p.ndim == 1)
    return model


def tiny_rwkv(dtype=np.float64, seed=0):
    cfg = RWKV7Config(**RWKV_TINY)
    model = RWKV7(cfg, dtype=dtype, seed=seed)
    rng = np.random.default_rng(seed + 1)
    with mg.no_grad():
        for p in model.parameters():          # official init zeroes output projections: add noise
            p.data[...] += 0.3 * rng.standard_normal(p.shape)
    return model


def ids(B, T, V, seed=0):
    return np.random.default_rng(seed).integers(0, V, (B, T))


def logits(model, x):
    with mg.no_grad():
        return model(x).data


def randomise_adapters(model, seed=2, scale=0.5):
    rng = np.random.default_rng(seed)
    for _, layer in lora_layers(model):
        for p in (layer.lora_A.weight, layer.lora_B.weight):
            p.data[...] = scale * rng.standard_normal(p.shape)


def lm_loss(model, x, y):
    out = model(x)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def numpy_merged(model):
    """The base state dict with every LoRA layer's W replaced by W + s B A computed in numpy."""
    state = {k: v for k, v in model.state_dict().items() if ".lora_" not in k}
    for name, layer in lora_layers(model):
        state[f"{name}.weight"] = layer.weight.data + layer.scaling * (layer.lora_B.weight.data @
                                                                        layer.lora_A.weight.data)
    return state


def models():
    """(name, fresh model, targets, token ids) for both families."""
    return [("gpt", tiny_gpt(), GPT_TARGETS, ids(2, 6, 11)),
            ("rwkv7", tiny_rwkv(), RWKV_TARGETS, ids(2, 6, 7))]


# ---- wrapping -------------------------------------------------------------------------------------
@pytest.mark.parametrize("tied", [True, False])
def test_zero_init_leaves_gpt_logits_unchanged_and_freezes_the_base(tied, capsys):
    model = tiny_gpt(tied)
    x = ids(2, 7, 11)
    before = logits(model, x)
    base = {n for n, _ in model.named_parameters()}
    nn.get_peft_model(model, nn.LoraConfig(r=4, lora_alpha=8, target_modules=("q_proj", "v_proj")))
    np.testing.assert_array_equal(logits(model, x), before)
    q = model.layers[0].self_attn.q_proj
    assert isinstance(q, nn.LoraLinear) and q.scaling == 2.0
    assert q.lora_A.weight.shape == (4, 8) and q.lora_B.weight.shape == (8, 4)
    assert np.all(q.lora_B.weight.data == 0) and np.abs(q.lora_A.weight.data).max() <= 1 / np.sqrt(8)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {f"layers.{i}.self_attn.{m}_proj.lora_{ab}.weight"
                         for i in range(2) for m in "qv" for ab in "AB"}
    assert base <= {n for n, _ in model.named_parameters()}          # the base keys do not change
    assert nn.print_trainable_parameters(model) == (2 * (32 + 32 + 32 + 16), model.num_parameters())
    assert capsys.readouterr().out.startswith("trainable params: 224 || all params: ")


def test_zero_init_leaves_rwkv7_logits_unchanged():
    model = tiny_rwkv()
    x = ids(2, 5, 7)
    before = logits(model, x)
    nn.apply_lora(model, target_modules=RWKV_TARGETS, r=2)
    assert len(lora_layers(model)) == 2 * 6 + 1
    np.testing.assert_array_equal(logits(model, x), before)


def test_target_matching_follows_peft():
    model = nn.apply_lora(tiny_gpt(), target_modules=["layers.1.self_attn.q_proj", "down_proj"])
    assert [n for n, _ in lora_layers(model)] == ["layers.0.mlp.down_proj", "layers.1.self_attn.q_proj",
                                                  "layers.1.mlp.down_proj"]
    model = nn.apply_lora(tiny_gpt(), target_modules=r"layers\.0\..*_proj")       # a regex: full match
    assert len(lora_layers(model)) == 7
    model = nn.apply_lora(tiny_gpt(), target_modules="all-linear")                  # all but lm_head
    assert len(lora_layers(model)) == 14 and type(model.lm_head) is nn.Linear


# ---- gradients ------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["gpt", "rwkv7"])
def test_only_adapters_get_gradients_and_they_pass_gradcheck(family):
    """fp64 central differences of a cross-entropy w.r.t. every element of every A and B, through
    the fused paths (packed q/k/v and gate/up; RWKV-7's time mix and channel mix) and the modules."""
    name, model, targets, x = dict((m[0], m) for m in models())[family]
    nn.apply_lora(model, target_modules=targets, r=2, lora_alpha=3, init_lora_weights=False)
    y = np.roll(x, -1, 1)
    lm_loss(model, x, y).backward()
    for n, p in model.named_parameters():
        assert (p.grad is not None) is (".lora_" in n), n
    adapters = [p for n, p in model.named_parameters() if p.requires_grad]
    assert gradcheck(lambda *_: lm_loss(model, x, y), adapters, eps=1e-6, atol=1e-9, rtol=1e-6)


# ---- the fused paths compute the formula ---------------------------------------------------------
def test_gpt_packed_projection_equals_the_explicit_formula():
    model = nn.apply_lora(tiny_gpt(), target_modules=["q_proj", "v_proj", "up_proj"], r=3, lora_alpha=5)
    randomise_adapters(model)
    h = np.random.default_rng(3).standard_normal((2, 5, 8))
    for block, names in ((model.layers[1].self_attn, ("q_proj", "k_proj", "v_proj")),
                         (model.layers[0].mlp, ("gate_proj", "up_proj"))):
        want = []
        for n in names:
            layer = getattr(block, n)
            out = h @ layer.weight.data.T
            if isinstance(layer, nn.LoraLinear):
                out = out + (h @ layer.lora_A.weight.data.T) @ layer.lora_B.weight.data.T * (5 / 3)
            want.append(out)
        np.testing.assert_allclose(block.project(mg.tensor(h)).data, np.concatenate(want, -1),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("family", ["gpt", "rwkv7"])
def test_model_equals_plain_model_with_w_plus_sba(family):
    """Logits through every fused read (packed weights, RWKV-7's param dicts, the head) equal those
    of a plain model holding W + s B A computed in numpy."""
    name, model, targets, x = dict((m[0], m) for m in models())[family]
    nn.apply_lora(model, target_modules=targets, r=3, lora_alpha=4, use_rslora=True)
    randomise_adapters(model)
    plain = tiny_gpt() if family == "gpt" else tiny_rwkv()
    plain.load_state_dict(numpy_merged(model))
    np.testing.assert_allclose(logits(model, x), logits(plain, x), rtol=1e-10, atol=1e-10)
    assert lora_layers(model)[0][1].scaling == pytest.approx(4 / np.sqrt(3))          # rsLoRA


@pytest.mark.parametrize("family", ["gpt", "rwkv7"])
def test_merge_unload_and_disable(family):
    name, model, targets, x = dict((m[0], m) for m in models())[family]
    base = logits(model, x)
    nn.apply_lora(model, target_modules=targets, r=2)
    randomise_adapters(model)
    adapted = logits(model, x)
    assert np.abs(adapted - base).max() > 1e-2
    with nn.disable_adapters(model):
        np.testing.assert_array_equal(logits(model, x), base)
    np.testing.assert_array_equal(logits(model, x), adapted)
    first = lora_layers(model)[0][0]
    weight = model.get_parameter(f"{first}.weight")
    nn.merge_lora(model)
    assert not lora_layers(model) and all(type(m) is not nn.LoraLinear for m in model.modules())
    assert type(model.get_submodule(first)) is nn.Linear and model.get_parameter(f"{first}.weight") is weight
    np.testing.assert_allclose(logits(model, x), adapted, rtol=1e-12, atol=1e-12)
    assert set(model.state_dict()) == set((tiny_gpt() if family == "gpt" else tiny_rwkv()).state_dict())
    other = dict((m[0], m) for m in models())[family][1]
    nn.apply_lora(other, target_modules=targets, r=2)
    randomise_adapters(other)
    np.testing.assert_array_equal(logits(nn.unload_lora(other), x), base)


# ---- dropout --------------------------------------------------------------------------------------
def test_gpt_dropout_calls_the_projections_and_acts_in_training_only():
    model = nn.apply_lora(tiny_gpt(), target_modules=GPT_TARGETS, r=2, lora_dropout=0.5)
    x = ids(2, 6, 11)
    base = logits(model, x)
    mg.manual_seed(1)
    np.testing.assert_allclose(logits(model, x), base, rtol=1e-12, atol=1e-12)   # B = 0: base only
    randomise_adapters(model)
    model.eval()
    evaluated = logits(model, x)
    clean = nn.apply_lora(tiny_gpt(), target_modules=GPT_TARGETS, r=2)
    nn.load_lora_state_dict(clean, nn.lora_state_dict(model))
    np.testing.assert_array_equal(evaluated, logits(clean, x))          # eval: no dropout anywhere
    model.train()
    mg.manual_seed(1)
    first = logits(model, x)
    mg.manual_seed(1)
    np.testing.assert_array_equal(logits(model, x), first)              # masks from the global RNG
    assert np.abs(first - evaluated).max() > 1e-3
    # with dropout active the packed path calls q/k/v as modules (their hooks fire); in eval it
    # multiplies by the stacked W + s B A
    calls = []
    with model.layers[0].self_attn.q_proj.register_forward_hook(lambda *a: calls.append(model.training)):
        model(x)
        model.eval()
        model(x)
    assert calls == [True]


def test_gpt_dropout_under_gradient_checkpointing_gives_the_same_gradients():
    x = ids(2, 6, 11)
    grads = []
    for ckpt in (False, True):
        model = nn.apply_lora(tiny_gpt(), target_modules=GPT_TARGETS, r=2, lora_dropout=0.3,
                              init_lora_weights=False)
        if ckpt:
            model.gradient_checkpointing_enable()
        mg.manual_seed(5)
        lm_loss(model, x, np.roll(x, 1, 1)).backward()
        grads.append([p.grad.data for p in model.parameters() if p.requires_grad])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_rwkv7_dropout_on_fused_projections_raises_in_training():
    model = nn.apply_lora(tiny_rwkv(), target_modules=["receptance", "head"], lora_dropout=0.1)
    x = ids(1, 4, 7)
    with pytest.raises(RuntimeError, match=r"blocks\.0\.att\.receptance: lora_dropout=0\.1 is active"):
        model(x)
    out = model.generate(x, 4, temperature=0).data                       # generate runs in eval mode
    assert model.training
    model.eval()
    model(x)                                                              # eval: exact, no dropout
    np.testing.assert_array_equal(model.generate(x, 4, temperature=0).data, out)
    head_only = nn.apply_lora(tiny_rwkv(), target_modules=["head"], lora_dropout=0.1)
    lm_loss(head_only, x, x).backward()                                   # the head is called: fine


# ---- generation ------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["gpt", "rwkv7"])
def test_generate_with_adapters_equals_merged_generate(family):
    name, model, targets, x = dict((m[0], m) for m in models())[family]
    model = model.to(np.float32) if family == "gpt" else model
    nn.apply_lora(model, target_modules=targets, r=2)
    randomise_adapters(model)
    prompt = x[:, :3]
    out = model.generate(prompt, 8, temperature=0).data
    assert model.training and all(not layer._frozen for _, layer in lora_layers(model))   # released
    np.testing.assert_array_equal(nn.merge_lora(model).generate(prompt, 8, temperature=0).data, out)


# ---- saving and loading ----------------------------------------------------------------------------
def test_adapter_state_dict_round_trip():
    model = nn.apply_lora(tiny_gpt(), target_modules=["q_proj", "o_proj"], r=2)
    randomise_adapters(model)
    sd = nn.lora_state_dict(model)
    assert list(sd)[:2] == [f"layers.0.self_attn.q_proj.lora_{ab}.weight" for ab in "AB"]
    assert len(sd) == 8 and all(".lora_" in k for k in sd)
    other = nn.apply_lora(tiny_gpt(), target_modules=["q_proj", "o_proj"], r=2)
    nn.load_lora_state_dict(other, {k: mg.tensor(v) for k, v in sd.items()})
    x = ids(2, 5, 11)
    np.testing.assert_array_equal(logits(other, x), logits(model, x))


@pytest.mark.parametrize("family", ["gpt", "rwkv7"])
def test_adapter_directory_round_trip_with_peft_names(tmp_path, family):
    name, model, targets, x = dict((m[0], m) for m in models())[family]
    nn.apply_lora(model, target_modules=targets[:3], r=2, lora_alpha=7, lora_dropout=0.05)
    randomise_adapters(model)
    nn.save_adapter(model, str(tmp_path))
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    assert [config[k] for k in ("peft_type", "r", "lora_alpha", "lora_dropout")] == ["LORA", 2, 7, 0.05]
    assert config["target_modules"] == sorted(targets[:3])
    keys = set(load_safetensors(str(tmp_path / "adapter_model.safetensors"))[0])
    first = ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" if family == "gpt"
             else "base_model.model.blocks.0.att.receptance.lora_A.weight")
    assert first in keys and len(keys) == 2 * len(lora_layers(model))
    fresh = tiny_gpt() if family == "gpt" else tiny_rwkv()
    nn.load_adapter(fresh, str(tmp_path))
    assert not any(p.requires_grad for p in fresh.parameters())        # PEFT's is_trainable=False
    model.eval(), fresh.eval()                                          # lora_dropout 0.05
    np.testing.assert_array_equal(logits(fresh, x), logits(model, x))
    trainable = nn.load_adapter(tiny_gpt() if family == "gpt" else tiny_rwkv(), str(tmp_path),
                                is_trainable=True)
    assert {n for n, p in trainable.named_parameters() if p.requires_grad} == set(nn.lora_state_dict(model))


def test_lora_training_reduces_loss_and_leaves_base_weights_bit_identical():
    model = tiny_gpt(dtype=np.float32)
    base = {k: v.copy() for k, v in model.state_dict().items()}
    nn.apply_lora(model, target_modules=GPT_TARGETS, r=4, lora_alpha=8)
    opt = mg.optim.AdamW(model.parameters(), lr=2e-2, weight_decay=0.1)     # frozen ones get no grad
    x = ids(4, 12, 11, seed=7)
    y = np.roll(x, -1, 1)
    losses = []
    for _ in range(8):
        loss = lm_loss(model, x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.1, losses
    after = model.state_dict()
    for k, v in base.items():
        np.testing.assert_array_equal(after[k], v, err_msg=k)


# ---- bad input ---------------------------------------------------------------------------------------
def test_clear_errors(tmp_path):
    with pytest.raises(ValueError, match=r"target 'q_prj' matches no Linear layer of GPT; its Linear layers "
                                         r"are named \['down_proj', 'gate_proj', 'k_proj', 'lm_head'"):
        nn.apply_lora(tiny_gpt(), target_modules=["q_proj", "q_prj"])
    with pytest.raises(ValueError, match=r"names layers\.0\.mlp \(LlamaMLP\).*nn\.Linear layers only"):
        nn.apply_lora(tiny_gpt(), target_modules=["mlp"])
    with pytest.raises(ValueError, match="r must be an int >= 1, got 0"):
        nn.LoraConfig(r=0)
    with pytest.raises(TypeError, match="r must be an int"):
        nn.LoraConfig(r=2.5)
    for alpha in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="lora_alpha must be finite"):
            nn.LoraConfig(lora_alpha=alpha)
    with pytest.raises(ValueError, match=r"lora_dropout must be in \[0, 1\)"):
        nn.LoraConfig(lora_dropout=1.0)
    with pytest.raises(ValueError, match="bias='all' is not supported"):
        nn.LoraConfig(bias="all")
    with pytest.raises(ValueError, match="target_modules must be non-empty names"):
        nn.LoraConfig(target_modules=[])
    model = nn.apply_lora(tiny_gpt())
    with pytest.raises(ValueError, match="already has LoRA layers"):
        nn.apply_lora(model)
    with pytest.raises(TypeError, match="not both"):
        nn.apply_lora(tiny_gpt(), nn.LoraConfig(), r=4)
    # mismatched shapes: another r, another model
    sd = nn.lora_state_dict(model)
    other = nn.apply_lora(tiny_gpt(), r=4)
    with pytest.raises(ValueError, match=r"q_proj\.lora_A\.weight: \(8, 8\) vs the model's \(4, 8\)"):
        nn.load_lora_state_dict(other, sd)
    with pytest.raises(ValueError, match="missing.*unexpected"):
        nn.load_lora_state_dict(other, {"q.lora_A.weight": sd["layers.0.self_attn.q_proj.lora_A.weight"]})
    with pytest.raises(ValueError, match="has no LoRA layers"):
        nn.load_lora_state_dict(tiny_gpt(), sd)
    nn.save_adapter(model, str(tmp_path))
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    (tmp_path / "adapter_config.json").write_text(json.dumps({**config, "r": 4}))
    fresh = tiny_gpt()
    with pytest.raises(ValueError, match=r"mismatch with r=4.*lora_A\.weight \(8, 8\), expected \(4, 8\)"):
        nn.load_adapter(fresh, str(tmp_path))
    assert not lora_layers(fresh)                                           # nothing changed
    (tmp_path / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    with pytest.raises(ValueError, match=r"sets \['use_dora'\], which minigrad's LoRA does not implement"):
        nn.load_adapter(fresh, str(tmp_path))
    (tmp_path / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="not Linear layers of RWKV7"):
        nn.load_adapter(tiny_rwkv(), str(tmp_path))
    with pytest.raises(ValueError, match="load_adapter: GPT already has LoRA layers"):
        nn.load_adapter(model, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        nn.load_adapter(fresh, str(tmp_path / "nowhere"))


# ---- Hugging Face PEFT -------------------------------------------------------------------------------
def _hf_stack():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    torch.set_num_threads(1)
    return torch, transformers, peft


def _hf_llama(tied, seed=0):
    torch, transformers, _ = _hf_stack()
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                   tie_word_embeddings=tied, initializer_range=0.2)
    return transformers.LlamaForCausalLM(cfg).eval()


def _hf_logits(model, x):
    torch, _, _ = _hf_stack()
    with torch.no_grad():
        return model(torch.from_numpy(x)).logits.float().numpy()


PEFT_CASES = [(False, dict(r=4, lora_alpha=12, use_rslora=True, target_modules=GPT_TARGETS)),
              (True, dict(r=2, lora_alpha=16, target_modules=["q_proj", "v_proj"]))]


@pytest.mark.parametrize("tied, lora", PEFT_CASES)
def test_peft_adapter_loads_with_the_same_logits(tmp_path, tied, lora):
    """transformers + PEFT (random non-zero A and B) -> save_pretrained -> GPT.from_hf + load_adapter."""
    _, _, peft = _hf_stack()
    hf = _hf_llama(tied)
    hf.save_pretrained(str(tmp_path / "base"))
    config = peft.LoraConfig(init_lora_weights=False, task_type="CAUSAL_LM", **lora)
    ref = peft.get_peft_model(hf, config).eval()
    ref.save_pretrained(str(tmp_path / "adapter"))
    ours = nn.load_adapter(GPT.from_hf(str(tmp_path / "base")), str(tmp_path / "adapter"))
    theirs = {n: m for n, m in ref.named_modules() if isinstance(m, peft.tuners.lora.LoraLayer)}
    assert len(lora_layers(ours)) == len(theirs)
    for name, layer in lora_layers(ours):                                 # s B A, PEFT's scaling
        hf_name = f"base_model.model.{'' if name == 'lm_head' else 'model.'}{name}"
        delta = theirs[hf_name].get_delta_weight("default").detach().numpy()
        np.testing.assert_allclose(layer.delta_weight().data, delta, rtol=1e-6, atol=1e-7)
    x = ids(2, 9, 32)
    np.testing.assert_allclose(logits(ours, x), _hf_logits(ref, x), rtol=0, atol=5e-5)


@pytest.mark.parametrize("tied, lora", PEFT_CASES)
def test_our_adapter_loads_in_peft_with_the_same_logits(tmp_path, tied, lora):
    _, transformers, peft = _hf_stack()
    _hf_llama(tied).save_pretrained(str(tmp_path / "base"))
    ours = nn.apply_lora(GPT.from_hf(str(tmp_path / "base")), init_lora_weights=False, **lora)
    nn.save_adapter(ours, str(tmp_path / "adapter"))
    base = transformers.LlamaForCausalLM.from_pretrained(str(tmp_path / "base"))
    ref = peft.PeftModel.from_pretrained(base, str(tmp_path / "adapter")).eval()
    x = ids(2, 9, 32, seed=3)
    np.testing.assert_allclose(_hf_logits(ref, x), logits(ours, x), rtol=0, atol=5e-5)
    ref.save_pretrained(str(tmp_path / "resaved"))                     # PEFT's own names for them
    theirs = load_safetensors(str(tmp_path / "resaved" / "adapter_model.safetensors"))[0]
    mine = load_safetensors(str(tmp_path / "adapter" / "adapter_model.safetensors"))[0]
    assert set(mine) == {k for k in theirs if ".base_layer." not in k}


@pytest.mark.parametrize("family", ["gpt", "rwkv7"])
@pytest.mark.parametrize("disabled", [False, True])
def test_saving_to_adapter_free_formats_folds_live_adapters(family, disabled, tmp_path):
    """save_hf (GPT) / save_pretrained (RWKV-7, .pth) of a model with unmerged adapters write what the
    model computes (W + s B A, W while disabled) under the plain names, and leave the adapters on."""
    _, model, targets, x = dict((m[0], m) for m in models())[family]
    nn.apply_lora(model, target_modules=targets, r=2)
    randomise_adapters(model)
    with nn.disable_adapters(model) if disabled else nn.disable_adapters(nn.Linear(1, 1)):
        want = logits(model, x)
        if family == "gpt":
            loaded = GPT.from_hf(model.save_hf(str(tmp_path / "hf")), dtype=np.float64)
        else:
            loaded = RWKV7.from_pretrained(model.save_pretrained(str(tmp_path / "w.pth")), dtype=np.float64)
    np.testing.assert_allclose(logits(loaded, x), want, rtol=1e-10, atol=1e-10)
    assert lora_layers(model) and not any("lora" in k for k in loaded.state_dict())
    assert all(k in model.state_dict() for k in nn.lora_state_dict(model))
