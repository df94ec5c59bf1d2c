"""Regression tests for the bugs the fuzzers found (each names the case that exposed it).

The crash-prone ones run in a subprocess: before the fix they took the interpreter down.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_isolated(code):
    """Run `code` in a fresh interpreter; return (exit code, stdout + stderr)."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_raw_kernel_with_none_for_an_array_raises_instead_of_segfaulting():
    # fuzz case: rms_norm.rms_norm_forward arg1 none (SIGSEGV: a None memoryview was read)
    code, out = run_isolated("""
        import numpy as np
        from minigrad.kernels import rms_norm
        x = np.ones((3, 4), np.float32)
        try:
            rms_norm.rms_norm_forward(x, None, 1e-5, np.empty_like(x), np.empty(3, np.float32))
        except TypeError as e:
            print("raised:", e)
    """)
    assert code == 0 and "weight must be an array, got None" in out, out


@pytest.mark.parametrize(
    "fn, args",
    [
        # fuzz case: swiglu/relu_square with a short second operand read past its end
        ("channel_mix.relu_square_forward", "np.ones((4, 5)), np.empty((1, 5))"),
        ("channel_mix.relu_square_backward", "np.ones((4, 5)), np.ones((1, 5))"),
        # fuzz case: token_shift_forward x dim0_plus_1 ("malloc(): invalid size": heap overwrite)
        (
            "token_shift.token_shift_forward",
            "np.ones((3, 2, 4)), np.ones((2, 4)), np.ones((6, 4)), np.empty((6, 2, 2, 4))",
        ),
        # T = 0 made token_shift_backward write gx[b, -1]
        (
            "token_shift.token_shift_backward",
            "np.ones((1, 2, 0, 4)), np.ones((2, 0, 4)), np.ones((2, 4)), "
            "np.ones((1, 4)), np.ones((2, 4)), np.empty((2, 0, 4)), "
            "np.empty((2, 4)), np.empty((2, 1, 4))",
        ),
        # H = 0 heads: C // H with cdivision (SIGFPE) before the check
        (
            "rwkv7_time_mix.time_mix_output_forward",
            "*[np.ones((2, 4))] * 5, *[np.ones(4)] * 3, 0, 1e-5, np.empty((2, 4)), *[np.empty((2, 1))] * 3",
        ),
    ],
)
def test_raw_kernel_shape_mismatch_raises(fn, args):
    mod, name = fn.split(".")
    code, out = run_isolated(f"""
        import numpy as np
        from minigrad.kernels import {mod}
        try:
            {mod}.{name}({args})
            print("accepted")
        except (ValueError, TypeError) as e:
            print("raised:", e)
    """)
    assert code == 0 and "raised:" in out and name in out, out


def test_kernel_shape_check_remembers_only_passing_shapes():
    """check_kernel_args caches verdicts by shape: a mismatch after a pass (and a pass after a
    mismatch) is still judged, and callers mutating the returned sizes do not poison the cache."""
    from minigrad.kernels.validate import check_kernel_args

    spec = "x:M,C y:M,C w:C"
    good = (np.ones((3, 4)), np.ones((3, 4)), np.ones(4))
    sizes = check_kernel_args("op", spec, *good)
    assert sizes == {"M": 3, "C": 4}
    sizes["C"] = 99
    assert check_kernel_args("op", spec, *good) == {"M": 3, "C": 4}
    with pytest.raises(ValueError, match="op: w has shape"):
        check_kernel_args("op", spec, np.ones((3, 4)), np.ones((3, 4)), np.ones(5))
    with pytest.raises(ValueError, match="other: y has shape"):
        check_kernel_args("other", spec, np.ones((3, 4)), np.ones((2, 4)), np.ones(4))
    with pytest.raises(TypeError, match="op: y must be an array, got None"):
        check_kernel_args("op", spec, good[0], None, good[2])
    assert check_kernel_args("op", spec, *good, M=3) == {"M": 3, "C": 4}
    with pytest.raises(ValueError, match="x has shape"):
        check_kernel_args("op", spec, *good, M=2)


def test_uint64_ids_above_int64_raise_instead_of_wrapping_negative():
    # audit: 2**64 - 100 became -100 (the ignore_index) and that row was silently dropped
    logits = mg.tensor(np.zeros((3, 7), np.float32))
    for big in (2**64 - 100, 2**64 - 1, 2**63):
        with pytest.raises(IndexError, match=f"contains {big}, outside"):
            F.cross_entropy(logits, np.array([big, 1, 2], np.uint64))
        with pytest.raises(IndexError, match=f"contains {big}, outside"):
            mg.embedding(mg.tensor(np.array([1, big], np.uint64)), mg.randn(5, 3))
    assert np.isfinite(F.cross_entropy(logits, np.array([6, 1, 2], np.uint64)).item())


