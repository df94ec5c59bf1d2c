"""Llama-architecture GGUF files (llama.cpp) -> minigrad's GPT, with their tokenizer.

Weights are dequantised to float32 by the `gguf` package (`GGUFReader` + `gguf.quants.dequantize`),
so any quantisation it knows (F16, Q8_0, Q4_1, K-quants ...) loads.

RoPE layout: llama.cpp's convert script permutes the rows of attn_q / attn_k so that its interleaved
RoPE (rotating pairs (2i, 2i+1)) equals HF's half-split RoPE (pairs (i, i + d/2)):
    permute(W) = W.reshape(heads, 2, d/2, in).swapaxes(1, 2).reshape(W.shape)
(heads = head_count for Q, head_count_kv for K). `unpermute_qk` is its inverse, giving back
the HF rows that GPT's half-split RoPE expects.

The tokenizer (`tokenizer.ggml.model == "gpt2"`: byte-level BPE) is rebuilt with the `tokenizers`
package from `tokenizer.ggml.tokens` / `merges` / `token_type`, the pre-tokenizer chosen by
`tokenizer.ggml.pre`, and attached to the model as `model.tokenizer` (a `minigrad.data.BPETokenizer`
with `bos_token_id` / `eos_token_id`).
"""
import os
import struct
import warnings

import numpy as np

from minigrad.kernels.validate import check_finite_scalar, check_int
from minigrad.models.hf_llama import UnsupportedCheckpointError, load_gpt_state

# GGUF tensor name (per block after `blk.N.`) -> GPT (HF Llama) name
_BLOCK_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_TOP_NAMES = {"token_embd.weight": "embed_tokens.weight", "output_norm.weight": "norm.weight",
              "output.weight": "lm_head.weight"}

# GGUF token types (llama.cpp's llama_token_type)
_CONTROL, _USER_DEFINED = 3, 4

# tokenizer.ggml.pre -> pre-tokenizer recipe (see llama.cpp's llm_tokenizer_bpe regexes)
_LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_DIGIT_SPLIT_PRES = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"}
_LLAMA3_PRES = {"llama-bpe", "llama3", "smaug-bpe"}


def _require_gguf():
    try:
        import gguf
    except ImportError:
        raise ImportError("GPT.from_gguf needs the `gguf` package: pip install gguf tokenizers "
                          "(or pip install -e \".[gguf]\")") from None
    return gguf


def field_value(reader, key, default=None, where="GGUF"):
    """The Python value of a GGUF metadata field (str, number, bool or list), or `default`.
    A string that is not UTF-8 is a ValueError naming `where` (the file) and the key."""
    field = reader.fields.get(key)
    if field is None:
        return default
    try:
        if hasattr(field, "contents"):
            return field.contents()
        # gguf < 0.11: decode by hand
        parts = [field.parts[i] for i in field.data]
        gguf = _require_gguf()
        string = gguf.GGUFValueType.STRING
        is_str = field.types and field.types[-1] == string
        values = [bytes(p).decode("utf-8") if is_str else p.tolist()[0] for p in parts]
        return values if field.types[0] == gguf.GGUFValueType.ARRAY else values[0]
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}: GGUF metadata {key} is not valid UTF-8 ({e})") from None


def unpermute_qk(w, n_heads):
    """Undo llama.cpp's Q/K row permutation: (heads*d, in) interleaved-RoPE rows -> half-split rows."""
    rows = w.shape[0]
    return w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _shortest(value):
    """GGUF stores floats as float32: 1e-5 comes back as 9.99999974e-06; give back 1e-05."""
    return float(str(np.float32(value)))


def _size(where, key, value):
    return check_int(where, key, value, 1)


def _positive(where, key, value):
    return _shortest(check_finite_scalar(where, key, value, positive=True))


_REQUIRED = object()


