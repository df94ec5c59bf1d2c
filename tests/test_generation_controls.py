"""Hugging Face style generation controls of GPT.generate and RWKV7.generate (minigrad.models.sampling):
eos stopping and padding, repetition penalty and min-p against transformers' processors and a numpy
formula, greedy decoding with a penalty against a hand-rolled loop, defaults unchanged, argument errors
and the CLI options."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.models import GPT, RWKV7, GPTConfig, RWKV7Config
from minigrad.models.rwkv7_init import official_init
from minigrad.models.sampling import penalize_repetition, probabilities, sample

pytestmark = pytest.mark.usefixtures("one_thread")   # tiny models (tests/conftest.py)

V = 11
KINDS = ["gpt", "rwkv7"]


def tiny_gpt(dtype=np.float64):
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=V, d_model=8, n_layer=2, n_head=2, n_kv_head=1, ffn_hidden=6,
                          max_seq_len=40), dtype=dtype)
    rng = np.random.default_rng(1)
    for p in model.parameters():         # O(1) weights so every path carries signal
        p.data[...] = rng.standard_normal(p.shape) * (0.5 if p.ndim == 2 else 0.3) + (p.ndim == 1)
    return model


def tiny_rwkv7(dtype=np.float64):
    cfg = RWKV7Config(vocab_size=V, d_model=12, n_layer=3, head_size=4, d_decay_lora=3, d_aaa_lora=5,
                      d_mv_lora=2, d_gate_lora=4, ffn_hidden=20)
    rng = np.random.default_rng(0)
    weights = {k: v + 0.3 * rng.standard_normal(v.shape) for k, v in official_init(cfg, seed=0).items()}
    weights["emb.weight"] *= 3.0
    return RWKV7.from_state_dict({k: v.astype(dtype) for k, v in weights.items()})


@pytest.fixture(scope="module", params=KINDS)
def model(request):
    return tiny_gpt() if request.param == "gpt" else tiny_rwkv7()


def prompt(B=3, T=4):
    return np.random.default_rng(5).integers(0, V, (B, T))


def last_logits(model, seq):
    """The next-token logits of every row by a full forward (no cache, no recurrent stepping)."""
    return model(seq).data[:, -1].astype(np.float64)


def numpy_penalty(logits, ids, penalty):
    """The repetition penalty written out: each token of each row, l / penalty if l > 0 else l * penalty."""
    out = np.array(logits, np.float64)
    for b, row in enumerate(ids):
        for v in set(row.tolist()):
            out[b, v] = out[b, v] / penalty if out[b, v] > 0 else out[b, v] * penalty
    return out


def with_eos(full, T0, eos, pad):
    """What HF returns given `full`, the same generation without eos: each row is `pad` after its first
    eos id, and the result ends once every row has one."""
    new = full[:, T0:].copy()
    hit = np.isin(new, eos)
    first = np.where(hit.any(1), hit.argmax(1), new.shape[1])
    for b, f in enumerate(first):
        new[b, f + 1:] = pad
    return np.concatenate([full[:, :T0], new[:, :first.max() + 1]], 1)


# ---- defaults are the previous behaviour ---------------------------------------------------------
# model.generate(prompt(), 10, temperature=1.3, top_k=6, top_p=0.9, seed=5) before these controls existed
BEFORE = {
    "gpt": [[7, 8, 0, 8, 9, 4, 4, 9, 4, 9, 8, 3, 3, 8], [5, 5, 6, 3, 10, 0, 0, 3, 10, 5, 0, 10, 10, 10],
            [10, 0, 3, 4, 3, 2, 0, 1, 10, 3, 2, 0, 3, 1]],
    "rwkv7": [[7, 8, 0, 8, 8, 4, 7, 9, 7, 10, 9, 5, 5, 7], [5, 5, 6, 3, 9, 1, 0, 5, 7, 6, 2, 10, 9, 10],
              [10, 0, 3, 4, 9, 5, 2, 1, 10, 6, 5, 2, 1, 0]],
}


@pytest.mark.parametrize("kind", KINDS)
def test_defaults_give_the_previous_outputs(kind):
    model = tiny_gpt() if kind == "gpt" else tiny_rwkv7()
    settings = dict(temperature=1.3, top_k=6, top_p=0.9, seed=5)
    out = model.generate(prompt(), 10, **settings).data
    np.testing.assert_array_equal(out, BEFORE[kind])
    explicit = model.generate(prompt(), 10, **settings, eos_token_id=None, pad_token_id=None,
                              repetition_penalty=1.0, min_p=None)
    np.testing.assert_array_equal(explicit.data, out)
    np.testing.assert_array_equal(model.generate(prompt(), 10, **settings, min_p=0.0).data, out)


def test_seeded_sampling_is_a_loop_of_sample_over_full_forward_logits(model):
    seq, rng = prompt(), np.random.default_rng(7)
    for _ in range(8):
        nxt = sample(last_logits(model, seq), 0.9, 5, 0.95, rng, 0.05)
        seq = np.concatenate([seq, nxt[:, None]], 1)
    out = model.generate(prompt(), 8, 0.9, 5, 0.95, 7, min_p=0.05)
    np.testing.assert_array_equal(out.data, seq)
    np.testing.assert_array_equal(model.generate(prompt(), 8, 0.9, 5, 0.95, 7, min_p=0.05).data, seq)


# ---- eos and pad ---------------------------------------------------------------------------------
def finish_steps(new, eos):
    """The step at which each row first samples one of `eos` (len(new[0]) if never)."""
    hit = np.isin(new, eos)
    return np.where(hit.any(1), hit.argmax(1), new.shape[1])


def test_a_row_that_samples_eos_is_padded_and_all_finished_stops_early(model):
    full = model.generate(prompt(2), 12, temperature=1.0, seed=3).data
    new = full[:, 4:]
    # an eos id that one row samples before the other, both before the last step
    steps_of = {v: finish_steps(new, [v]) for v in range(V)}
    eos = next(v for v, s in steps_of.items() if s[0] != s[1] and s.max() < 11)
    steps = steps_of[eos]
    out = model.generate(prompt(2), 12, temperature=1.0, seed=3, eos_token_id=eos).data
    assert out.shape == (2, 4 + steps.max() + 1)                  # stopped early, as HF
    np.testing.assert_array_equal(out, with_eos(full, 4, [eos], eos))
    first = steps.argmin()
    assert out[first, 4 + steps.min()] == eos and (out[first, 4 + steps.min():] == eos).all()  # pad = eos
    pad = (eos + 1) % V
    out = model.generate(prompt(2), 12, temperature=1.0, seed=3, eos_token_id=eos, pad_token_id=pad).data
    np.testing.assert_array_equal(out, with_eos(full, 4, [eos], pad))
    assert (out[first, 4 + steps.min() + 1:] == pad).all()


def test_greedy_eos_list_and_a_row_that_never_finishes(model):
    full = model.generate(prompt(3), 10, temperature=0).data
    new = full[:, 4:]
    never = [v for v in range(V) if not np.isin(new[0], v).any()]    # tokens row 0 never produces
    some = [v for v in range(V) if np.isin(new[1:], v).any() and v in never]
    eos = some[:2] if some else never[:1]
    out = model.generate(prompt(3), 10, temperature=0, eos_token_id=eos, pad_token_id=never[-1]).data
    assert out.shape == full.shape                                 # row 0 runs to max_new_tokens
    np.testing.assert_array_equal(out, with_eos(full, 4, eos, never[-1]))
    np.testing.assert_array_equal(out[0], full[0])
    eos_tuple = model.generate(prompt(3), 10, temperature=0, eos_token_id=tuple(eos), pad_token_id=never[-1])
    np.testing.assert_array_equal(eos_tuple.data, out)


def test_eos_lists_stop_at_any_of_their_ids(model):
    full = model.generate(prompt(2), 12, temperature=1.0, seed=11).data
    a, b = full[0, 5], full[1, 6]                     # each row's 2nd / 3rd new token
    for eos in ([int(a), int(b)], np.array([a, b])):
        out = model.generate(prompt(2), 12, temperature=1.0, seed=11, eos_token_id=eos).data
        np.testing.assert_array_equal(out, with_eos(full, 4, [a, b], int(a)))
        assert out.shape[1] <= 4 + 3                              # both rows done by the third step


def test_eos_in_the_first_step_and_zero_new_tokens(model):
    first = model.generate(prompt(2), 1, temperature=0).data[:, -1]
    out = model.generate(prompt(2), 9, temperature=0, eos_token_id=first.tolist())
    np.testing.assert_array_equal(out.data, np.concatenate([prompt(2), first[:, None]], 1))
    assert model.generate(prompt(2), 0, eos_token_id=3, repetition_penalty=2.0).shape == (2, 4)


# ---- repetition penalty and min-p: the maths -----------------------------------------------------
def random_case(B=4, T=6, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((B, V)) * 3
    logits[:, 0] = 0.0                                # l = 0 is left alone either way
    return logits, rng.integers(0, V, (B, T))


def seen_mask(ids):
    seen = np.zeros((ids.shape[0], V), bool)
    np.put_along_axis(seen, ids, True, -1)
    return seen


@pytest.mark.parametrize("penalty", [1.3, 0.7, 1.0])
def test_repetition_penalty_is_the_numpy_formula(penalty):
    logits, ids = random_case()
    np.testing.assert_array_equal(penalize_repetition(logits, seen_mask(ids), penalty),
                                  numpy_penalty(logits, ids, penalty))


def test_min_p_keeps_tokens_within_a_factor_of_the_top_probability():
    logits, _ = random_case(seed=1)
    for min_p, temperature in ((0.1, 1.0), (0.3, 0.7), (1.0, 1.5)):
        p = np.exp(logits / temperature)
        p /= p.sum(-1, keepdims=True)
        want = np.where(p >= min_p * p.max(-1, keepdims=True), p, 0.0)
        np.testing.assert_allclose(probabilities(logits, temperature, min_p=min_p),
                                   want / want.sum(-1, keepdims=True), rtol=1e-12, atol=0)


@pytest.mark.parametrize("settings", [
    dict(penalty=1.5, temperature=1.0, top_k=None, top_p=None, min_p=0.1),
    dict(penalty=0.8, temperature=0.7, top_k=None, top_p=None, min_p=0.05),
    dict(penalty=1.2, temperature=1.3, top_k=7, top_p=0.9, min_p=0.2),
    dict(penalty=2.0, temperature=0.5, top_k=None, top_p=0.8, min_p=None),
])
def test_controls_match_transformers_processors(settings):
    torch = pytest.importorskip("torch")
    lp = pytest.importorskip("transformers.generation.logits_process")
    s = settings
    procs = [lp.RepetitionPenaltyLogitsProcessor(penalty=float(s["penalty"]))]
    if s["temperature"] != 1.0:
        procs.append(lp.TemperatureLogitsWarper(s["temperature"]))
    if s["top_k"] is not None:
        procs.append(lp.TopKLogitsWarper(s["top_k"]))
    if s["top_p"] is not None:
        procs.append(lp.TopPLogitsWarper(s["top_p"]))
    if s["min_p"] is not None:
        procs.append(lp.MinPLogitsWarper(s["min_p"]))
    for seed in range(3):
        logits, ids = random_case(seed=seed)
        scores = lp.LogitsProcessorList(procs)(torch.from_numpy(ids), torch.from_numpy(logits.copy()))
        want = torch.softmax(scores, -1).numpy()
        penalized = penalize_repetition(logits, seen_mask(ids), s["penalty"])
        hf_penalized = procs[0](torch.from_numpy(ids), torch.from_numpy(logits.copy())).numpy()
        np.testing.assert_array_equal(penalized, hf_penalized)
        got = probabilities(penalized, s["temperature"], s["top_k"], s["top_p"], s["min_p"])
        np.testing.assert_array_equal(got > 0, want > 0)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


# ---- the controls inside generate ----------------------------------------------------------------
@pytest.mark.parametrize("penalty", [1.8, 0.5])
def test_greedy_with_a_penalty_is_a_hand_rolled_greedy_loop(model, penalty):
    seq = prompt()
    for _ in range(10):
        nxt = numpy_penalty(last_logits(model, seq), seq, penalty).argmax(-1)
        seq = np.concatenate([seq, nxt[:, None]], 1)
    out = model.generate(prompt(), 10, temperature=0, repetition_penalty=penalty)
    np.testing.assert_array_equal(out.data, seq)
    assert not np.array_equal(seq, model.generate(prompt(), 10, temperature=0).data)   # it bites


def test_min_p_one_is_greedy_and_min_p_is_reproducible(model):
    greedy = model.generate(prompt(), 8, temperature=0).data
    top_only = model.generate(prompt(), 8, temperature=1.5, seed=1, min_p=1.0)
    np.testing.assert_array_equal(top_only.data, greedy)
    a = model.generate(prompt(), 8, temperature=1.2, seed=2, min_p=0.2, repetition_penalty=1.3)
    b = model.generate(mg.tensor(prompt()), 8, temperature=1.2, seed=2, min_p=0.2, repetition_penalty=1.3)
    np.testing.assert_array_equal(a.data, b.data)


# ---- argument errors -----------------------------------------------------------------------------
BAD = [
    (dict(eos_token_id=V), ValueError, r"eos_token_id must be in \[0, 11\), got 11"),
    (dict(eos_token_id=-1), ValueError, r"eos_token_id must be in \[0, 11\), got -1"),
    (dict(eos_token_id=[2, 12]), ValueError, r"eos_token_id must be in \[0, 11\), got 12"),
    (dict(eos_token_id=[]), ValueError, "eos_token_id must be an int or a non-empty list"),
    (dict(eos_token_id=True), TypeError, "eos_token_id must be an int, got True"),
    (dict(eos_token_id=[1, 2.0]), TypeError, "eos_token_id must be an int, got 2.0"),
    (dict(eos_token_id="2"), TypeError, "eos_token_id must be an int"),
    (dict(eos_token_id=2, pad_token_id=V), ValueError, r"pad_token_id must be in \[0, 11\)"),
    (dict(pad_token_id=1.0), TypeError, "pad_token_id must be an int"),
    (dict(pad_token_id=np.bool_(True)), TypeError, "pad_token_id must be an int"),
    (dict(repetition_penalty=0.0), ValueError, "repetition_penalty must be a finite positive number"),
    (dict(repetition_penalty=-1.2), ValueError, "repetition_penalty must be a finite positive number"),
    (dict(repetition_penalty=float("nan")), ValueError, "repetition_penalty must be a finite positive"),
    (dict(repetition_penalty=float("inf")), ValueError, "repetition_penalty must be a finite positive"),
    (dict(repetition_penalty=None), TypeError, "repetition_penalty must be a number, got None"),
    (dict(repetition_penalty="1.2"), TypeError, "repetition_penalty must be a number"),
    (dict(repetition_penalty=True), TypeError, "repetition_penalty must be a number"),
    (dict(min_p=-0.1), ValueError, r"min_p must be in \[0, 1\] or None, got -0.1"),
    (dict(min_p=1.5), ValueError, r"min_p must be in \[0, 1\]"),
    (dict(min_p=float("nan")), ValueError, r"min_p must be in \[0, 1\]"),
    (dict(min_p="0.1"), TypeError, "min_p must be a number"),
    (dict(min_p=False), TypeError, "min_p must be a number"),
]


@pytest.mark.parametrize("bad, err, match", BAD)
def test_bad_controls_are_named(model, bad, err, match):
    with pytest.raises(err, match="generate: " + match):
        model.generate(prompt(1), 2, **bad)
    with pytest.raises(err, match=match):          # also with nothing to generate
        model.generate(prompt(1), 0, **bad)


def test_the_new_controls_are_keyword_only(model):
    with pytest.raises(TypeError):
        model.generate(prompt(1), 2, 1.0, None, None, 0, 3)
    out = model.generate(prompt(1), 2, 0.0, None, None, 0, eos_token_id=np.int64(3), pad_token_id=np.int32(4),
                         repetition_penalty=np.float32(1.1), min_p=np.float64(0.1))
    assert out.dtype == np.int64 and out.shape[0] == 1


# ---- CLI -----------------------------------------------------------------------------------------
def test_cli_sample_passes_repetition_penalty_and_min_p(tmp_path, capsys):
    from minigrad import io
    from minigrad.__main__ import main
    from minigrad.data.tokenizer import ByteTokenizer

    mg.manual_seed(0)
    net = GPT(GPTConfig(vocab_size=256, d_model=16, n_layer=1, n_head=2, max_seq_len=64))
    for p in net.parameters():
        p.data[...] = np.random.default_rng(2).standard_normal(p.shape) * 0.5 + (p.ndim == 1)
    tok = ByteTokenizer()
    io.save_checkpoint(str(tmp_path), 0, net, tokenizer=tok)
    loaded = io.load_checkpoint(str(tmp_path)).build_model()
    ids = np.asarray(tok.encode("ab"), np.int64)[None, :]
    texts = []
    for penalty in ("1.0", "3.0"):
        assert main(["sample", "--ckpt", str(tmp_path), "--prompt", "ab", "--tokens", "12",
                     "--temperature", "0", "--repetition-penalty", penalty, "--min-p", "0.5"]) == 0
        want = loaded.generate(ids, 12, temperature=0, repetition_penalty=float(penalty)).data[0]
        texts.append(capsys.readouterr().out)
        assert texts[-1] == tok.decode(want) + "\n"
    assert texts[0] != texts[1]
    for extra, match in ((["--repetition-penalty", "0"], "repetition_penalty must be a finite positive"),
                         (["--min-p", "1.5"], r"min_p must be in [0, 1]")):
        assert main(["sample", "--ckpt", str(tmp_path), "--tokens", "0", *extra]) == 1
        err = capsys.readouterr().err
        assert err.startswith("minigrad sample: error: generate: ") and match in err, err


def test_a_zero_draw_never_picks_a_filtered_token():
    """rng.random() may return exactly 0.0: the draw must still land on a token left by top-k."""
    class ZeroRng:
        def random(self, shape):
            return np.zeros(shape)

    logits = np.array([[0.0, 5.0, 1.0], [3.0, -1.0, 4.0]])
    assert sample(logits, 1.0, top_k=1, rng=ZeroRng()).tolist() == [1, 2]


@pytest.mark.parametrize("kind", KINDS)
def test_generate_text_stops_at_eos_through_its_windows(kind):
    """train.generate_ids passes the controls on, and an eos ends the text even across GPT's
    sliding windows (window 6 < the tokens asked for)."""
    from minigrad.train import generate_ids

    model = tiny_gpt() if kind == "gpt" else tiny_rwkv7()
    ids = prompt(1, 3)[0]
    free = generate_ids(model, ids, 20, temperature=0, window=6)
    eos = int(free[8])           # a token greedy decoding reaches at position 8 (the 6th new one)
    stopped = generate_ids(model, ids, 20, temperature=0, window=6, eos_token_id=eos)
    first = 3 + int(np.argmax(free[3:] == eos))
    assert stopped.tolist() == free[:first + 1].tolist()


def test_generate_text_stops_at_an_eos_on_a_windows_last_token():
    """An eos sampled as the last token of a sliding window (position 7 of window 8, after a
    3-token prompt) ends the text too."""
    from minigrad.train import generate_ids

    model = tiny_gpt()
    rng = np.random.default_rng(0)
    for _ in range(200):        # a prompt whose greedy text first shows its token 7 at 7
        ids = rng.integers(0, V, 3)
        free = generate_ids(model, ids, 30, temperature=0, window=8)
        if free[7] not in free[3:7] and free[7] in free[8:]:
            break
    else:
        pytest.fail("no prompt puts a new token at the window's end")
    stopped = generate_ids(model, ids, 30, temperature=0, window=8, eos_token_id=[int(free[7])])
    assert stopped.tolist() == free[:8].tolist()


def test_suppress_tokens_are_never_sampled_and_are_checked():
    """suppress_tokens (HF's SuppressTokensLogitsProcessor): those ids get -inf logits."""
    from minigrad.models.sampling import Sampler

    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4, 10))
    logits[:, 7] = 50.0                          # the greedy pick, unless suppressed
    for suppress in ([7, 9], range(7, 10), np.array([7, 9])):
        for temperature in (0, 1.0):
            s = Sampler(np.zeros((4, 1), np.int64), 20, 10, temperature, seed=1, suppress_tokens=suppress)
            while s.push(logits):
                pass
            assert not np.isin(s.sequences()[:, 1:], [7, 9]).any()
    kept = logits.copy()
    Sampler(np.zeros((4, 1), np.int64), 1, 10, 0, suppress_tokens=[7]).push(kept)
    assert np.array_equal(kept, logits)          # the caller's logits are not modified
    for bad, err in (([10], ValueError), ([-1], ValueError), (range(10), ValueError), ([True], TypeError),
                     (7, TypeError), (np.array([1.5]), TypeError)):
        with pytest.raises(err, match="suppress_tokens"):
            Sampler(np.zeros((1, 1), np.int64), 1, 10, suppress_tokens=bad)
