"""A Llama-style GPT on the fused kernels, with HF Llama's parameter names and RoPE layout.

    embed_tokens -> n x [input_layernorm -> self_attn (q, k, v, o; RoPE; causal GQA) -> +residual;
                         post_attention_layernorm -> mlp (down(silu(gate(x)) * up(x))) -> +residual]
                 -> norm -> lm_head (the embedding matrix when tie_embeddings)

Every projection is one 2-D GEMM on (B*T, C). q/k/v run as one GEMM against the stacked
[Wq; Wk; Wv]; one fused pass rotates q and k and writes q, k, v head-major, (B, heads, T, head_dim)
(QKV_LAYOUT: each head's rows contiguous for attention's block GEMMs), and attention writes o as
(B, T, heads, head_dim), the o projection's input, so nothing is transposed. gate/up run
as one GEMM against [Wg; Wu] feeding the packed SwiGLU: 4 GEMMs per layer forward instead of 7.
Each residual add is fused with the RMSNorm that follows it (ops/rms_norm.add_rms_norm).
Init (as HF Llama, initializer_range 0.02): every Linear and the embedding ~ N(0, 0.02^2), norms 1,
biases 0. With tie_embeddings the model has no lm_head.weight; load_state_dict accepts (and checks) one.
HF variants (GPTConfig): an explicit head_dim, RoPE scaling (ops/rope.rope_inv_freq), biases
(attention_bias: q, k, v and o, or q, k, v only for qwen2; mlp_bias: gate, up, down; the packed
GEMMs add the stacked biases), and the architecture save_hf writes (llama, mistral, qwen2).
"""
import math
import threading
from dataclasses import dataclass, fields

import numpy as np

import minigrad as mg
from minigrad import functional as F
from minigrad import nn
from minigrad.autograd import is_grad_enabled, no_grad
from minigrad.kernels.validate import check_bool, check_finite_scalar, check_index, check_int
from minigrad.models.gguf_llama import load_gguf
from minigrad.models.gpt_decode import KVDecoder
from minigrad.models.hf_llama import load_hf, save_hf
from minigrad.models.sampling import Sampler, check_new_tokens, left_padding, parameter_bytes
from minigrad.nn.lora import fused_weight, needs_call
from minigrad.ops.attention import attention_inference
from minigrad.ops.linear import linear
from minigrad.ops.rms_norm import add_rms_norm
from minigrad.ops.rope import check_rope_scaling, split_qkv_rope
from minigrad.ops.swiglu import swiglu_packed
from minigrad.tensor import Tensor
from minigrad.threads import decode_blas, kernel_threads
from minigrad.utils.checkpoint import GradientCheckpointingMixin, checkpoint

INIT_STD = 0.02
# q, k, v between the split and attention in training: "bhtd" (head-major) makes a step ~1 % faster
# than "bthd" (attention 0.86-0.91x, the split 1.1-1.2x; docs/gpt.md, "Fourth pass")
QKV_LAYOUT = "bhtd"
# HF architectures GPT computes exactly (save_hf writes the config of `GPTConfig.hf_model_type`)
HF_MODEL_TYPES = ("llama", "mistral", "qwen2")


