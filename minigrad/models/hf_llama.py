"""Hugging Face Llama (and Mistral, Qwen2) checkpoints <-> minigrad's GPT, without torch or transformers.

`load_hf(GPT, path)` reads a directory written by transformers' `LlamaForCausalLM.save_pretrained`:
`config.json` plus `model.safetensors` (or shards listed in `model.safetensors.index.json`), or, where
there are none, PyTorch's `pytorch_model.bin` (or shards listed in `pytorch_model.bin.index.json`, as
transformers 4 wrote with safe_serialization=False; read by `minigrad.torch_format`, no torch needed).
F16/BF16/F64 weights become the model's dtype (float32 by default); integer or bool weights
are rejected (TypeError naming them). `save_hf(model, path)` writes
`config.json` + `model.safetensors` (atomically, file by file) that transformers loads.

Names: GPT uses HF's Llama names without the `model.` prefix (`layers.0.self_attn.q_proj.weight`,
`...q_proj.bias` with biases); `lm_head.weight` exists only when the embeddings are untied. Both use
the half-split RoPE layout (rotate_half pairs dimension i with i + head_dim/2), so Q/K weights are
copied unchanged. Mistral and Qwen2 use the same names and differ from Llama only in what
`config_from_hf` maps: Mistral's sliding window (exact while sequences fit in it, so max_seq_len is
capped at it) and Qwen2's q/k/v biases (no o bias; its sliding-window layers are rejected).
"""
import json
import mmap
import os
import warnings
from dataclasses import fields

import numpy as np

from minigrad.io import (
    atomic_write_bytes,
    check_import_dtypes,
    check_shapes,
    decode_safetensors,
    save_safetensors,
)
from minigrad.kernels.validate import check_bool, check_finite_scalar, check_int
from minigrad.nn.init import no_init
from minigrad.ops.rope import ROPE_LENGTH_KEY, ROPE_SCALING_KEYS, check_rope_scaling
from minigrad.torch_format import read_torch_state_dict

PREFIX = "model."
CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
BIN_NAME = "pytorch_model.bin"
BIN_INDEX_NAME = "pytorch_model.bin.index.json"
_LAYOUTS = ((INDEX_NAME, WEIGHTS_NAME), (BIN_INDEX_NAME, BIN_NAME))  # (index, single file), preferred first
TOKENIZER_NAME = "tokenizer.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"     # bos/eos token strings, the chat template
CHAT_TEMPLATE_NAME = "chat_template.jinja"          # where transformers >= 4.43 saves a single template
ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}
# transformers' config defaults where they differ by model type (used when config.json omits the key)
_TYPE_DEFAULTS = {"llama": {"num_key_value_heads": None, "max_position_embeddings": 2048},
                  "mistral": {"num_key_value_heads": 8, "max_position_embeddings": 4096 * 32,
                              "sliding_window": 4096},
                  "qwen2": {"num_key_value_heads": 32, "max_position_embeddings": 32768}}


class UnsupportedCheckpointError(ValueError):
    """A checkpoint that uses a feature GPT does not implement (bias, RoPE scaling, ...)."""


# ----------------------------------------------------------------------------------------------
# config


def _count(hf, key, where, default=None):
    """hf[key] as an int >= 1 (40.9, "16", true or 0 are errors naming the field); `default` when
    the key is absent or null (KeyError when there is no default)."""
    value = hf.get(key)
    if value is None:
        if default is None:
            raise KeyError(key)
        return default
    return check_int(where, key, value, 1)


def _positive(hf, key, where, default):
    """hf[key] as a finite number > 0; `default` when the key is absent or null."""
    value = hf.get(key)
    return default if value is None else check_finite_scalar(where, key, value, positive=True)


def _rope_params(hf, where):
    """{key: the rope_scaling / rope_parameters object (or {})}; ValueError naming a non-object."""
    out = {}
    for key in ("rope_scaling", "rope_parameters"):
        rope = hf.get(key) or {}
        if not isinstance(rope, dict):
            raise ValueError(f"{where}: {key} must be an object or null, got {rope!r}")
        out[key] = rope
    return out


def _reject(where, what):
    raise UnsupportedCheckpointError(f"{where}: {what}; minigrad's GPT does not support it")