def config_from_gguf(reader, tensor_names, where):
    """GPTConfig keyword arguments from a GGUF's `llama.*` metadata. Sizes and counts must be integers
    >= 1 (0, -2, 64.7, 64.0, "64", [64] or true is a ValueError naming the key), the RoPE base and
    norm epsilon finite numbers > 0."""
    arch = field_value(reader, "general.architecture", where=where)
    if arch != "llama":
        raise UnsupportedCheckpointError(f"{where}: general.architecture is {arch!r}; only 'llama' loads")

    def get(key, default=_REQUIRED, check=_size):
        """llama.{key} passed through `check`; `default` (unchecked) when absent."""
        name = f"llama.{key}"
        value = field_value(reader, name, where=where)
        if value is None:
            if default is _REQUIRED:
                raise ValueError(f"{where}: GGUF metadata has no {name}")
            return default
        try:
            return check(where, name, value)
        except TypeError as e:  # a field of the wrong GGUF type: bad file content, not a bad argument
            raise ValueError(str(e)) from None

    d_model, n_head = get("embedding_length"), get("attention.head_count")
    head_dim = d_model // n_head
    for key in ("rope.dimension_count", "attention.key_length", "attention.value_length"):
        value = get(key, None)
        if value not in (None, head_dim):
            raise UnsupportedCheckpointError(f"{where}: llama.{key} = {value} but d_model / heads = "
                                             f"{head_dim}; GPT needs full-width RoPE and head_dim = d/heads")
    scaling = field_value(reader, "llama.rope.scaling.type", where=where)
    if scaling not in (None, "none") or "rope_freqs.weight" in tensor_names:
        raise UnsupportedCheckpointError(f"{where}: RoPE scaling ({scaling or 'rope_freqs'}) "
                                         f"is not supported")
    if "blk.0.attn_q.bias" in tensor_names or "blk.0.ffn_up.bias" in tensor_names:
        raise UnsupportedCheckpointError(f"{where}: biased projections are not supported")
    vocab = get("vocab_size", None)
    if vocab is None:
        tokens = field_value(reader, "tokenizer.ggml.tokens", where=where)
        if not isinstance(tokens, list) or not tokens:
            raise ValueError(f"{where}: GGUF metadata has neither llama.vocab_size nor a "
                             f"tokenizer.ggml.tokens list")
        vocab = len(tokens)
    return dict(vocab_size=vocab, d_model=d_model, n_layer=get("block_count"), n_head=n_head,
                n_kv_head=get("attention.head_count_kv", n_head), ffn_hidden=get("feed_forward_length"),
                max_seq_len=get("context_length", 2048),
                rope_base=get("rope.freq_base", 10000.0, _positive),
                norm_eps=get("attention.layer_norm_rms_epsilon", 1e-5, _positive),
                tie_embeddings="output.weight" not in tensor_names)


def gguf_name_to_gpt(name):
    if name in _TOP_NAMES:
        return _TOP_NAMES[name]
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in _BLOCK_NAMES and _is_index(parts[1]):
        return f"layers.{parts[1]}.{_BLOCK_NAMES[parts[2]]}"
    return None


def _is_index(text):
    """A canonical decimal block index ("0", "12"; not "00", "+1", " 1" or "١"), so that two GGUF
    names cannot map onto one layer."""
    return text.isascii() and text.isdigit() and str(int(text)) == text


def _check_layout(reader, path):
    """ValueError naming two tensors whose data ranges in the file overlap (one would alias the other)."""
    spans = sorted((int(t.data_offset), int(t.data_offset) + int(t.n_bytes), t.name) for t in reader.tensors)
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:]):
        if begin < end:
            raise ValueError(f"GPT.from_gguf: {path}: the data of tensor {second!r} overlaps that of "
                             f"{first!r}; the file is corrupted")


def read_gguf(path):
    """(GPTConfig kwargs, state dict with GPT names as float32 arrays, reader) of a Llama GGUF."""
    gguf = _require_gguf()
    if not os.path.isfile(path):
        raise FileNotFoundError(f"GPT.from_gguf: no such file {path!r}")
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, IndexError, KeyError, OverflowError, struct.error) as e:   # gguf's own parse errors
        raise ValueError(f"GPT.from_gguf: {path} is not a readable GGUF file (truncated or corrupted?): "
                         f"{type(e).__name__}: {e}") from None
    names = {t.name for t in reader.tensors}
    if len(names) != len(reader.tensors):
        raise ValueError(f"GPT.from_gguf: {path}: a tensor name appears twice")
    _check_layout(reader, path)
    kwargs = config_from_gguf(reader, names, path)
    state, unknown = {}, []
    for t in reader.tensors:
        name = gguf_name_to_gpt(t.name)
        if name is None:
            unknown.append(t.name)
            continue
        if name in state:  # cannot happen with canonical names; kept as the invariant
            raise ValueError(f"GPT.from_gguf: {path}: two tensors map onto {name}")
        w = gguf.quants.dequantize(t.data, t.tensor_type)
        w = np.asarray(w, dtype=np.float32).reshape(tuple(int(n) for n in reversed(t.shape)))
        if name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = kwargs["n_head" if name.endswith("q_proj.weight") else "n_kv_head"]
            if w.ndim and w.shape[0] % (2 * heads) == 0:  # else a wrong shape, named by load_gpt_state
                w = unpermute_qk(w, heads)
        state[name] = np.ascontiguousarray(w)
    if unknown:
        raise UnsupportedCheckpointError(f"{path}: tensors GPT has no place for: {unknown[:8]}")
    return kwargs, state, reader


