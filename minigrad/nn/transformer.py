"""torch.nn's Transformer family: TransformerEncoderLayer / TransformerEncoder, TransformerDecoderLayer /
TransformerDecoder and Transformer, with torch's arguments, attribute names (so state_dicts
interchange) and maths, composed from MultiheadAttention, Linear, LayerNorm and Dropout.

A sub-layer f (self-attention, cross-attention or the feed-forward net) is wrapped as
    norm_first=False (post-norm):  x = norm(x + dropout(f(x)))
    norm_first=True  (pre-norm):   x = x + dropout(f(norm(x)))
with FFN(x) = linear2(dropout(activation(linear1(x)))).
"""
import copy

import numpy as np

from minigrad.kernels.validate import check_int
from minigrad.nn.attention import MultiheadAttention
from minigrad.nn.container import ModuleList
from minigrad.nn.dropout import Dropout
from minigrad.nn.init import xavier_uniform_
from minigrad.nn.linear import Linear
from minigrad.nn.module import Module
from minigrad.nn.normalization import LayerNorm
from minigrad.ops.api import gelu, relu
from minigrad.tensor import Tensor


def _square_subsequent_mask(sz, dtype=np.float32):
    """(sz, sz) float: -inf above the diagonal (key j > query i), 0 elsewhere."""
    return np.triu(np.full((sz, sz), -np.inf, dtype=dtype), 1)


def _detect_is_causal(mask, is_causal, size):
    """torch's rule: is_causal if given (True/False), else whether `mask` is exactly the
    (size, size) causal mask (bool True or float -inf above the diagonal, 0 / False elsewhere)."""
    if is_causal is not None or mask is None:
        return is_causal is True
    m = np.asarray(mask.data if isinstance(mask, Tensor) else mask)
    if m.dtype == np.bool_:
        m = np.where(m, -np.inf, 0.0)
    return m.shape == (size, size) and np.array_equal(m, _square_subsequent_mask(size, np.float64))


def _activation(activation):
    if activation == "relu":
        return relu
    if activation == "gelu":
        return gelu
    if isinstance(activation, str) or not callable(activation):
        raise ValueError(f"activation should be 'relu', 'gelu' or a callable, not {activation!r}")
    return activation


def _seq_len(x, batch_first):
    return x.shape[0] if x.ndim == 2 else x.shape[1 if batch_first else 0]


class _Layer(Module):
    """What the encoder and decoder layers share: the FFN, the norms, the residual wrapper."""

    _cross_attention = False

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, dtype=np.float32):
        super().__init__()

        def attention():
            return MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                      dtype=dtype)

        self.self_attn = attention()
        if self._cross_attention:
            self.multihead_attn = attention()
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = bool(norm_first)
        n = 3 if self._cross_attention else 2          # torch's registration order: norm1.., then dropout1..
        for i in range(1, n + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        for i in range(1, n + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)

    def _residual(self, x, norm, block):
        return x + block(norm(x)) if self.norm_first else norm(x + block(x))

    def _attend(self, attn, drop, x, mem, mask, key_padding_mask, is_causal):
        out = attn(x, mem, mem, attn_mask=mask, key_padding_mask=key_padding_mask, need_weights=False,
                   is_causal=is_causal)[0]
        return drop(out)

    def _ff_block(self, x, drop):
        return drop(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_Layer):
    """Self-attention then FFN over src (S, N, E) ((N, S, E) with batch_first, or unbatched (S, E)).

    Modules: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
    """

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """src_mask (S, S) or (N * nhead, S, S), src_key_padding_mask (N, S): see MultiheadAttention."""
        x = self._residual(src, self.norm1, lambda y: self._attend(
            self.self_attn, self.dropout1, y, y, src_mask, src_key_padding_mask, is_causal))
        return self._residual(x, self.norm2, lambda y: self._ff_block(y, self.dropout2))


class TransformerDecoderLayer(_Layer):
    """Self-attention over tgt (T, N, E), cross-attention to memory (S, N, E), then FFN.

    Modules: self_attn, multihead_attn, linear1, dropout, linear2, norm1-3, dropout1-3.
    """

    _cross_attention = True

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        """tgt_mask (T, T), memory_mask (T, S) (or per head: (N * nhead, ...)), key padding masks
        (N, T) and (N, S)."""
        x = self._residual(tgt, self.norm1, lambda y: self._attend(
            self.self_attn, self.dropout1, y, y, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self._residual(x, self.norm2, lambda y: self._attend(
            self.multihead_attn, self.dropout2, y, memory, memory_mask, memory_key_padding_mask,
            memory_is_causal))
        return self._residual(x, self.norm3, lambda y: self._ff_block(y, self.dropout3))


def _clones(layer, num_layers):
    check_int("Transformer", "num_layers", num_layers, 0)
    return ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])


class TransformerEncoder(Module):
    """num_layers deep copies of encoder_layer (as `layers`), then `norm` if given.

    enable_nested_tensor and mask_check are accepted for torch's signature; minigrad has no nested
    tensors (no fast path), so they do nothing.
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """is_causal=None: detected from `mask` (torch's rule), then passed to every layer."""
        is_causal = _detect_is_causal(mask, is_causal, _seq_len(src, self.layers[0].self_attn.batch_first)
                                      if len(self.layers) else 0)
        for layer in self.layers:
            src = layer(src, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal)
        return src if self.norm is None else self.norm(src)


class TransformerDecoder(Module):
    """num_layers deep copies of decoder_layer (as `layers`), then `norm` if given."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        """tgt_is_causal=None: detected from tgt_mask (torch's rule)."""
        tgt_is_causal = _detect_is_causal(tgt_mask, tgt_is_causal, _seq_len(
            tgt, self.layers[0].self_attn.batch_first) if len(self.layers) else 0)
        for layer in self.layers:
            tgt = layer(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                        memory_is_causal=memory_is_causal)
        return tgt if self.norm is None else self.norm(tgt)


class Transformer(Module):
    """Encoder-decoder: encoder (num_encoder_layers, final LayerNorm) over src, decoder
    (num_decoder_layers, final LayerNorm) over tgt attending to the encoder's output. Every
    parameter with more than one dim is re-initialised with xavier_uniform_, as torch does."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 dtype=np.float32):
        super().__init__()
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                bias, dtype)

        def norm():
            return LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)

        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(*args), num_encoder_layers, norm())
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(*args), num_decoder_layers, norm())
        for p in self.parameters():
            if p.ndim > 1:
                xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None,
                tgt_is_causal=None, memory_is_causal=False):
        """src (S, N, E), tgt (T, N, E) ((N, ., E) with batch_first) -> (T, N, E)."""
        b = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[b] != tgt.shape[b]:
            raise ValueError(f"Transformer: src {tuple(src.shape)} and tgt {tuple(tgt.shape)} need one "
                             "batch size")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ValueError(f"Transformer: the last dim of src and tgt must be d_model={self.d_model}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """(sz, sz) float mask (float32 unless `dtype`): -inf above the diagonal, 0 on and below."""
        if device is not None and str(device) != "cpu":
            raise ValueError(f"generate_square_subsequent_mask: minigrad runs on the CPU only, got "
                             f"{device!r}")
        return Tensor(_square_subsequent_mask(check_int("generate_square_subsequent_mask", "sz", sz, 0),
                                              np.float32 if dtype is None else dtype))