def _check_supported(hf, where):
    """The model type (llama, mistral or qwen2) after rejecting what GPT cannot compute exactly."""
    model_type = hf.get("model_type", "llama")
    if model_type not in ARCHITECTURES:
        _reject(where, f"model_type is {model_type!r}, only {sorted(ARCHITECTURES)} are supported")
    act = hf.get("hidden_act", "silu")
    if act not in ("silu", "swish"):       # transformers maps both names to SiLU
        _reject(where, f"hidden_act is {act!r} (GPT's MLP is SwiGLU, i.e. 'silu')")
    if model_type == "qwen2" and hf.get("use_sliding_window"):
        _reject(where, "use_sliding_window is true (Qwen2's sliding-window attention layers)")
    return model_type


def _flag(hf, key, where):
    """hf[key] as a bool, False when absent or null."""
    value = hf.get(key)
    return False if value is None else check_bool(where, key, value)


def _biases(hf, model_type, where):
    """GPTConfig bias fields: Llama's attention_bias / mlp_bias flags; Qwen2's fixed q/k/v biases;
    none for Mistral (transformers' Mistral has none whatever its config says)."""
    if model_type == "llama":
        return dict(attention_bias=_flag(hf, "attention_bias", where), mlp_bias=_flag(hf, "mlp_bias", where))
    return dict(attention_bias=model_type == "qwen2")


def _rope_scaling(hf, where, max_positions):
    """GPTConfig.rope_scaling (canonical, or None) from rope_scaling or else rope_parameters, as
    transformers picks; UnsupportedCheckpointError naming the field for another rope_type."""
    rope = _rope_params(hf, where)
    key = "rope_scaling" if rope["rope_scaling"] else "rope_parameters"
    kind = rope[key].get("rope_type", rope[key].get("type", "default"))
    if kind == "default":          # (transformers' default RoPE ignores partial_rotary_factor)
        return None
    if kind not in ROPE_SCALING_KEYS:
        _reject(where, f"{key} uses rope_type {kind!r} (implemented: default, "
                       f"{', '.join(ROPE_SCALING_KEYS)})")
    partial = rope[key].get("partial_rotary_factor", hf.get("partial_rotary_factor"))
    if partial not in (None, 1, 1.0):
        _reject(where, f"partial_rotary_factor is {partial} (GPT rotates whole heads)")
    params = {k: rope[key][k] for k in ROPE_SCALING_KEYS[kind] if k in rope[key]}  # HF ignores others
    if kind == "llama3" and hf.get(ROPE_LENGTH_KEY) is not None:   # transformers: the top-level key wins
        params[ROPE_LENGTH_KEY] = hf[ROPE_LENGTH_KEY]
    if kind == "dynamic":       # HF's dynamic NTK keeps the base up to max_position_embeddings
        params[ROPE_LENGTH_KEY] = max_positions
    return check_rope_scaling({"rope_type": kind, **params}, where, default_length=max_positions)


