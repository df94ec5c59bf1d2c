"""MultiheadAttention with torch.nn.MultiheadAttention's arguments, parameter names, init and forward
semantics (torch keeps it in torch/nn/modules/activation.py), composed from primitive ops.

Per head h (D = embed_dim / num_heads), with q = query W_q^T + b_q, k = key W_k^T + b_k, v likewise:
    A_h = softmax(q_h k_h^T / sqrt(D) + attn_mask + key_padding_mask),   o_h = dropout(A_h) v_h
    out = concat_h(o_h) W_o^T + b_o
"""
import math

import numpy as np

from minigrad.kernels.validate import check_bool, check_int
from minigrad.nn import init
from minigrad.nn.linear import Linear
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.ops.activations import float_input
from minigrad.ops.dropout import dropout as _dropout
from minigrad.ops.join import cat, pad
from minigrad.ops.linear import linear
from minigrad.ops.sdp_attention import _safe_softmax, scaled_dot_product_attention
from minigrad.tensor import Tensor

_OP = "MultiheadAttention"


def canonical_mask(name, mask, dtype):
    """A mask as an additive float Tensor of `dtype`: bool True (= not allowed) -> -inf, False -> 0;
    a float mask as it is (it must have `dtype`); None stays None."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        mask = Tensor(np.asarray(mask))
    if mask.dtype == np.bool_:
        return Tensor(np.where(mask.data, -np.inf, 0.0).astype(dtype))
    if not mask.is_floating_point():
        raise TypeError(f"{_OP}: only bool and float {name} are supported, got {mask.dtype}")
    if mask.dtype != dtype:
        raise TypeError(f"{_OP}: {name} is {mask.dtype} but the query is {np.dtype(dtype)}; make the float "
                        "mask the query's dtype (or pass a bool mask)")
    return mask


class MultiheadAttention(Module):
    """Multi-head attention; query (L, N, E), key (S, N, kdim), value (S, N, vdim) -> (L, N, E)
    ((N, L, E) ... with batch_first=True; unbatched (L, E), (S, kdim), (S, vdim) -> (L, E)).

    Parameters (torch's names): in_proj_weight (3E, E) when kdim == vdim == E, else q_proj_weight
    (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim); in_proj_bias (3E,) (bias=True);
    out_proj a Linear(E, E); bias_k, bias_v (1, 1, E) with add_bias_kv (a learned key/value appended
    to the sequence); add_zero_attn appends a zero key/value after the projections.
    Init as torch: xavier_uniform_ projections, zero biases, xavier_normal_ bias_k / bias_v.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, dtype=np.float32):
        super().__init__()
        self.embed_dim = check_int(_OP, "embed_dim", embed_dim, 1)
        self.num_heads = check_int(_OP, "num_heads", num_heads, 1)
        if embed_dim % num_heads:
            raise ValueError(f"{_OP}: embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{_OP}: dropout must be in [0, 1], got {dropout}")
        self.kdim = embed_dim if kdim is None else check_int(_OP, "kdim", kdim, 1)
        self.vdim = embed_dim if vdim is None else check_int(_OP, "vdim", vdim, 1)
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        self.dropout = float(dropout)
        self.batch_first = check_bool(_OP, "batch_first", batch_first)
        self.add_zero_attn = check_bool(_OP, "add_zero_attn", add_zero_attn)

        def param(*shape):
            return Parameter(np.empty(shape, dtype=dtype))

        E = embed_dim
        packed = self._qkv_same_embed_dim
        for name, shape in (("q_proj_weight", (E, E)), ("k_proj_weight", (E, self.kdim)),
                            ("v_proj_weight", (E, self.vdim))):
            self.register_parameter(name, None if packed else param(*shape))
        self.register_parameter("in_proj_weight", param(3 * E, E) if packed else None)
        self.register_parameter("in_proj_bias", param(3 * E) if bias else None)
        self.out_proj = Linear(E, E, bias=bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k, self.bias_v = param(1, 1, E), param(1, 1, E)
        else:
            self.bias_k = self.bias_v = None
        self._reset_parameters()

    def _reset_parameters(self):
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    # ---- forward pieces ---------------------------------------------------------------------
    def _check_inputs(self, query, key, value):
        """True when batched (3-D inputs); ValueError naming the shapes otherwise."""
        for name, x in (("query", query), ("key", key), ("value", value)):
            float_input(_OP, name, x)
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(f"{_OP}: query, key and value must all be 3-D (batched) or all 2-D (unbatched), "
                             f"got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
        dims = (query.shape[-1], key.shape[-1], value.shape[-1])
        if dims != (self.embed_dim, self.kdim, self.vdim):
            raise ValueError(f"{_OP}: the last dims of query, key and value must be embed_dim, kdim, vdim = "
                             f"{(self.embed_dim, self.kdim, self.vdim)}, got {dims}")
        batched = query.ndim == 3
        b = 0 if self.batch_first else 1
        if key.shape[:-1] != value.shape[:-1] or (batched and query.shape[b] != key.shape[b]):
            raise ValueError(f"{_OP}: key {tuple(key.shape)} and value {tuple(value.shape)} need one "
                             f"sequence length and batch size, and query {tuple(query.shape)} the same "
                             "batch size")
        return batched

    def _project(self, query, key, value):
        """(q, k, v), each (..., E): the input projections; one GEMM for self-attention."""
        w_in, b_in = self.in_proj_weight, self.in_proj_bias
        if w_in is not None and query is key and key is value:
            return linear(query, w_in, b_in).chunk(3, -1)
        weights = w_in.chunk(3) if w_in is not None else (self.q_proj_weight, self.k_proj_weight,
                                                          self.v_proj_weight)
        biases = b_in.chunk(3) if b_in is not None else (None, None, None)
        return tuple(linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))

    def _masks(self, attn_mask, key_padding_mask, n, L, S, batched):
        """attn_mask as (1, 1, L, S) or (N, H, L, S) and key_padding_mask as (N, 1, 1, S)."""
        H = self.num_heads
        if key_padding_mask is not None:
            want = (n, S) if batched else (S,)
            if tuple(key_padding_mask.shape) != want:
                raise ValueError(f"{_OP}: key_padding_mask must be {want} (N, S), got "
                                 f"{tuple(key_padding_mask.shape)}")
            key_padding_mask = key_padding_mask.reshape(n, 1, 1, S)
        if attn_mask is not None:
            shape = tuple(attn_mask.shape)
            if shape not in ((L, S), (n * H, L, S)):
                raise ValueError(f"{_OP}: attn_mask must be (L, S) = {(L, S)} or (N * num_heads, L, S) = "
                                 f"{(n * H, L, S)}, got {shape}")
            attn_mask = attn_mask.reshape(1, 1, L, S) if len(shape) == 2 else attn_mask.reshape(n, H, L, S)
        return attn_mask, key_padding_mask

    def _to_nle(self, x, batched):
        """An input-layout (L, N, E) / (N, L, E) / unbatched (L, E) tensor as (N, L, E)."""
        if not batched:
            return x.unsqueeze(0)
        return x if self.batch_first else x.transpose(0, 1)

    def _from_nle(self, x, batched):
        if not batched:
            return x.squeeze(0)
        return x if self.batch_first else x.transpose(0, 1)

    def _heads(self, x):
        """(N, T, E) -> (N, H, T, D)."""
        n, t, _ = x.shape
        return x.reshape(n, t, self.num_heads, self.head_dim).transpose(1, 2)

    def _extend_kv(self, k, v, masks):
        """Append bias_k / bias_v (add_bias_kv), then a zero key/value (add_zero_attn), to the (N, H, S, D)
        keys and values, and a 0 (allowed) column to each additive mask."""
        n, H, _, D = k.shape
        extra = []
        if self.bias_k is not None:
            extra.append((self._heads(self.bias_k.expand(n, 1, self.embed_dim)),
                          self._heads(self.bias_v.expand(n, 1, self.embed_dim))))
        if self.add_zero_attn:
            zeros = Tensor(np.zeros((n, H, 1, D), dtype=k.dtype))
            extra.append((zeros, zeros))
        for bk, bv in extra:
            k, v = cat([k, bk], 2), cat([v, bv], 2)
            masks = [m if m is None else pad(m, (0, 1)) for m in masks]
        return k, v, masks

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """Returns (attn_output, attn_weights): weights (N, L, S) averaged over heads, (N, H, L, S)
        with average_attn_weights=False ((L, S) / (H, L, S) unbatched), None with need_weights=False.

        Masks: attn_mask (L, S) or (N * num_heads, L, S), key_padding_mask (N, S) ((S,) unbatched);
        bool True = not allowed, a float mask is added to the scores. is_causal is torch's hint that
        attn_mask is the causal mask: it needs attn_mask, and with need_weights=False and no
        key_padding_mask the causal mask replaces attn_mask. Dropout acts on the weights in training.
        """
        batched = self._check_inputs(query, key, value)
        need_weights = check_bool(_OP, "need_weights", need_weights)
        is_causal = check_bool(_OP, "is_causal", is_causal)
        key_padding_mask = canonical_mask("key_padding_mask", key_padding_mask, query.dtype)
        attn_mask = canonical_mask("attn_mask", attn_mask, query.dtype)
        if is_causal and attn_mask is None:
            raise ValueError(f"{_OP}: is_causal=True is a hint that needs attn_mask (e.g. "
                             "nn.Transformer.generate_square_subsequent_mask(L))")
        causal = is_causal and key_padding_mask is None and not need_weights
        q, k, v = (self._to_nle(x, batched) for x in self._project(query, key, value))
        n, L, S = q.shape[0], q.shape[1], k.shape[1]
        masks = self._masks(attn_mask, key_padding_mask, n, L, S, batched)
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        k, v, masks = self._extend_kv(k, v, masks)
        masks = [m for m in masks if m is not None]
        mask = None if causal or not masks else sum(masks[1:], masks[0])     # attn_mask + padding
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            scores = (q * math.sqrt(1.0 / self.head_dim)) @ k.mT
            weights = _dropout(_safe_softmax(scores if mask is None else scores + mask), p)
            out = weights @ v
        else:
            out = scaled_dot_product_attention(q, k, v, mask, p, is_causal=causal)
        out = self.out_proj(out.transpose(1, 2).reshape(n, L, self.embed_dim))
        out = self._from_nle(out, batched)
        if weights is not None:
            weights = weights.mean(1) if average_attn_weights else weights
            weights = weights if batched else weights.squeeze(0)
        return out, weights

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
                f"batch_first={self.batch_first}")