def _pre_tokenizer(tk, pre):
    byte_level = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre in _DIGIT_SPLIT_PRES:
        return tk.pre_tokenizers.Sequence([tk.pre_tokenizers.Digits(individual_digits=True), byte_level])
    if pre in _LLAMA3_PRES:
        split = tk.pre_tokenizers.Split(tk.Regex(_LLAMA3_REGEX), behavior="isolated", invert=False)
        return tk.pre_tokenizers.Sequence(
            [split, tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if pre not in (None, "default", "gpt2", "gpt-2"):
        warnings.warn(f"GGUF tokenizer.ggml.pre = {pre!r} is not known to minigrad; using GPT-2's "
                      f"byte-level pre-tokenizer (encodings of some texts may differ from llama.cpp)",
                      stacklevel=3)
    return byte_level


def _is_list(value, kind):
    return isinstance(value, list) and all(type(v) is kind for v in value)


def _is_text(value):
    return value is None or isinstance(value, str)


def tokenizer_from_gguf(reader, where="GGUF"):
    """A `minigrad.data.BPETokenizer` from a GGUF's `tokenizer.ggml.*` metadata (None if not BPE).
    A malformed field (tokens that are not strings, a merge without a space, a token id out of range
    ...) is a ValueError naming it."""
    def get(key, ok=_is_text, want="a string", default=None):
        value = field_value(reader, key, default, where)
        if not ok(value):
            raise ValueError(f"{where}: GGUF metadata {key} must be {want}, got {value!r:.80} "
                             f"(tokenizer=False loads the weights without the tokenizer)")
        return value

    kind = get("tokenizer.ggml.model", lambda v: True)
    if kind != "gpt2":
        if kind is not None:
            warnings.warn(f"GGUF tokenizer model {kind!r} is not byte-level BPE; no tokenizer attached",
                          stacklevel=2)
        return None
    try:
        import tokenizers as tk
    except ImportError:
        warnings.warn("the GGUF's tokenizer needs the `tokenizers` package (pip install tokenizers); "
                      "model.tokenizer is None", stacklevel=3)
        return None
    from minigrad.data import BPETokenizer

    tokens = get("tokenizer.ggml.tokens", lambda v: _is_list(v, str) and v, "a list of strings")
    n = len(tokens)
    merges = get("tokenizer.ggml.merges", lambda v: _is_list(v, str) and all(" " in m for m in v),
                 "a list of 'left right' strings", [])
    types = get("tokenizer.ggml.token_type", lambda v: _is_list(v, int) and len(v) == n,
                f"a list of {n} ints", [1] * n)
    tok = tk.Tokenizer(tk.models.BPE(vocab={t: i for i, t in enumerate(tokens)},
                                     merges=[tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = _pre_tokenizer(tk, get("tokenizer.ggml.pre"))
    tok.decoder = tk.decoders.ByteLevel()
    tok.add_special_tokens([tk.AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == _CONTROL])
    tok.add_tokens([tk.AddedToken(t, normalized=False)
                    for t, ty in zip(tokens, types) if ty == _USER_DEFINED])
    out = BPETokenizer(tok)
    for end in ("bos", "eos"):
        key = f"tokenizer.ggml.{end}_token_id"
        token_id = get(key, lambda v: v is None or type(v) is int, "an int")
        if token_id is not None and not 0 <= token_id < n:     # llama.cpp warns and drops it too
            warnings.warn(f"{where}: GGUF metadata {key} = {token_id} is outside the vocabulary [0, {n}); "
                          f"ignored", stacklevel=3)
            token_id = None
        setattr(out, f"{end}_token_id", token_id)
    out.chat_template = get("tokenizer.chat_template")
    return out


def load_gguf(cls, path, dtype=np.float32, tokenizer=True):
    """`cls` (GPT) with the dequantised weights of a Llama GGUF; `model.tokenizer` from its metadata."""
    kwargs, state, reader = read_gguf(path)
    model = load_gpt_state(cls, kwargs, state, dtype, source=path)
    model.tokenizer = tokenizer_from_gguf(reader, path) if tokenizer else None
    return model