def test_zero_batch_gives_empty_outputs_through_gpt_and_attention():
    # audit: docs/robustness.md promises empty outputs for zero-size batch dims; GPT raised
    # "empty input" from attention and generate "q needs unit stride"
    from minigrad.models import GPT, GPTConfig
    model = GPT(GPTConfig(vocab_size=13, d_model=16, n_layer=1, n_head=2, max_seq_len=8))
    logits = model(np.zeros((0, 4), np.int64))
    assert logits.shape == (0, 4, 13)
    logits.sum().backward()
    assert not model.layers[0].self_attn.q_proj.weight.grad.data.any()
    assert model.generate(np.zeros((0, 2), np.int64), 2).shape == (0, 4)
    q = mg.randn(0, 2, 3, 4, requires_grad=True)
    out = F.causal_attention(q, q, q)
    out.sum().backward()
    assert out.shape == (0, 2, 3, 4) and q.grad.shape == (0, 2, 3, 4)
    # zero length, heads or head size: empty outputs too, as torch's scaled_dot_product_attention
    assert F.causal_attention(*(mg.randn(1, 2, 0, 4) for _ in range(3))).shape == (1, 2, 0, 4)


@pytest.mark.parametrize("n", [1.5, "2", True])
def test_set_num_threads_rejects_non_integers(n):
    # audit: set_num_threads(1.5) ran on 1 thread silently
    with pytest.raises(TypeError, match="n must be an int"):
        mg.set_num_threads(n)


def test_dtype_rule_holds_for_casts_and_random_tensors():
    # audit: .to(float16) made fp16 tensors the kernels then rejected; randn_like(int tensor) gave
    # truncated zeros; list() of a 0-d tensor was [] where torch raises
    for to in (lambda: mg.tensor([1.0]).to(np.float16), lambda: mg.tensor([1.0]).to("float16"),
               lambda: mg.nn.Linear(2, 2).to(np.float16), lambda: mg.randn_like(mg.tensor(np.arange(3))),
               lambda: mg.rand(2, dtype=mg.int64)):
        with pytest.raises(TypeError, match="float32 or float64"):
            to()
    assert mg.tensor([1.5]).to(mg.int64).data.tolist() == [1]
    with pytest.raises(TypeError, match="0-d"):
        list(mg.tensor(5.0))
    assert [t.item() for t in mg.tensor([1.0, 2.0])] == [1.0, 2.0]


def test_integer_arguments_are_not_truncated():
    # audit: cross_entropy(ignore_index=1.5) ignored class 1; rwkv7_time_mix(head_size=4.5) used 4
    logits = mg.tensor(np.zeros((3, 5), np.float32))
    for bad in (1.5, "1", True):
        with pytest.raises(TypeError, match="ignore_index must be an int"):
            F.cross_entropy(logits, np.array([0, 1, 2]), ignore_index=bad)
    assert np.isfinite(F.cross_entropy(logits, np.array([0, 1, 2]), ignore_index=np.int64(1)).item())
    with pytest.raises(TypeError, match="head_size must be an int"):
        F.rwkv7_time_mix(mg.randn(1, 2, 8), {}, head_size=4.5)
    with pytest.raises(TypeError, match="layer_id must be an int"):
        F.rwkv7_time_mix(mg.randn(1, 2, 8), {}, layer_id=0.5)


