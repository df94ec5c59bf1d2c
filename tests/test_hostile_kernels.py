"""Hostile inputs to the fused ops, models and optimizers at the Python boundary (an audit's findings).

Each test is a case that crashed with a numpy traceback from inside, computed a silently wrong or
truncated result, or raised where PyTorch returns an empty result.
"""
import numpy as np
import pytest

import minigrad as mg
import minigrad.functional as F
from minigrad import nn
from minigrad.models import GPT, RWKV7, GPTConfig, RWKV7Config
from minigrad.ops.attention import attention_inference
from minigrad.ops.rope import split_qkv_rope


def _randn(*shape, requires_grad=False):
    rng = np.random.default_rng(0)
    return mg.Tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=requires_grad)


# ---- rope ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["bhtd", "bthd"])
@pytest.mark.parametrize("shape", [(1, 2, 0, 4), (1, 2, 3, 0)])
def test_rope_backward_of_an_empty_input_is_empty(shape, layout):
    # audit: T = 0 or head size 0 passed the forward, then backward's reshape(-1, ...) raised numpy's
    # "cannot reshape array of size 0"
    x = _randn(*shape, requires_grad=True)
    y = F.rope(x, layout=layout)
    y.sum().backward()
    assert y.shape == shape and x.grad.shape == shape


def test_rope_flags_and_head_counts_are_checked_not_coerced():
    # audit: interleaved="no" rotated interleaved pairs (bool("no")); split_qkv_rope truncated
    # n_head=1.5 and took "1" and True through int()
    with pytest.raises(TypeError, match="interleaved must be True or False"):
        F.rope(_randn(1, 2, 3, 4), interleaved="no")
    y = _randn(1, 2, 12)
    for bad in (1.5, "1", True):
        with pytest.raises(TypeError, match="split_qkv_rope: n_head must be an int"):
            split_qkv_rope(y, 0, bad, 1)
    with pytest.raises(ValueError, match="n_kv_head must be an int >= 1"):
        split_qkv_rope(y, 0, 1, 0)


# ---- attention -----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 0, 3, 4), (1, 2, 0, 4), (1, 2, 3, 0)])
def test_causal_attention_zero_heads_length_or_head_size_give_empty_results(shape):
    # audit: raised "empty input" / "do not fit" where torch's scaled_dot_product_attention returns
    # an empty result
    q, k, v = (_randn(*shape, requires_grad=True) for _ in range(3))
    out = F.causal_attention(q, k, v)
    out.sum().backward()
    assert out.shape == shape
    assert all(t.grad.shape == shape for t in (q, k, v))
    assert attention_inference(q.data, k.data, v.data).shape == shape


def test_causal_attention_without_query_heads_gives_zero_kv_grads():
    q = _randn(1, 0, 3, 4, requires_grad=True)
    k, v = _randn(1, 2, 3, 4, requires_grad=True), _randn(1, 2, 3, 4, requires_grad=True)
    F.causal_attention(q, k, v).sum().backward()
    assert not k.grad.data.any() and not v.grad.data.any()


def test_attention_inference_with_no_new_rows_is_empty():
    k = np.zeros((1, 2, 5, 4), np.float32)
    assert attention_inference(np.zeros((1, 2, 0, 4), np.float32), k, k).shape == (1, 2, 0, 4)


@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_head_size_zero_matches_torch(is_causal):
    # audit: the default scale 1 / sqrt(0) raised ZeroDivisionError; torch averages the values
    torch = pytest.importorskip("torch")
    q = np.zeros((1, 2, 3, 0), np.float32)
    v = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    out = F.scaled_dot_product_attention(mg.Tensor(q), mg.Tensor(q), mg.Tensor(v), is_causal=is_causal)
    want = torch.nn.functional.scaled_dot_product_attention(
        torch.tensor(q), torch.tensor(q), torch.tensor(v), is_causal=is_causal)
    np.testing.assert_allclose(out.data, want.numpy(), rtol=1e-6)
    out = F.causal_attention(mg.Tensor(q), mg.Tensor(q), mg.Tensor(q))
    assert out.shape == (1, 2, 3, 0)


# ---- linear / embedding / dropout ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.longdouble])
def test_linear_rejects_other_float_dtypes(dtype):
    # audit: numpy float16 / longdouble arrays were multiplied and the result returned as float32
    x, w = np.ones((2, 3), dtype), np.ones((4, 3), dtype)
    with pytest.raises(TypeError, match="linear: input must be float32 or float64"):
        F.linear(x, w)


