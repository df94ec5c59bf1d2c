"""GPT decoding one position at a time without the tape (GPT.generate's decode steps).

`GPT.forward` with a KV cache makes about ten autograd `Function` calls a layer, each with its
checks and bookkeeping: ~0.3 ms a layer on this machine, more than the arithmetic of a small model
and a fifth of a SmolLM2-135M token. `KVDecoder.step` runs the same kernels and products on raw
arrays in the same order (embedding rows, RMSNorm, the packed q/k/v product, the fused
split + RoPE, cache write, attention, o product, the fused residual-add + RMSNorm, the packed
gate/up product, SwiGLU, down product, head), so its logits equal `forward`'s bit for bit
(tests/test_gpt_decode.py). Only the exact GPT architecture qualifies (`KVDecoder.supports`):
hooks, left-padded rows, unmerged LoRA adapters outside the packed projections, or any module a
user replaced send generate back to `forward`.
"""
import numpy as np

from minigrad import nn
from minigrad.blas import gemm
from minigrad.kernels import rms_norm as _rms
from minigrad.kernels import rope as _rope
from minigrad.kernels import swiglu as _swiglu
from minigrad.nn.lora import needs_call
from minigrad.ops.attention import attention_inference
from minigrad.ops.rope import _setup as rope_setup


def _plain_linear(module):
    return type(module) is nn.Linear


class _Layer:
    """One decoder layer's arrays: packed weights as `_Packed._pack` gives them (the frozen pack)."""

    def __init__(self, layer, next_norm):
        attn, mlp = layer.self_attn, layer.mlp
        self.wqkv, self.bqkv = (None if t is None else t.data for t in attn._pack())
        self.wgu, self.bgu = (None if t is None else t.data for t in mlp._pack())
        self.wo, self.bo = _weights(attn.o_proj)
        self.wd, self.bd = _weights(mlp.down_proj)
        self.post_norm = (layer.post_attention_layernorm.weight.data, layer.post_attention_layernorm.eps)
        self.next_norm = (next_norm.weight.data, next_norm.eps)


def _weights(linear):
    return linear.weight.data, (None if linear.bias is None else linear.bias.data)


def _product(x, w, b):
    """x W^T (+ b): Linear.forward's arithmetic."""
    y = gemm(x, w, trans_b=True)
    if b is not None:
        y += b
    return y


def _add_norm(x, r, norm):
    """(x + r, rms_norm(x + r)): AddRMSNorm.forward's kernel."""
    s, y = np.empty_like(x), np.empty_like(x)
    _rms.add_rms_norm_forward(x, r, norm[0], norm[1], s, y, np.empty(x.shape[0], x.dtype))
    return s, y


class KVDecoder:
    """step(ids (B,) int64, start) -> logits (B, V) of one new position per row, writing its keys and
    values into `caches` (generate's, (B, T_max, Hkv, hd) per layer) at column `start` -- what
    model.forward(ids[:, None], caches, start).data[:, -1] returns. Build it while the model's packs
    are frozen (generate does), and only when `supports(model)`."""

    def __init__(self, model, caches):
        cfg = model.config
        self.cfg, self.caches = cfg, caches
        self.embed = model.embed_tokens.weight.data
        layers = list(model.layers)
        first = layers[0].input_layernorm
        self.first_norm = (first.weight.data, first.eps)
        nexts = [layer.input_layernorm for layer in layers[1:]] + [model.norm]
        self.layers = [_Layer(layer, nxt) for layer, nxt in zip(layers, nexts)]
        self.head = (self.embed, None) if cfg.tie_embeddings else _weights(model.lm_head)
        self.heads = cfg.n_head + 2 * cfg.kv_heads

    @staticmethod
    def supports(model):
        """True when every module is the GPT architecture's own, no hook is set and every projection
        called as a module (o, down, head) is a plain Linear (a LoRA layer there adds its branch)."""
        from minigrad.models.gpt import GPT, LlamaAttention, LlamaDecoderLayer, LlamaMLP, LlamaRMSNorm

        if type(model) is not GPT or model.has_hooks() or type(model.embed_tokens) is not nn.Embedding:
            return False
        norms = [model.norm] + [m for layer in model.layers
                                for m in (layer.input_layernorm, layer.post_attention_layernorm)]
        if any(type(n) is not LlamaRMSNorm for n in norms):
            return False
        if not model.config.tie_embeddings and not _plain_linear(model.lm_head):
            return False
        for layer in model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            if (type(layer) is not LlamaDecoderLayer or type(attn) is not LlamaAttention
                    or type(mlp) is not LlamaMLP or not _plain_linear(attn.o_proj)
                    or not _plain_linear(mlp.down_proj)
                    or any(map(needs_call, attn._projections() + mlp._projections()))):
                return False
        return True

    def step(self, ids, start):
        cfg = self.cfg
        B = ids.shape[0]
        x = self.embed[ids]
        h = np.empty_like(x)
        _rms.rms_norm_forward(x, self.first_norm[0], self.first_norm[1], h, np.empty(B, x.dtype))
        hd, Hq, Hkv = cfg.head_dim, cfg.n_head, cfg.kv_heads
        cos, sin, pos = rope_setup("split_qkv_rope", (B, 1, self.heads * hd), hd, start, 1, cfg.rope_base,
                                   x.dtype, cfg.rope_scaling)
        end = start + 1
        for layer, (kc, vc) in zip(self.layers, self.caches):
            qkv = _product(h, layer.wqkv, layer.bqkv)
            q = np.empty((B, 1, Hq, hd), x.dtype)
            k, v = np.empty((B, 1, Hkv, hd), x.dtype), np.empty((B, 1, Hkv, hd), x.dtype)
            _rope.qkv_rope_forward(qkv.reshape(B, 1, self.heads, hd), q, k, v, cos, sin, pos, False)
            kc[:, start:end] = k
            vc[:, start:end] = v
            o = np.ascontiguousarray(attention_inference(q, kc[:, :end], vc[:, :end], layout="bthd"))
            x, h = _add_norm(x, _product(o.reshape(B, Hq * hd), layer.wo, layer.bo), layer.post_norm)
            gu = _product(h, layer.wgu, layer.bgu)
            F = gu.shape[1] // 2
            act = np.empty((B, F), x.dtype)
            _swiglu.swiglu_forward(gu[:, :F], gu[:, F:], act)
            x, h = _add_norm(x, _product(act, layer.wd, layer.bd), layer.next_norm)
        return _product(h, *self.head)