def test_setting_requires_grad_goes_through_the_same_checks_as_requires_grad_():
    # audit: `t.requires_grad = True` on an int tensor was accepted and backward gave an int grad
    with pytest.raises(TypeError, match="only float tensors can require grad"):
        mg.tensor(np.arange(3)).requires_grad = True
    x = mg.ones(3, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        y.requires_grad = False
    x.requires_grad = False
    assert not (x * 2).requires_grad
    x.requires_grad = True
    (x * 3).sum().backward()
    assert x.grad.data.tolist() == [3.0, 3.0, 3.0]


def test_wkv7_huge_chunk_is_clamped_not_a_heap_overflow():
    # fuzz case: F.wkv7 chunk=2**62 -> (chunk + 1) * N * N overflowed the scratch size (heap corruption)
    code, out = run_isolated("""
        import numpy as np, minigrad as mg
        from minigrad import functional as F
        from minigrad.kernels import wkv7
        rng = np.random.default_rng(0)
        t = lambda: mg.Tensor(rng.standard_normal((1, 3, 1, 4)).astype(np.float32) * 0.3, requires_grad=True)
        w = mg.Tensor(np.full((1, 3, 1, 4), 0.9, np.float32), requires_grad=True)
        y, s = F.wkv7(t(), w, t(), t(), t(), t(), chunk=2 ** 62)
        (y.sum() + s.sum()).backward()
        z = np.zeros((1, 3, 1, 4), np.float32)
        try:
            wkv7.wkv7_forward(z, z, z, z, z, z, np.zeros((1, 1, 4, 4), np.float32), z.copy(),
                              np.zeros((1, 1, 4, 4), np.float32), np.zeros(16, np.float32), z.copy(), 2 ** 62)
        except ValueError as e:
            print("raised:", e)
    """)
    assert code == 0 and "chunk must be in [1, 3]" in out, out


def test_linear_rejects_int_weight_and_non_arrays():
    # fuzz cases: linear arg1 int64 (silently promoted), linear arg1 list (AttributeError)
    from minigrad.ops.linear import linear

    x = mg.randn(3, 4)
    with pytest.raises(TypeError, match="linear: weight must be float"):
        linear(x, mg.tensor(np.ones((2, 4), np.int64)))
    with pytest.raises(TypeError, match="linear: bias must be float"):
        linear(x, mg.randn(2, 4), mg.tensor(np.ones(2, np.int64)))
    with pytest.raises(TypeError, match="linear: weight must be a Tensor or numpy array, got list"):
        linear(x, [[1.0] * 4])


def test_attention_and_embedding_name_the_bad_argument():
    with pytest.raises(TypeError, match="causal_attention: q must be a numpy array, got NoneType"):
        F.causal_attention(None, mg.randn(1, 1, 2, 4), mg.randn(1, 1, 2, 4))
    with pytest.raises(TypeError, match="embedding: weight must be a Tensor or numpy array, got list"):
        mg.embedding(np.array([0, 1]), [[0.0, 1.0], [2.0, 3.0]])


def test_rope_far_positions_are_fast_and_match_the_table_path(monkeypatch):
    # fuzz case (huge sizes): F.rope(x, 2**31 - 10) built a 2**31-row table: 109 s to MemoryError
    import time

    import minigrad.ops.rope as rope_mod

    x = mg.randn(2, 3, 5, 8, requires_grad=True)
    t0 = time.perf_counter()
    y = F.rope(x, 2 ** 31 - 10)
    assert time.perf_counter() - t0 < 2 and np.isfinite(y.data).all()
    offset = rope_mod.MAX_TABLE_ROWS + 7          # per-call rows ...
    far = F.rope(x, offset)
    (far * far).sum().backward()
    g_far = x.grad.data.copy()
    x.grad = None
    monkeypatch.setattr(rope_mod, "MAX_TABLE_ROWS", 1 << 30)   # ... vs the cached table
    table = F.rope(x, offset)
    (table * table).sum().backward()
    assert np.array_equal(far.data, table.data) and np.array_equal(g_far, x.grad.data)


@pytest.mark.parametrize("temperature", [float("nan"), float("inf"), -1.0])
def test_rwkv7_generate_rejects_a_non_finite_temperature(temperature):
    # found fuzzing generate(): temperature=nan passed the `< 0` check and sampled noise
    from minigrad.models.rwkv7 import RWKV7
    from minigrad.models.rwkv7_init import RWKV7Config

    model = RWKV7(RWKV7Config(vocab_size=16, d_model=16, n_layer=1, head_size=8), seed=0)
    with pytest.raises(ValueError, match="temperature must be finite and >= 0"):
        model.generate(np.zeros((1, 2), np.int64), 2, temperature=temperature)


@pytest.mark.parametrize("logits", [[np.nan, 1.0, 2.0], [0.0, np.inf, 0.0], [-np.inf, -np.inf, -np.inf]])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_sampling_from_non_finite_logits_raises_instead_of_returning_token_0(logits, temperature):
    # audit: NaN / +inf logits (a diverged model) sampled token 0 silently
    from minigrad.models.sampling import sample
    with pytest.raises(ValueError, match="logits of row 1"):
        sample(np.array([[0.0, 1.0, 2.0], logits]), temperature, rng=np.random.default_rng(0))


def test_sampling_at_a_tiny_temperature_is_greedy_not_token_0():
    # audit: z = logits / 1e-310 overflowed to inf, inf - inf = nan, and token 0 came out
    from minigrad.models.sampling import sample
    rng = np.random.default_rng(0)
    assert sample(np.array([[0.0, 5.0, 1.0], [3.0, -1.0, 2.9]]), 1e-310, rng=rng).tolist() == [1, 0]
    assert sample(np.array([[0.0, 5.0, -np.inf]]), 1e-310, top_k=2, rng=rng).tolist() == [1]


@pytest.mark.parametrize("model_kind", ["gpt", "rwkv7"])
def test_generate_rejects_non_integer_counts(model_kind):
    # audit: GPT truncated max_new_tokens=2.7 to 2, and top_k=2.5 failed inside numpy
    from minigrad.models import GPT, RWKV7, GPTConfig, RWKV7Config
    if model_kind == "gpt":
        model = GPT(GPTConfig(vocab_size=16, d_model=16, n_layer=1, n_head=2, max_seq_len=16))
    else:
        model = RWKV7(RWKV7Config(vocab_size=16, d_model=16, n_layer=1, head_size=8))
    idx = np.zeros((1, 2), np.int64)
    for bad in (2.7, True, "3"):
        with pytest.raises(TypeError, match="max_new_tokens must be an int"):
            model.generate(idx, bad)
    with pytest.raises(ValueError, match="max_new_tokens must be an int >= 0"):
        model.generate(idx, -1)
    with pytest.raises(TypeError, match="top_k must be an int"):
        model.generate(idx, 2, top_k=2.5)
    assert model.generate(idx, np.int64(2), top_k=np.int32(3), seed=0).shape == (1, 4)


@pytest.mark.parametrize("kind", ["byte", "char"])
def test_tokenizers_decode_nothing_and_reject_non_str_text(kind):
    # found fuzzing the tokenizers: decode([]) raised TypeError (an empty list is float64), and
    # ByteTokenizer.encode(None / 5 / b"..") raised AttributeError
    from minigrad.data.tokenizer import ByteTokenizer, CharTokenizer

    tok = ByteTokenizer() if kind == "byte" else CharTokenizer.from_text("hello world")
    assert tok.decode([]) == "" and tok.decode(np.zeros(0, np.int64)) == ""
    for bad in (None, 5, b"hello"):
        with pytest.raises(TypeError, match="encode: text must be a str"):
            tok.encode(bad)
    with pytest.raises(ValueError, match="outside"):
        tok.decode([-1])


def test_thread_counts_have_an_upper_bound():
    # audit: set_num_threads(40000) was accepted and libgomp's failed thread creation ended the
    # process at the next kernel; 2**31 raised a bare OverflowError
    from minigrad.threads import MAX_THREADS, kernel_threads

    for bad in (MAX_THREADS + 1, 2 ** 31):
        with pytest.raises(ValueError, match="must be an int <= 1024"):
            mg.set_num_threads(bad)
        with pytest.raises(ValueError, match="must be an int <= 1024"):
            with kernel_threads(bad):
                pass


@pytest.mark.parametrize("name", ["time_mix_prepare_backward", "time_mix_output_backward"])
def test_time_mix_backward_accumulators_are_row_blocks_not_threads(name):
    # audit: acc.shape[0] set the OpenMP team size (acc of 40000 rows: thread creation failed and
    # the process exited); now any number of row blocks gives the same sums
    code, out = run_isolated(f"""
        import numpy as np
        from tests._fuzz_kernel_cases import kernel_calls
        sums = []
        for blocks in (1, 3, 40000):
            call = kernel_calls(np.float64, seed=3)["rwkv7_time_mix.{name}"]   # fresh inputs
            acc = np.full((blocks,) + call.args[-1].value.shape[1:], np.nan)
            call.run(call.args[:-1] + [acc])
            sums.append(acc.sum(0))
        print("diff", max(float(np.abs(s - sums[0]).max()) for s in sums[1:]))
    """)
    assert code == 0 and "diff" in out, out
    assert float(out.split("diff")[1]) < 1e-12, out


@pytest.mark.parametrize("fn", ["attention_forward", "attention_backward"])
def test_raw_attention_kernels_reject_zero_query_rows(fn):
    # audit: Tq = 0 divided by a zero block size (SIGFPE) in the raw kernels
    code, out = run_isolated(f"""
        import numpy as np
        from minigrad.kernels import attention
        q = np.zeros((1, 1, 0, 4), np.float32)
        k = np.zeros((1, 1, 5, 4), np.float32)
        lse = np.zeros((1, 1, 0), np.float32)
        args = (q, k, k, np.zeros_like(q), lse, 1.0) if "{fn}" == "attention_forward" else \\
            (q, q, q, q, lse, q, q.copy(), q.copy(), q.copy(), 1.0)
        try:
            attention.{fn}(*args)
        except ValueError as e:
            print("ValueError", e)
    """)
    assert code == 0 and "ValueError" in out and "at least one query row" in out, out


def test_raw_wkv7_forward_updates_a_state_in_place():
    # audit: sT being s0 itself (an in-place state update) gave a wrong y and state silently
    from minigrad.kernels.wkv7 import wkv7_forward

    rng = np.random.default_rng(0)
    B, T, H, N = 2, 3, 2, 5
    r, k, v, a, b = (rng.standard_normal((B, T, H, N)) for _ in range(5))
    w = rng.uniform(0.5, 1.0, (B, T, H, N))
    s0 = rng.standard_normal((B, H, N, N))
    none_ckpt, none_sa = np.empty(0), np.empty((0, 0, 0, 0))
    y1, sT1 = np.empty_like(r), np.empty_like(s0)
    wkv7_forward(r, w, k, v, a, b, s0, y1, sT1, none_ckpt, none_sa, 2)
    s, y2 = s0.copy(), np.empty_like(r)
    wkv7_forward(r, w, k, v, a, b, s, y2, s, none_ckpt, none_sa, 2)
    np.testing.assert_array_equal(y2, y1)
    np.testing.assert_array_equal(s, sT1)
    shifted = np.empty(s0.size + N * N)[N * N:].reshape(s0.shape)     # overlaps by one head
    base = shifted.base
    s_in = base[:s0.size].reshape(s0.shape)
    with pytest.raises(ValueError, match="sT overlaps s0"):
        wkv7_forward(r, w, k, v, a, b, s_in, y2, shifted, none_ckpt, none_sa, 2)


@pytest.mark.parametrize("op", ["rms_norm", "add_rms_norm", "layer_norm", "swiglu", "swiglu_packed",
                                "linear", "matmul"])
def test_empty_feature_dim_gives_empty_results(op):
    # audit: reshape(-1, 0) is ambiguous in numpy, so C = 0 raised "cannot reshape array of size 0";
    # torch returns empty results (and zero-sized or zero grads)
    from minigrad.ops.linear import linear
    from minigrad.ops.rms_norm import add_rms_norm
    from minigrad.ops.swiglu import swiglu_packed

    t = lambda *s: mg.tensor(np.zeros(s, np.float32), requires_grad=True)  # noqa: E731
    x, r, w, b = t(2, 3, 0), t(2, 3, 0), t(0), t(0)
    run = {"rms_norm": lambda: F.rms_norm(x, w, 1e-5), "add_rms_norm": lambda: add_rms_norm(x, r, w, 1e-5)[1],
           "layer_norm": lambda: F.layer_norm(x, w, b), "swiglu": lambda: F.swiglu(x, r),
           "swiglu_packed": lambda: swiglu_packed(x), "linear": lambda: linear(x, t(5, 0)),
           "matmul": lambda: x @ t(0, 4)}[op]
    y = run()
    assert y.shape == {"linear": (2, 3, 5), "matmul": (2, 3, 4)}.get(op, (2, 3, 0))
    y.sum().backward()
    assert x.grad.shape == (2, 3, 0)


def test_small_functional_arguments_are_type_checked():
    # audit: wkv7 chunk=1.5 / "2" were truncated or parsed, rope positions=True was offset 1, a huge
    # offset raised OverflowError, a list k for attention_inference an IndexError
    from minigrad.ops.attention import attention_inference

    z = np.zeros((1, 2, 1, 4), np.float32)
    for bad in (1.5, "2", None):
        with pytest.raises(TypeError, match="wkv7: chunk must be an int"):
            F.wkv7(z, z, z, z, z, z, chunk=bad)
    q = mg.tensor(np.zeros((1, 1, 3, 4), np.float32))
    with pytest.raises(TypeError, match="position offset must be an int"):
        F.rope(q, True)
    with pytest.raises(ValueError, match="position offset must be an int <="):
        F.rope(q, 2 ** 63 - 1)
    for bad in ([[0.0]], 0.5):
        with pytest.raises(TypeError, match="k must be a numpy array"):
            attention_inference(q.data, bad, q.data)