def test_linear_rejects_mixed_float32_float64_arrays():
    # audit: raw numpy arrays mixing float32 and float64 were silently combined (Function.apply only
    # compares the dtypes of Tensors)
    x32, w64 = np.ones((2, 3), np.float32), np.ones((4, 3), np.float64)
    with pytest.raises(TypeError, match="linear: weight has dtype float64 but input is float32"):
        F.linear(x32, w64)
    with pytest.raises(TypeError, match="linear: weight has dtype float32 but input is float64"):
        F.linear(w64[:2], x32.repeat(2, 0))
    with pytest.raises(TypeError, match="linear: bias has dtype float64 but input is float32"):
        F.linear(mg.Tensor(x32), mg.Tensor(np.ones((4, 3), np.float32)), np.zeros(4))


def test_embedding_sizes_and_padding_idx_must_be_ints():
    # audit: padding_idx=1.5 was truncated to 1 (F.embedding) or hit numpy's indexing error
    # (nn.Embedding); nn.Embedding(3.7, 4) / nn.Linear(3.5, 2) built truncated tables; a negative size
    # raised numpy's "negative dimensions are not allowed"
    w = _randn(3, 4)
    with pytest.raises(TypeError, match="embedding: padding_idx must be an int"):
        F.embedding(np.array([0, 1]), w, padding_idx=1.5)
    with pytest.raises(TypeError, match="Embedding: padding_idx must be an int"):
        nn.Embedding(3, 4, padding_idx=1.5)
    with pytest.raises(IndexError, match="Embedding: padding_idx 3 is outside"):
        nn.Embedding(3, 4, padding_idx=3)
    assert nn.Embedding(3, 4, padding_idx=-1).padding_idx == 2
    with pytest.raises(TypeError, match="Embedding: num_embeddings must be an int"):
        nn.Embedding(3.7, 4)
    with pytest.raises(ValueError, match="Embedding: embedding_dim must be an int >= 0"):
        nn.Embedding(3, -1)
    with pytest.raises(TypeError, match="Linear: in_features must be an int"):
        nn.Linear(3.5, 2)
    with pytest.raises(ValueError, match="Linear: out_features must be an int >= 0"):
        nn.Linear(3, -2)


def test_dropout_rejects_a_generator_that_is_not_one():
    # audit: AttributeError "'int' object has no attribute 'random'"
    with pytest.raises(TypeError, match="dropout: generator must be a numpy Generator"):
        F.dropout(_randn(3), 0.5, generator=5)


# ---- models --------------------------------------------------------------------------------------

def test_rwkv7_generate_with_a_zero_batch_is_empty():
    # audit: the decoder's reshape(B, 1, -1) raised numpy's error for B = 0 (GPT returned (0, T + n))
    model = RWKV7(RWKV7Config(vocab_size=11, d_model=16, n_layer=1, head_size=8), seed=0)
    assert model.generate(np.zeros((0, 3), np.int64), 2).shape == (0, 5)


def _gpt_and_caches(length=16):
    model = GPT(GPTConfig(vocab_size=11, d_model=16, n_layer=2, n_head=4, n_kv_head=2, max_seq_len=16))
    shape = (1, length, 2, 4)
    return model, [(np.zeros(shape, np.float32), np.zeros(shape, np.float32)) for _ in range(2)]


def test_gpt_forward_checks_its_kv_caches_start_and_pads():
    # audit: a start past the cache's end gave numpy's "could not broadcast", one cache too few an
    # IndexError, a float64 cache an error from inside attention, pads beyond the sequence and a
    # cache of None entries ran silently
    ids = np.array([[1, 2, 3]])
    model, caches = _gpt_and_caches(4)
    with pytest.raises(ValueError, match=r"caches\[0\] k has shape \(1, 4, 2, 4\), expected \(1, >= 6, "):
        model(ids, caches, 3)
    model, caches = _gpt_and_caches()
    assert model(ids, caches, 0).shape == (1, 3, 11)
    with pytest.raises(ValueError, match="caches must be a list of 2"):
        model(ids, caches[:1], 0)
    with pytest.raises(ValueError, match=r"caches\[0\] must be a \(k, v\) pair"):
        model(ids, [None, None], 0)
    with pytest.raises(TypeError, match=r"caches\[1\] v must be a writable float32"):
        model(ids, [caches[0], (caches[1][0], caches[1][1].astype(np.float64))], 0)
    with pytest.raises(ValueError, match="GPT: start must be an int >= 0"):
        model(ids, caches, -1)
    with pytest.raises(TypeError, match="GPT: start must be an int"):
        model(ids, caches, 1.5)
    with pytest.raises(IndexError, match=r"GPT: pads contains 5, outside \[0, 3\)"):
        model(ids, caches, 0, np.array([5]))


# ---- optimizers ----------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [mg.optim.Adam, mg.optim.AdamW])
def test_adam_betas_that_are_not_a_pair_are_named(cls):
    # audit: betas=None raised "'NoneType' object is not iterable" from tuple(betas)
    p = _randn(3, requires_grad=True)
    with pytest.raises(ValueError, match=r"betas must be a pair \(beta1, beta2\), got None"):
        cls([p], betas=None)
    assert cls([p], betas=np.array([0.5, 0.75])).defaults["betas"] == (0.5, 0.75)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("strided", ["data", "grad"])
