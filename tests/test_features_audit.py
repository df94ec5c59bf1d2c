"""Regressions found by an audit of LoRA, the generation controls, eval, the profiler and gemm_batch:
each test is one bug that was fixed (tiny models, a few seconds in all)."""
import threading

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, profiler
from minigrad.io import load_safetensors, save_safetensors
from minigrad.models import GPT, GPTConfig
from minigrad.nn.lora import lora_layers

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_gpt(seed=0):
    mg.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=11, d_model=8, n_layer=2, n_head=2, ffn_hidden=6, max_seq_len=16,
                          tie_embeddings=False), dtype=np.float64)
    rng = np.random.default_rng(seed + 1)
    for p in model.parameters():
        p.data[...] = rng.standard_normal(p.shape) * 0.5 + (p.ndim == 1)
    return model


def ids(B=2, T=5, seed=0):
    return np.random.default_rng(seed).integers(0, 11, (B, T))


def logits(model, x):
    with mg.no_grad():
        return model(x).data


# ---- LoRA ------------------------------------------------------------------------------------------
def test_hooks_on_a_wrapped_linear_keep_firing_as_on_pefts_base_layer():
    """A forward hook registered on o_proj before apply_lora stopped firing (the LoRA layer never
    called the Linear). PEFT calls it as base_layer: the hook sees the base output, W x, and what it
    returns is what the LoRA branch is added to."""
    model = tiny_gpt()
    x = ids()
    seen = []
    o_proj = model.layers[0].self_attn.o_proj
    o_proj.register_forward_hook(lambda mod, args, out: seen.append((args[0].data, out.data)))
    model(x)
    nn.apply_lora(model, target_modules=["o_proj", "down_proj"], r=2, init_lora_weights=False)
    seen.clear()
    adapted = logits(model, x)
    assert len(seen) == 1
    inp, out = seen[0]
    np.testing.assert_allclose(out, inp @ o_proj.weight.data.T, rtol=1e-12, atol=1e-12)   # base only
    with o_proj.register_forward_hook(lambda mod, args, out: out * 0):     # replaces the base output
        changed = logits(model, x)
    assert np.abs(changed - adapted).max() > 1e-3
    nn.merge_lora(model)
    seen.clear()
    np.testing.assert_allclose(logits(model, x), adapted, rtol=1e-10, atol=1e-10)
    assert len(seen) == 1                                                  # and after merging


def test_lora_layers_take_the_models_mode():
    """apply_lora on a model in eval mode made LoRA layers in training mode: dropout was active
    (different logits on every call) while model.training was False; merge / unload gave back
    Linear layers in the mode they had before."""
    model = tiny_gpt().eval()
    nn.apply_lora(model, target_modules=["q_proj", "o_proj", "lm_head"], r=2, lora_dropout=0.5,
                  init_lora_weights=False)
    x = ids()
    assert not any(m.training for m in model.modules())
    np.testing.assert_array_equal(logits(model, x), logits(model, x))
    model.train()
    assert all(m.training for m in model.modules())
    model.eval()
    nn.merge_lora(model)
    assert not any(m.training for m in model.modules())


def test_load_adapter_checks_dtypes_before_changing_the_model(tmp_path):
    """An integer tensor in adapter_model.safetensors raised only after the model had been wrapped
    (random A, zero B), so that a second try said "already has LoRA layers"."""
    model = nn.apply_lora(tiny_gpt(), target_modules=["q_proj"], r=2, init_lora_weights=False)
    nn.save_adapter(model, str(tmp_path))
    file = tmp_path / "adapter_model.safetensors"
    tensors, meta = load_safetensors(str(file))
    key = "base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"
    save_safetensors(str(file), {**tensors, key: tensors[key].astype(np.int32)}, meta)
    fresh = tiny_gpt()
    with pytest.raises(TypeError, match=r"load_adapter: .*layers\.1\.self_attn\.q_proj\.lora_A\.weight "
                                        "must be floating point, got int32"):
        nn.load_adapter(fresh, str(tmp_path))
    assert not lora_layers(fresh) and all(type(m) is not nn.LoraLinear for m in fresh.modules())
    save_safetensors(str(file), tensors, meta)
    x = ids()
    np.testing.assert_array_equal(logits(nn.load_adapter(fresh, str(tmp_path)), x), logits(model, x))


def test_load_adapter_wraps_exactly_the_files_modules(tmp_path):
    """load_adapter matched the file's module names as a PEFT target list, where "0" also selects a
    nested "1.0": our own adapter of a Sequential's first layer did not load back (and left the model
    wrapped)."""
    def make():
        mg.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 4), nn.ReLU()), nn.Linear(4, 2))

    model = nn.apply_lora(make(), target_modules="0", r=2, init_lora_weights=False)   # a regex: "0" only
    assert [n for n, _ in lora_layers(model)] == ["0"]
    nn.save_adapter(model, str(tmp_path))
    fresh = nn.load_adapter(make(), str(tmp_path))
    assert [n for n, _ in lora_layers(fresh)] == ["0"]
    x = mg.tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
    with mg.no_grad():
        np.testing.assert_array_equal(fresh(x).data, model(x).data)


# ---- profiler --------------------------------------------------------------------------------------
def test_table_row_limit_minus_one_is_every_row_as_in_torch():
    """table(row_limit=-1), torch's "no limit", dropped the last row (a Python slice)."""
    with profiler.profile() as prof:
        a = mg.tensor(np.ones(3), requires_grad=True)
        ((a + 1) * 2).sum().backward()
    rows = len(prof.key_averages())
    assert rows >= 4
    for limit in (-1, None):
        assert prof.table(row_limit=limit).splitlines()[-1].startswith(f"{rows} of {rows} rows")
    assert prof.table(row_limit=2).splitlines()[-1].startswith(f"2 of {rows} rows")


def test_one_record_function_entered_by_two_threads():
    """A record_function instance shared by threads kept one stack of open blocks: a thread leaving
    its block popped the other thread's entry, both regions were lost and each profile's nesting
    was left unbalanced."""
    region = profiler.record_function("shared")
    entered, both_in = threading.Event(), threading.Event()
    events = {}

    def first():
        with profiler.profile() as prof:
            with region:
                entered.set()
                both_in.wait(5)
                mg.tensor(np.ones(3)) + 1
            mg.tensor(np.ones(3)) * 2
        events[0] = [(e.name, e.depth) for e in prof.events]

    def second():
        with profiler.profile() as prof:
            entered.wait(5)
            with region:
                both_in.set()
                threading.Event().wait(0.05)      # the first thread leaves its block first
                mg.tensor(np.ones(3)) + 1
            mg.tensor(np.ones(3)) * 2
        events[1] = [(e.name, e.depth) for e in prof.events]

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got in events.values():
        assert got == [("Add", 1), ("shared", 0), ("Mul", 0)]


def test_eval_json_is_strict_json():
    """A perplexity that overflows (loss >= 700) is printed as null, not Infinity."""
    import json

    from minigrad.__main__ import _strict_json

    text = _strict_json({"loss": 800.0, "perplexity": float("inf"), "tokens": 3})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard {c}")) == {
        "loss": 800.0, "perplexity": None, "tokens": 3}


def test_load_lora_state_dict_takes_torch_bf16_tensors():
    torch = pytest.importorskip("torch")
    from minigrad.nn.lora import _float_array

    t = torch.tensor([[1.5, -2.0]], dtype=torch.bfloat16)
    arr = _float_array(t, "x.lora_A.weight", np.float32)
    assert arr.dtype == np.float32 and arr.tolist() == [[1.5, -2.0]]