@dataclass
class GPTConfig:
    """Sizes of a GPT. n_kv_head=None means n_head (plain multi-head attention); ffn_hidden=None
    means 8/3 * d_model rounded up to a multiple of 32; head_dim=None means d_model / n_head (both
    stored resolved).

    rope_scaling: HF's dict (rope_type "linear", "llama3" or "dynamic"; ops/rope.check_rope_scaling),
    kept canonical. attention_bias: biases on q, k, v and o (hf_model_type "qwen2": q, k, v only, as
    Qwen2); mlp_bias: on gate, up, down. hf_model_type: "llama", "mistral" (no biases) or "qwen2"
    (attention_bias required). sliding_window (mistral): GPT attends to every earlier position, which
    is Mistral's windowed attention while sequences fit the window, so max_seq_len must not exceed it."""

    vocab_size: int
    d_model: int
    n_layer: int
    n_head: int
    n_kv_head: int = None
    ffn_hidden: int = None
    max_seq_len: int = 1024
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = True
    head_dim: int = None
    rope_scaling: dict = None
    attention_bias: bool = False
    mlp_bias: bool = False
    hf_model_type: str = "llama"
    sliding_window: int = None

    # fields that do not change what the weights compute: a checkpoint loads into a model that
    # differs only here (max_seq_len: a longer or shorter context; RoPE has no learned positions)
    RUNTIME_FIELDS = ("max_seq_len",)

    def __post_init__(self):
        """Every field checked (and stored as a plain int / float / bool) before any weight exists:
        TypeError for 20.7, True, "no"; ValueError out of range (rope_base, norm_eps: finite > 0)."""
        for name in ("vocab_size", "d_model", "n_layer", "n_head", "max_seq_len"):
            setattr(self, name, check_int("GPTConfig", name, getattr(self, name), 1))
        for name in ("n_kv_head", "ffn_hidden"):
            if getattr(self, name) is not None:
                setattr(self, name, check_int("GPTConfig", name, getattr(self, name), 1))
        if self.ffn_hidden is None:
            self.ffn_hidden = 32 * math.ceil(8 * self.d_model / 3 / 32)
        for name in ("rope_base", "norm_eps"):
            setattr(self, name, check_finite_scalar("GPTConfig", name, getattr(self, name), positive=True))
        self.tie_embeddings = check_bool("GPTConfig", "tie_embeddings", self.tie_embeddings)
        self._check_head_dim()
        if self.n_kv_head is not None and self.n_head % self.n_kv_head:
            raise ValueError(f"GPTConfig: n_head {self.n_head} must be a multiple of n_kv_head "
                             f"{self.n_kv_head}")
        self._check_rope_scaling()
        self._check_architecture()

    def _check_head_dim(self):
        """head_dim: d_model / n_head when None (which must divide), else any int >= 1; even."""
        if self.head_dim is None:
            if self.d_model % self.n_head or (self.d_model // self.n_head) % 2:
                raise ValueError(f"GPTConfig: d_model {self.d_model} must split into n_head {self.n_head} "
                                 "heads of an even size (RoPE rotates pairs)")
            self.head_dim = self.d_model // self.n_head
        self.head_dim = check_int("GPTConfig", "head_dim", self.head_dim, 1)
        if self.head_dim % 2:
            raise ValueError(f"GPTConfig: head_dim {self.head_dim} must be even (RoPE rotates pairs)")

    def _check_rope_scaling(self):
        """rope_scaling canonical (a missing original length is max_seq_len, HF's default); dynamic
        scaling is plain RoPE up to its original length, so max_seq_len must stay within it."""
        scaling = check_rope_scaling(self.rope_scaling, "GPTConfig", self.rope_base, self.max_seq_len)
        length = scaling.get("original_max_position_embeddings") if scaling else None
        if scaling and scaling["rope_type"] == "dynamic" and self.max_seq_len > length:
            raise ValueError(f"GPTConfig: max_seq_len {self.max_seq_len} exceeds the dynamic RoPE scaling's "
                             f"original_max_position_embeddings {length}; beyond it HF rescales the base "
                             "per sequence length, which GPT does not implement")
        self.rope_scaling = scaling

    def _check_architecture(self):
        """Biases and sliding_window as the HF architecture `hf_model_type` allows them."""
        where, kind = "GPTConfig", self.hf_model_type
        self.attention_bias = check_bool(where, "attention_bias", self.attention_bias)
        self.mlp_bias = check_bool(where, "mlp_bias", self.mlp_bias)
        if kind not in HF_MODEL_TYPES:
            raise ValueError(f"{where}: hf_model_type must be one of {HF_MODEL_TYPES}, got {kind!r}")
        if kind == "mistral" and (self.attention_bias or self.mlp_bias):
            raise ValueError(f"{where}: Mistral's projections have no biases (attention_bias, mlp_bias)")
        if kind == "qwen2" and (not self.attention_bias or self.mlp_bias):
            raise ValueError(f"{where}: Qwen2 has q/k/v biases and none in the MLP: attention_bias=True, "
                             "mlp_bias=False")
        if self.sliding_window is not None:
            self.sliding_window = check_int(where, "sliding_window", self.sliding_window, 1)
            if kind != "mistral":
                raise ValueError(f"{where}: sliding_window is Mistral's (hf_model_type='mistral')")
            if self.max_seq_len > self.sliding_window:
                raise ValueError(f"{where}: max_seq_len {self.max_seq_len} exceeds sliding_window "
                                 f"{self.sliding_window}: GPT's full causal attention equals Mistral's "
                                 "windowed attention only within the window")

    @property
    def o_proj_bias(self):
        """o_proj has a bias with attention_bias, except in Qwen2 (biases on q, k, v only)."""
        return self.attention_bias and self.hf_model_type != "qwen2"

    def layer_projections(self, prefix=""):
        """(name, out, in, bias) of one decoder layer's projections whose name starts with `prefix`
        ("self_attn.", "mlp."), in module order."""
        C, hd, F = self.d_model, self.head_dim, self.ffn_hidden
        q, kv, a, m = self.n_head * hd, self.kv_heads * hd, self.attention_bias, self.mlp_bias
        table = (("self_attn.q_proj", q, C, a), ("self_attn.k_proj", kv, C, a),
                 ("self_attn.v_proj", kv, C, a), ("self_attn.o_proj", C, q, self.o_proj_bias),
                 ("mlp.gate_proj", F, C, m), ("mlp.up_proj", F, C, m), ("mlp.down_proj", C, F, m))
        return [row for row in table if row[0].startswith(prefix)]

    def weights_signature(self):
        """The fields that decide what the weights compute (n_kv_head None stands for n_head):
        models whose signatures agree can share a checkpoint."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in self.RUNTIME_FIELDS}
        out["n_kv_head"] = self.kv_heads
        return out

    def param_shapes(self):
        """Yield (name, shape) of every parameter, lazily: a file can be checked against a huge
        declared config without materialising it."""
        C = self.d_model
        yield "embed_tokens.weight", (self.vocab_size, C)
        projections = self.layer_projections()
        for i in range(self.n_layer):
            pre = f"layers.{i}."
            for name, d_out, d_in, bias in projections:
                yield pre + name + ".weight", (d_out, d_in)
                if bias:
                    yield pre + name + ".bias", (d_out,)
            yield pre + "input_layernorm.weight", (C,)
            yield pre + "post_attention_layernorm.weight", (C,)
        yield "norm.weight", (C,)
        if not self.tie_embeddings:
            yield "lm_head.weight", (self.vocab_size, C)

    @property
    def kv_heads(self):
        return self.n_kv_head or self.n_head


class LlamaRMSNorm(nn.Module):
    """RMSNorm over the last dim on the fused kernel; weight (dim,) = 1."""

    def __init__(self, dim, eps, dtype):
        super().__init__()
        self.eps = float(eps)
        self.weight = nn.Parameter(np.ones(dim, dtype=dtype))

    def forward(self, x):
        return F.rms_norm(x, self.weight, self.eps)

    def add(self, x, r):
        """(x + r, self(x + r)) in one pass: a residual add and this norm."""
        return add_rms_norm(x, r, self.weight, self.eps)


class _Packed(nn.Module):
    """A module whose forward multiplies by several of its projections stacked into one matrix.

    In training the stack is rebuilt (a differentiable cat) every call, and so is the stack of their
    biases when they have them (y = x [W1; W2]^T + [b1; b2]: still one GEMM); `freeze_pack()` fixes
    both for the duration of a no-grad decode (generate), so one token does not copy every weight again.
    The frozen stack belongs to the thread that froze it: another thread training the same model
    meanwhile keeps the differentiable cat. A LoRA projection enters the stack as W + s B A
    (nn.lora.fused_weight); one whose dropout is active cannot, and `project` then calls every
    projection as a module instead."""

    PACKED = ()

    def _projections(self):
        return [self._modules[n] for n in self.PACKED]

    def packed_weight(self):
        return self._pack()[0]

    def _pack(self):
        """(stacked weight, stacked bias or None): the calling thread's frozen pair, else built."""
        frozen = self.__dict__.get("_frozen")          # {thread id: (weight, bias)}
        if frozen:
            pair = frozen.get(threading.get_ident())
            if pair is not None:
                return pair
        projections = self._projections()
        return mg.cat([fused_weight(p) for p in projections], 0), _stacked_bias(projections)

    def freeze_pack(self, on):
        """Fix (on) or drop (off) the stacked weight and bias for the calling thread."""
        frozen = self.__dict__.setdefault("_frozen", {})
        if on:
            with no_grad():
                w, b = self._pack()
                frozen[threading.get_ident()] = (Tensor(w.data), None if b is None else Tensor(b.data))
        else:
            frozen.pop(threading.get_ident(), None)

    def project(self, x):
        """x (..., C) -> the projections' outputs side by side (..., sum of out): one GEMM against
        the stack, or each projection called as a module when one must be (nn.lora.needs_call)."""
        projections = self._projections()
        if any(map(needs_call, projections)):
            return mg.cat([p(x) for p in projections], -1)
        return linear(x, *self._pack())

    def _add_projections(self, cfg, prefix, dtype):
        """The config's projections under `prefix` ("self_attn.", "mlp.") as child Linears."""
        for name, d_out, d_in, bias in cfg.layer_projections(prefix):
            setattr(self, name[len(prefix):], _proj(d_in, d_out, dtype, bias))


def _stacked_bias(projections):
    """[b1; b2; ...] of projections that have biases (a differentiable cat), None if they have none."""
    if projections[0].bias is None:
        return None
    return mg.cat([p.bias for p in projections], 0)


def _proj(d_in, d_out, dtype, bias=False):
    layer = nn.Linear(d_in, d_out, bias=bias, dtype=dtype)
    nn.init.normal_(layer.weight, 0.0, INIT_STD)
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


class LlamaAttention(_Packed):
    PACKED = ("q_proj", "k_proj", "v_proj")

    def __init__(self, cfg, dtype):
        super().__init__()
        self.cfg = cfg
        self._add_projections(cfg, "self_attn.", dtype)

    def forward(self, x, cache=None, start=0, pads=None):
        """x (B, T, C) -> (B, T, C). With a cache (k, v of (B, T_max, Hkv, hd)) the new keys and
        values are written at columns start .. start+T and the queries attend to all of 0 .. start+T.
        pads (B,), with a cache only: rows left-padded by that many columns (`_left_padded`)."""
        cfg = self.cfg
        B, T, C = x.shape
        qkv = self.project(x)
        if pads is not None:
            o = self._left_padded(qkv, cache, start, pads)
            return self.o_proj(o.reshape(B, T, cfg.n_head * cfg.head_dim))
        layout = QKV_LAYOUT if cache is None else "bthd"      # the cache is (B, T_max, Hkv, hd)
        q, k, v = split_qkv_rope(qkv, start, cfg.n_head, cfg.kv_heads, cfg.rope_base, layout=layout,
                                 scaling=cfg.rope_scaling)
        if cache is None:
            o = F.causal_attention(q, k, v, layout=layout, out_layout="bthd")
        else:
            kc, vc = cache
            kc[:, start:start + T] = k.data
            vc[:, start:start + T] = v.data
            end = start + T
            o = Tensor(np.ascontiguousarray(
                attention_inference(q.data, kc[:, :end], vc[:, :end], layout="bthd")))
        return self.o_proj(o.reshape(B, T, cfg.n_head * cfg.head_dim))

    def _left_padded(self, qkv, cache, start, pads):
        """Inference on rows left-padded by pads (B,) columns (generate's attention_mask), no grad:
        the packed qkv (B, T, W) of columns start .. start+T -> o (B, T, Hq, hd) Tensor.

        q and k are rotated at each row's own positions (`padded_positions`: HF's cumsum(mask) - 1),
        k and v written to the cache (B, T_max, Hkv, hd), and each query attends to its row's
        keys from column pads[b] up to its own column (`padded_attention`): no query, in the prefill
        or at any later step, ever sees a pad."""
        cfg = self.cfg
        B, T, W = qkv.shape
        positions = padded_positions(pads, start, T)
        # one kernel call for all rows: the batch laid along time, every column with its own position
        q, k, v = (t.data.reshape(B, T, *t.shape[2:]) for t in split_qkv_rope(
            qkv.reshape(1, B * T, W), positions.reshape(-1), cfg.n_head, cfg.kv_heads, cfg.rope_base,
            layout="bthd", scaling=cfg.rope_scaling))
        kc, vc = cache
        kc[:, start:start + T] = k
        vc[:, start:start + T] = v
        return Tensor(padded_attention(q, kc[:, :start + T], vc[:, :start + T], pads))


def padded_positions(pads, start, T):
    """RoPE positions (B, T) of columns start .. start+T-1 of rows left-padded by pads (B,) columns:
    column - pads[b], HF's cumsum(attention_mask) - 1 (0 on the pads themselves, never attended)."""
    return np.maximum(start + np.arange(T) - pads[:, None], 0)


def padded_attention(q, k, v, pads):
    """softmax(q k^T / sqrt(hd)) v of left-padded rows, numpy in and out, no grad.

    q (B, Tq, Hq, hd): the newest Tq columns; k, v (B, Tk, Hkv, hd): columns 0 .. Tk-1 (a KV cache's
    filled part), Hq % Hkv == 0 (GQA). Query i sits at column Tk - Tq + i and attends to the keys j
    with pads[b] <= j <= its column: causal, and never a pad (HF's attention_mask). A query with no
    such key (a pad's own) gets zeros. Runs F.scaled_dot_product_attention with a bool mask, which
    forms the (B, Hq, Tq, Tk) scores: T x T per head for a prompt, fine for generation (the fused
    kernel has no key mask). -> o (B, Tq, Hq, hd)."""
    Tq, Tk = q.shape[1], k.shape[1]
    cols = np.arange(Tk)
    visible = (cols <= Tk - Tq + np.arange(Tq)[:, None]) & (cols >= pads[:, None, None])     # (B, Tq, Tk)
    heads_first = [Tensor(x.transpose(0, 2, 1, 3)) for x in (q, k, v)]
    o = F.scaled_dot_product_attention(*heads_first, attn_mask=Tensor(visible[:, None]), enable_gqa=True)
    return o.data.transpose(0, 2, 1, 3)


def _cache_args(cache, start, pads):
    """The cache arguments of a layer or attention call as a module: (cache, start), and pads only
    when set, so that hooks see the arguments they always saw unless generation pads the rows."""
    return (cache, start) if pads is None else (cache, start, pads)


class LlamaMLP(_Packed):
    PACKED = ("gate_proj", "up_proj")

    def __init__(self, cfg, dtype):
        super().__init__()
        self._add_projections(cfg, "mlp.", dtype)

    def forward(self, x):
        return self.down_proj(swiglu_packed(self.project(x)))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.self_attn = LlamaAttention(cfg, dtype)
        self.mlp = LlamaMLP(cfg, dtype)
        self.input_layernorm = LlamaRMSNorm(cfg.d_model, cfg.norm_eps, dtype)
        self.post_attention_layernorm = LlamaRMSNorm(cfg.d_model, cfg.norm_eps, dtype)

    def forward(self, x, cache=None, start=0, pads=None):
        """x (B, T, C) -> (B, T, C); cache, start, pads: as LlamaAttention.forward."""
        x = x + self.self_attn(self.input_layernorm(x), *_cache_args(cache, start, pads))
        return x + self.mlp(self.post_attention_layernorm(x))

    def forward_normed(self, x, h, next_norm, cache=None, start=0, pads=None):
        """The same block on the residual stream x with h = input_layernorm(x) already computed;
        returns (x', next_norm(x')), each residual add fused with the norm after it."""
        x, h = self.post_attention_layernorm.add(x, self.self_attn(h, cache, start, pads))
        return next_norm.add(x, self.mlp(h))


class GPT(GradientCheckpointingMixin, nn.Module):
    """model(idx) with int ids (B, T) -> logits (B, T, vocab_size). See the module docstring.

    `gradient_checkpointing_enable()`: a forward with grad enabled and no cache checkpoints each
    decoder layer (minigrad.utils.checkpoint; docs/checkpointing.md)."""

    from_hf = classmethod(load_hf)        # GPT.from_hf(dir): a transformers Llama directory
    from_gguf = classmethod(load_gguf)    # GPT.from_gguf(path): a llama.cpp Llama GGUF file
    save_hf = save_hf                     # model.save_hf(dir): config.json + model.safetensors

    def __init__(self, config, dtype=np.float32):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT: config must be a GPTConfig, got {type(config).__name__}")
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model, dtype=dtype)
        nn.init.normal_(self.embed_tokens.weight, 0.0, INIT_STD)
        self.layers = nn.ModuleList([LlamaDecoderLayer(config, dtype) for _ in range(config.n_layer)])
        self.norm = LlamaRMSNorm(config.d_model, config.norm_eps, dtype)
        if not config.tie_embeddings:
            self.lm_head = _proj(config.d_model, config.vocab_size, dtype)

    @property
    def dtype(self):
        return self.embed_tokens.weight.dtype

    def _ids(self, idx, limit):
        """idx as a validated int64 (B, T) array."""
        arr = idx.data if isinstance(idx, Tensor) else np.asarray(idx)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"GPT: token ids must be integers, got dtype {arr.dtype}")
        if arr.ndim != 2:
            raise ValueError(f"GPT: token ids must be (batch, time), got shape {arr.shape}")
        if arr.shape[1] == 0:
            raise ValueError("GPT: token ids have zero length")
        if arr.shape[1] > limit:
            raise ValueError(f"GPT: sequence of length {arr.shape[1]} is longer than max_seq_len "
                             f"{self.config.max_seq_len}")
        return check_index("GPT", "token ids", arr, self.config.vocab_size)

    def _check_caches(self, caches, start, pads, B, T):
        """forward's KV caches (generate's): one writable (k, v) pair per layer, each (B, >= start + T,
        kv_heads, head_dim) of the model's dtype; pads None or (B,) ints in [0, start + T)."""
        cfg, dtype = self.config, self.dtype
        if not isinstance(caches, (list, tuple)) or len(caches) != cfg.n_layer:
            raise ValueError(f"GPT: caches must be a list of {cfg.n_layer} (k, v) pairs, one per layer")
        want = (B, cfg.kv_heads, cfg.head_dim)          # (runs every decode step: one pass, no f-strings)
        for i, pair in enumerate(caches):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise ValueError(f"GPT: caches[{i}] must be a (k, v) pair of arrays")
            for name, c in zip("kv", pair):
                if not isinstance(c, np.ndarray) or c.dtype != dtype or not c.flags.writeable:
                    raise TypeError(f"GPT: caches[{i}] {name} must be a writable {dtype} numpy array")
                shape = c.shape
                if len(shape) != 4 or (shape[0], shape[2], shape[3]) != want or shape[1] < start + T:
                    raise ValueError(f"GPT: caches[{i}] {name} has shape {shape}, expected ({B}, >= "
                                     f"{start + T}, {want[1]}, {want[2]}) for {T} tokens at position {start}")
        if pads is not None:
            check_index("GPT", "pads", np.asarray(pads), start + T, shape=(B,))

    def _head(self, h):
        """Logits from the final-normed hidden states h: the tied embedding matrix, or lm_head."""
        return linear(h, self.embed_tokens.weight) if self.config.tie_embeddings else self.lm_head(h)

    def forward(self, idx, caches=None, start=0, pads=None):
        """idx (B, T) int -> logits (B, T, V). caches/start: KV-cache decoding (see generate); pads
        (B,) int, with caches only: rows left-padded by that many columns (generate's attention_mask)."""
        if pads is not None and caches is None:
            raise ValueError("GPT: pads (left-padded rows) need caches: they are for generate")
        start = check_int("GPT", "start", start, 0)
        ids = self._ids(idx, self.config.max_seq_len - start)
        if caches is not None:
            self._check_caches(caches, start, pads, *ids.shape)
        x = self.embed_tokens(ids)
        layers = list(self.layers)
        ckpt = self._checkpoint_kwargs                 # None unless gradient_checkpointing_enable()
        if ckpt is not None and (caches is not None or not is_grad_enabled()):
            ckpt = None
        if self.has_hooks():        # every layer and norm called as a module, so that its hooks fire
            for i, layer in enumerate(layers):
                args = _cache_args(None if caches is None else caches[i], start, pads)
                x = layer(x, *args) if ckpt is None else checkpoint(layer, x, **ckpt)
            return self._head(self.norm(x))
        h = layers[0].input_layernorm(x)
        for i, layer in enumerate(layers):
            next_norm = layers[i + 1].input_layernorm if i + 1 < len(layers) else self.norm
            if ckpt is None:
                cache = None if caches is None else caches[i]
                x, h = layer.forward_normed(x, h, next_norm, cache, start, pads)
            else:
                x, h = checkpoint(layer.forward_normed, x, h, next_norm, **ckpt)
        return self._head(h)

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, seed=None, *,
                 eos_token_id=None, pad_token_id=None, repetition_penalty=1.0, min_p=None,
                 attention_mask=None, streamer=None, suppress_tokens=None):
        """Extend idx (B, T) by up to max_new_tokens sampled tokens; returns a (B, T + new) int64 Tensor.

        One forward over the prompt fills a KV cache; every later token costs one position.
        temperature 0 is greedy; top_k keeps the k largest logits, top_p the smallest set of tokens
        whose probability reaches top_p, min_p the tokens with probability >= min_p * the largest.
        repetition_penalty divides the positive logits (multiplies the negative ones) of every token
        already in the row. A row that samples an eos_token_id (int or list) is padded with
        pad_token_id (default: the first eos id) after it; generation stops once every row has.
        Hugging Face `generate` semantics (see minigrad.models.sampling.Sampler).
        T + max_new_tokens must fit in max_seq_len.

        attention_mask (B, T) of 0/1: prompts of different lengths, left-padded (sampling.left_padding).
        Each row then generates what its unpadded prompt alone would: positions count from its first
        token, no query ever attends to a pad, and the repetition penalty ignores the pads (as HF).
        The padded path runs attention through F.scaled_dot_product_attention with a key mask
        (`padded_attention`: the prefill forms T x T scores per head, fine for a prompt, and every
        step reads the whole cache); with no mask, or no row padded, the fused kernel runs as before.
        streamer: HF's protocol, put(prompt (B, T)), put(new ids (B,)) per step, end() (e.g.
        sampling.TextStreamer). suppress_tokens: ids never sampled (HF's; e.g. embedding rows beyond
        the tokenizer's vocabulary).
        """
        cfg = self.config
        ids = self._ids(idx, cfg.max_seq_len)
        max_new_tokens = check_new_tokens(max_new_tokens)
        B, T0 = ids.shape
        if T0 + max_new_tokens > cfg.max_seq_len:
            raise ValueError(f"generate: prompt {T0} + max_new_tokens {max_new_tokens} exceeds "
                             f"max_seq_len {cfg.max_seq_len}")
        pads = left_padding(attention_mask, ids.shape)
        sampler = Sampler(ids, max_new_tokens, cfg.vocab_size, temperature, top_k, top_p, seed,
                          eos_token_id=eos_token_id, pad_token_id=pad_token_id,
                          repetition_penalty=repetition_penalty, min_p=min_p, pads=pads, streamer=streamer,
                          suppress_tokens=suppress_tokens)
        shape = (B, T0 + max_new_tokens, cfg.kv_heads, cfg.head_dim)
        caches = [(np.empty(shape, self.dtype), np.empty(shape, self.dtype)) for _ in self.layers]
        was_training = self.training
        packs = [m for m in self.modules() if isinstance(m, _Packed)]
        self.eval()
        try:
            for m in packs:
                m.freeze_pack(True)
            with no_grad():
                # the prompt in one forward, all threads
                more = not sampler.done and sampler.push(self.forward(ids, caches, 0, pads).data[:, -1])
                # one position per step: too little work to split over threads (threads.kernel_threads;
                # measured 2 -> 1 thread, 2 vCPUs: small model B=1 229 -> 517-658 tok/s, B=8 1380 -> 2351)
                with decode_blas(parameter_bytes(self)), kernel_threads(1):
                    # the same arithmetic without the tape, unless hooks, pads or replaced modules need it
                    decoder = KVDecoder(self, caches) if pads is None and KVDecoder.supports(self) else None
                    while more:
                        t = sampler.length - 1          # the column of the newest token
                        more = sampler.push(decoder.step(sampler.last, t) if decoder is not None else
                                            self.forward(sampler.last[:, None], caches, t, pads).data[:, -1])
        finally:
            for m in packs:
                m.freeze_pack(False)
            self.train(was_training)
        sampler.finish()
        return Tensor(sampler.sequences())

    def load_state_dict(self, state_dict, strict=True):
        """Module.load_state_dict, also accepting a tied model's redundant `lm_head.weight`
        (HF files may carry one): it must equal `embed_tokens.weight` and is then dropped."""
        state = dict(state_dict)
        if self.config.tie_embeddings and "lm_head.weight" in state:
            head = state.pop("lm_head.weight")
            emb = state.get("embed_tokens.weight")
            if emb is not None and not np.array_equal(np.asarray(getattr(head, "data", head)),
                                                      np.asarray(getattr(emb, "data", emb))):
                raise ValueError("GPT.load_state_dict: lm_head.weight differs from embed_tokens.weight "
                                 "but the model ties them; build it with tie_embeddings=False")
        return super().load_state_dict(state, strict)