def test_adam_steps_a_parameter_or_grad_that_is_a_strided_view(name, strided):
    # audit: p.data = w.T (as torch allows) or a transposed grad raised the raw kernel's "adamw_step:
    # param must be C-contiguous" where SGD / RMSprop / Adagrad (and torch) step it; the update must
    # equal the contiguous one and land in w's own memory
    rng = np.random.default_rng(0)
    base = rng.standard_normal((4, 3)).astype(np.float32)
    grad = rng.standard_normal((3, 4)).astype(np.float32)
    p, ref = mg.Tensor(base.T.copy(), requires_grad=True), mg.Tensor(base.T.copy(), requires_grad=True)
    if strided == "data":
        p.data = base.T
    p.grad, ref.grad = mg.Tensor(grad), mg.Tensor(grad)
    if strided == "grad":
        p.grad.data = np.asfortranarray(grad)
    for q in (p, ref):
        # (no weight decay: Adam's would add it to a fresh C-order copy of the grad)
        opt = getattr(mg.optim, name)([q], lr=0.1, weight_decay=0.0, amsgrad=True)
        opt.step()
        opt.step()
    np.testing.assert_array_equal(p.data, ref.data)
    if strided == "data":
        np.testing.assert_array_equal(base.T, ref.data)         # stepped in place, as torch


def test_cosine_similarity_rejects_a_negative_eps():
    # audit: eps=-1 let a zero norm through and returned nan silently; torch raises "eps must be
    # non-negative"
    z = mg.Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="cosine_similarity: eps must be >= 0, got -1.0"):
        F.cosine_similarity(z, z, eps=-1.0)


def test_linear_of_a_0d_input_says_so():
    # audit: "last dim None and in_features 1 differ"; torch: "need to be at least 1D"
    with pytest.raises(ValueError, match="linear: input must have at least 1 dim"):
        F.linear(mg.Tensor(np.float32(1.0)), mg.Tensor(np.ones((2, 1), np.float32)))


@pytest.mark.parametrize("bad, err", [(-1, ValueError), (1.5, TypeError), (True, TypeError),
                                      ("2", TypeError)])
def test_rwkv7_init_state_checks_batch_size(bad, err):
    # audit: numpy's "negative dimensions are not allowed" / "'float' object cannot be interpreted as
    # an integer" from np.zeros
    model = RWKV7(RWKV7Config(vocab_size=11, d_model=16, n_layer=1, head_size=8), seed=0)
    with pytest.raises(err, match="RWKV7.init_state: batch_size must be an int"):
        model.init_state(bad)
    assert model.init_state(0)[0][1].shape == (0, 2, 8, 8)


def test_multistep_lr_rejects_a_negative_milestone():
    # audit: milestone -1 counted from step 0 (lr 0.01 where torch, which never reaches it, keeps 0.1)
    opt = mg.optim.SGD([_randn(2, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="MultiStepLR: milestones must be an int >= 0, got -1"):
        mg.optim.lr_scheduler.MultiStepLR(opt, [-1, 2])
    sched = mg.optim.lr_scheduler.MultiStepLR(opt, [0, 2])   # 0 decays at once, as torch
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01)
    sched.step()
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.001)


@pytest.mark.parametrize("name, kwargs, key", [("SGD", {"momentum": 0.9}, "momentum_buffer"),
                                               ("Adam", {}, "exp_avg"), ("RMSprop", {}, "square_avg"),
                                               ("Adagrad", {}, "sum")])
def test_optimizer_state_of_ints_loads_as_the_parameter_dtype(name, kwargs, key):
    # audit: an int64 buffer loaded as is, then the next step failed in numpy ("Cannot cast ufunc
    # 'multiply' output from float64 to int64") or in the Adam kernel; torch casts it to p's dtype
    def stepped(value):
        p = mg.Tensor(np.ones(3, np.float32), requires_grad=True)
        p.grad = mg.Tensor(np.ones(3, np.float32))
        opt = getattr(mg.optim, name)([p], lr=0.1, **kwargs)
        opt.step()
        state = opt.state_dict()
        state["state"][0][key] = value
        opt.load_state_dict(state)
        opt.step()
        return p.data, opt.state[p][key]
    got, buf = stepped(np.ones(3, np.int64))
    np.testing.assert_array_equal(got, stepped(np.ones(3, np.float32))[0])
    assert buf.dtype == np.float32
    with pytest.raises(TypeError, match=rf"state\[0\]\['{key}'\] must be a real number array"):
        stepped(np.ones(3, np.complex64))