def _architecture(hf, model_type, where, d_model, n_head, max_positions):
    """GPTConfig fields beyond Llama's plain ones, each only when it differs from its default (a
    plain Llama config maps to exactly the keyword arguments it always did)."""
    head_dim = _count(hf, "head_dim", where, d_model // n_head)
    extra = dict(head_dim=head_dim if head_dim * n_head != d_model else None,
                 rope_scaling=_rope_scaling(hf, where, max_positions), **_biases(hf, model_type, where),
                 hf_model_type=model_type)
    if model_type == "mistral":
        window = hf.get("sliding_window", _TYPE_DEFAULTS["mistral"]["sliding_window"])
        extra["sliding_window"] = None if window is None else check_int(where, "sliding_window", window, 1)
    from minigrad.models.gpt import GPTConfig

    defaults = {f.name: f.default for f in fields(GPTConfig)}
    return {k: v for k, v in extra.items() if v != defaults[k]}


def config_from_hf(hf, where="config.json"):
    """GPTConfig keyword arguments from a transformers Llama / Mistral / Qwen2 config dict. Every
    field is checked (a ValueError names it): sizes must be JSON ints >= 1, rope_theta / rms_norm_eps
    numbers > 0. Mistral's max_seq_len is min(max_position_embeddings, sliding_window): GPT's full
    causal attention equals the windowed one only while sequences fit in the window."""
    try:
        d_model, n_head = _count(hf, "hidden_size", where), _count(hf, "num_attention_heads", where)
        model_type = _check_supported(hf, where)
        defaults = _TYPE_DEFAULTS[model_type]
        n_kv = _count(hf, "num_key_value_heads", where, defaults["num_key_value_heads"] or n_head)
        max_positions = _count(hf, "max_position_embeddings", where, defaults["max_position_embeddings"])
        extra = _architecture(hf, model_type, where, d_model, n_head, max_positions)
        # transformers' precedence: rope_scaling (legacy) or rope_parameters, then the top-level key
        rope = _rope_params(hf, where)
        theta = _positive(rope["rope_scaling"] or rope["rope_parameters"], "rope_theta", where,
                          _positive(hf, "rope_theta", where, 10000.0))
        tie = hf.get("tie_word_embeddings")
        window = extra.get("sliding_window")
        return dict(vocab_size=_count(hf, "vocab_size", where), d_model=d_model,
                    n_layer=_count(hf, "num_hidden_layers", where), n_head=n_head,
                    n_kv_head=n_kv,
                    ffn_hidden=_count(hf, "intermediate_size", where),
                    max_seq_len=max_positions if window is None else min(max_positions, window),
                    rope_base=theta,
                    norm_eps=_positive(hf, "rms_norm_eps", where, 1e-6),
                    tie_embeddings=False if tie is None else check_bool(where, "tie_word_embeddings", tie),
                    **extra)
    except KeyError as e:
        raise ValueError(f"{where}: missing field {e.args[0]!r}; not a Llama config") from None
    except TypeError as e:  # a field of the wrong JSON type: bad file content, not a bad argument
        raise ValueError(str(e)) from None


def config_to_hf(cfg, dtype="float32", bos_token_id=None, eos_token_id=None):
    """A transformers config dict (LlamaConfig, MistralConfig or Qwen2Config: cfg.hf_model_type)
    for a GPTConfig."""
    n_kv = cfg.n_kv_head or cfg.n_head
    kind = cfg.hf_model_type
    out = {"architectures": [ARCHITECTURES[kind]], "model_type": kind, "hidden_act": "silu",
           "vocab_size": cfg.vocab_size, "hidden_size": cfg.d_model, "num_hidden_layers": cfg.n_layer,
           "num_attention_heads": cfg.n_head, "num_key_value_heads": n_kv,
           "head_dim": cfg.head_dim, "intermediate_size": int(cfg.ffn_hidden),
           "max_position_embeddings": cfg.max_seq_len, "rope_theta": cfg.rope_base,
           "rms_norm_eps": cfg.norm_eps, "tie_word_embeddings": bool(cfg.tie_embeddings),
           "attention_bias": cfg.attention_bias, "mlp_bias": cfg.mlp_bias, "attention_dropout": 0.0,
           "initializer_range": 0.02, "use_cache": True, "torch_dtype": dtype}
    if kind != "llama":
        del out["attention_bias"], out["mlp_bias"]
    out.update(_architecture_to_hf(cfg))
    if bos_token_id is not None:
        out["bos_token_id"] = int(bos_token_id)
    if eos_token_id is not None:   # a list in Llama-3 style configs (several end tokens), kept a list
        out["eos_token_id"] = ([int(i) for i in eos_token_id] if isinstance(eos_token_id, (list, tuple))
                               else int(eos_token_id))
    return out


def _architecture_to_hf(cfg):
    """What config_to_hf writes beyond Llama's keys: rope_scaling, Mistral's sliding_window,
    Qwen2's use_sliding_window (Mistral and Qwen2 have no attention_bias / mlp_bias keys)."""
    out = {}
    if cfg.rope_scaling:
        out["rope_scaling"] = dict(cfg.rope_scaling)
        if cfg.rope_scaling["rope_type"] == "dynamic":   # HF's dynamic reads max_position_embeddings
            del out["rope_scaling"][ROPE_LENGTH_KEY]
    if cfg.hf_model_type == "mistral":
        out["sliding_window"] = cfg.sliding_window
    if cfg.hf_model_type == "qwen2":
        out.update(use_sliding_window=False, sliding_window=None)
    return out


# ----------------------------------------------------------------------------------------------
# weights


def read_safetensors_file(path):
    """name -> numpy array of one safetensors file (memory-mapped while reading, every array copied
    out; BF16 -> float32). A damaged file raises CheckpointError (decode keeps no view of the map)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:  # mmap cannot map an empty file
            return decode_safetensors(b"", path)[0]  # raises CheckpointError
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            tensors, _ = decode_safetensors(mm, path)
    return tensors


def _read_json(path):
    """The JSON object in `path`; ValueError naming the file if it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: [[[[...
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: holds a JSON {type(obj).__name__}, expected an object")
    return obj


def _shard_path(path, index, name):
    """`path`/`name` for a weight_map value: ValueError naming the index for a non-string, absolute or
    out-of-directory name, or a shard that is not a regular file (a FIFO would block open())."""
    if not isinstance(name, str) or not name or os.path.isabs(name):
        raise ValueError(f"{index}: weight_map value {name!r} must be a relative file name")
    root = os.path.realpath(path)
    file = os.path.realpath(os.path.join(root, name))
    if os.path.commonpath([root, file]) != root:
        raise ValueError(f"{index}: weight_map value {name!r} points outside {path}")
    if not os.path.isfile(file):
        raise ValueError(f"{index}: shard {name!r} is not a regular file in {path}")
    return file


def _index_shards(path, index):
    """[(file, names)] of a weights index: each shard with the tensor names its weight_map assigns it."""
    weight_map = _read_json(index).get("weight_map")
    if not isinstance(weight_map, dict):
        raise ValueError(f"{index}: no 'weight_map' object; not a weights index")
    shards = {}
    for tensor, name in weight_map.items():
        shards.setdefault(_shard_path(path, index, name), set()).add(tensor)
    return sorted(shards.items())


def weight_shards(path):
    """[(file, names)] of an HF checkpoint directory: one model.safetensors (names None: all of it),
    or each shard of an index with the tensor names its weight_map assigns to it; safetensors
    first, else pytorch_model.bin (or its index)."""
    for index_name, single_name in _LAYOUTS:
        index, single = os.path.join(path, index_name), os.path.join(path, single_name)
        if os.path.isfile(index):
            return _index_shards(path, index)
        if os.path.isfile(single):
            return [(single, None)]
    others = sorted(n for n in os.listdir(path) if n.endswith((".bin", ".pt", ".pth", ".safetensors", ".h5",
                                                                ".msgpack")))
    raise FileNotFoundError(f"{path}: no {WEIGHTS_NAME}, {INDEX_NAME}, {BIN_NAME} or {BIN_INDEX_NAME}"
                            + (f" (found {others})" if others else ""))


def weight_files(path):
    """The weight files of an HF checkpoint directory (one file, or the shards of an index)."""
    return [file for file, _ in weight_shards(path)]


def read_weight_file(file):
    """name -> array of one safetensors file, or else of one PyTorch state dict file (F16 kept, BF16
    widened to float32; CheckpointError for a damaged file or one naming code)."""
    if file.endswith(".safetensors"):
        return read_safetensors_file(file)
    return read_torch_state_dict(file)


def read_weights(path):
    """name -> array of an HF checkpoint directory. With an index, every shard must hold exactly
    the tensors the weight_map assigns to it (ValueError naming the shard otherwise)."""
    state = {}
    for file, names in weight_shards(path):
        tensors = read_weight_file(file)
        if names is not None and set(tensors) != names:
            extra, lacking = sorted(set(tensors) - names)[:6], sorted(names - set(tensors))[:6]
            raise ValueError(f"{file}: holds tensors {extra} that its index does not assign to it "
                             f"and lacks {lacking}")
        state.update(tensors)
    return state


def hf_to_gpt_names(state, tie_embeddings):
    """Strip `model.`; drop what GPT does not have (a tied lm_head, rotary inv_freq buffers)."""
    out = {}
    for name, value in state.items():
        if name.endswith("rotary_emb.inv_freq") or (tie_embeddings and name == "lm_head.weight"):
            continue
        out[name[len(PREFIX):] if name.startswith(PREFIX) else name] = value
    return out


def gpt_to_hf_names(state):
    return {(k if k == "lm_head.weight" else PREFIX + k): v for k, v in state.items()}


def _array(v):
    return np.asarray(getattr(v, "data", v))


def load_gpt_state(cls, config_kwargs, state, dtype=np.float32, source="checkpoint"):
    """A `cls` model (GPT) of `config_kwargs` carrying `state` (GPT names), cast to `dtype`."""
    from minigrad.models.gpt import GPTConfig

    try:
        config = GPTConfig(**config_kwargs)
    except (TypeError, ValueError) as e:     # sizes that do not fit together (heads not dividing d_model)
        raise ValueError(f"{source}: its config does not describe a valid GPT: {e}") from None
    check_shapes(config.param_shapes(), state, f"{source} (GPT({config_kwargs}))")  # before allocating
    model = _build(cls, config, dtype)
    own = {k: p.dtype for k, p in model.named_parameters()}    # GPT has no buffers
    check_import_dtypes(state, own, source)
    model.load_state_dict({k: np.ascontiguousarray(v, dtype=own[k]) for k, v in state.items()})
    return model


def _build(cls, config, dtype):
    """An uninitialised model (`nn.init.no_init`: every weight is loaded next, strictly)."""
    with no_init():
        return cls(config) if np.dtype(dtype) == np.float32 else cls(config, dtype=dtype)


def load_hf(cls, path, dtype=np.float32):
    """`cls` (GPT) from a transformers Llama directory; `model.tokenizer` from tokenizer.json if any."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"GPT.from_hf: {path!r} is not a directory")
    config_path = os.path.join(path, CONFIG_NAME)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"GPT.from_hf: {path} has no {CONFIG_NAME}")
    hf = _read_json(config_path)
    kwargs = config_from_hf(hf, config_path)
    state = hf_to_gpt_names(read_weights(path), kwargs["tie_embeddings"])
    model = load_gpt_state(cls, kwargs, state, dtype, source=path)
    model.tokenizer = _load_tokenizer(path, hf)
    return model


def _load_tokenizer(path, hf):
    """tokenizer.json through the `tokenizers` package, with bos/eos ids and the chat template
    (`read_tokenizer_config`); else None."""
    file = os.path.join(path, TOKENIZER_NAME)
    if not os.path.isfile(file):
        return None
    try:
        from minigrad.data import BPETokenizer

        with open(file, encoding="utf-8") as f:
            tok = BPETokenizer.from_json(f.read())
    except ImportError:
        return None
    except Exception as e:  # a tokenizer we cannot read must not stop the weights from loading
        warnings.warn(f"GPT.from_hf: {file} not loaded ({e}); model.tokenizer is None", stacklevel=3)
        return None
    return read_tokenizer_config(tok, path, hf)


def read_tokenizer_config(tok, path, hf=None):
    """Give `tok` (a BPETokenizer read from the Hugging Face directory `path`) the bos/eos ids and the
    chat template the directory holds, as transformers reads them: the ids of config.json (`hf`), else
    the ids of tokenizer_config.json's bos_token / eos_token strings; the template of
    chat_template.jinja, else tokenizer_config.json's chat_template (of named templates, the "default"
    one). A file that cannot be read is skipped with a warning: it must not stop the model loading."""
    config = _tokenizer_config(path)
    for end in ("bos", "eos"):
        value = (hf or {}).get(f"{end}_token_id")
        if value is None:
            value = _token_id(tok, config.get(f"{end}_token"))
        setattr(tok, f"{end}_token_id", value)
    tok.chat_template = _chat_template(path, config)
    return tok


def _tokenizer_config(path):
    """The object in `path`/tokenizer_config.json; {} when there is none or it is not a JSON object."""
    file = os.path.join(path, TOKENIZER_CONFIG_NAME)
    if not os.path.isfile(file):
        return {}
    try:
        return _read_json(file)
    except (OSError, ValueError) as e:
        warnings.warn(f"GPT.from_hf: {e}; its bos/eos tokens and chat template are not read", stacklevel=5)
        return {}


def _token_id(tok, token):
    """The id of a tokenizer_config.json token entry: a string, or an AddedToken object with "content"."""
    if isinstance(token, dict):
        token = token.get("content")
    return tok.token_to_id(token) if isinstance(token, str) else None


def _chat_template(path, config):
    """The chat template of an HF directory: chat_template.jinja (transformers' precedence), else
    tokenizer_config.json's chat_template; None when there is neither."""
    file = os.path.join(path, CHAT_TEMPLATE_NAME)
    if os.path.isfile(file):
        try:
            with open(file, encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError) as e:
            warnings.warn(f"GPT.from_hf: {file} not read ({e})", stacklevel=5)
    return _default_template(config.get("chat_template"), os.path.join(path, TOKENIZER_CONFIG_NAME))


def _default_template(value, where):
    """A tokenizer_config.json chat_template: a string as it is; named templates (a list of
    {"name", "template"} objects, or an object name -> template) give their "default" one. Anything
    else, or named templates without a default, warns and gives None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(t, dict) and {"name", "template"} <= set(t) for t in value):
        value = {t["name"]: t["template"] for t in value}
    if isinstance(value, dict) and isinstance(value.get("default"), str):
        return value["default"]
    what = (f"named templates {sorted(map(str, value))} without a 'default' one" if isinstance(value, dict)
            else f"not a Jinja template ({type(value).__name__} {value!r:.40})")
    warnings.warn(f"GPT.from_hf: {where}: chat_template is {what}; tokenizer.chat_template is None",
                  stacklevel=6)
    return None


def tokenizer_config_to_hf(tokenizer):
    """The tokenizer_config.json of a BPETokenizer: the fast tokenizer class, the bos/eos strings and
    the chat template (each when set), so that transformers and `from_hf` read them back."""
    out = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}
    for end in ("bos", "eos"):
        token = tokenizer.special_token(end)
        if token is not None:
            out[f"{end}_token"] = token
    if tokenizer.chat_template is not None:
        out["chat_template"] = tokenizer.chat_template
    return out


def _save_tokenizer(tokenizer, path):
    """tokenizer.json and tokenizer_config.json of a BPETokenizer; a chat_template.jinja left by an
    earlier save is removed (transformers and `from_hf` would prefer it to the template saved now)."""
    atomic_write_bytes(os.path.join(path, TOKENIZER_NAME), tokenizer.to_dict()["json"].encode("utf-8"))
    config = json.dumps(tokenizer_config_to_hf(tokenizer), indent=2, ensure_ascii=False)
    atomic_write_bytes(os.path.join(path, TOKENIZER_CONFIG_NAME), config.encode("utf-8"))
    stale = os.path.join(path, CHAT_TEMPLATE_NAME)
    if os.path.exists(stale):
        os.unlink(stale)


def save_hf(model, path, tokenizer=None):
    """Write `config.json` + `model.safetensors` (+ `tokenizer.json` and `tokenizer_config.json` with
    the chat template, for a BPE tokenizer) that transformers loads; LoRA adapters folded in
    (nn.lora.merged_state_dict; the model keeps them)."""
    from minigrad.nn.lora import merged_state_dict

    cfg = model.config
    state = {k: np.ascontiguousarray(_array(v)) for k, v in merged_state_dict(model).items()}
    if cfg.tie_embeddings:
        state.pop("lm_head.weight", None)
    dtype = str(state["embed_tokens.weight"].dtype)
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    os.makedirs(path, exist_ok=True)
    save_safetensors(os.path.join(path, WEIGHTS_NAME), gpt_to_hf_names(state), {"format": "pt"})
    stale_index = os.path.join(path, INDEX_NAME)
    if os.path.exists(stale_index):  # an old sharded checkpoint would take precedence over ours
        os.unlink(stale_index)
    hf = config_to_hf(cfg, dtype, getattr(tokenizer, "bos_token_id", None),
                      getattr(tokenizer, "eos_token_id", None))
    atomic_write_bytes(os.path.join(path, CONFIG_NAME), json.dumps(hf, indent=2).encode("utf-8"))
    if tokenizer is not None and getattr(tokenizer, "kind", None) == "bpe":
        _save_tokenizer(tokenizer, path)
    return path
