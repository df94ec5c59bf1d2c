"""Checkpoints as safetensors files, written atomically.

One checkpoint is one file `ckpt_<step>.safetensors` in a run directory. It holds the model's
weights (`model.<name>`), the optimizer's arrays (`optim.<path>`), and in the safetensors
metadata, as JSON: the model type and config, the step, RNG states, the tokenizer, the
optimizer's non-array state and any extra training state. BLAKE2b digests of the data section
and of the header (every name, shape, offset and metadata value) catch corruption that leaves
the layout intact.

Atomic write: temp file in the same directory -> write -> flush -> fsync -> os.replace ->
fsync the directory. A process killed at any moment leaves either the old set of checkpoints or
the old set plus a complete new one, never a partial `ckpt_*.safetensors`.

The safetensors reader and writer here are self-contained (numpy only); files they write load
with the `safetensors` package and vice versa.
"""
import contextlib
import dataclasses
import glob
import hashlib
import importlib
import json
import math
import os
import re
import secrets
import stat
import struct
import threading
import warnings
from io import BytesIO

import numpy as np

from minigrad.kernels.validate import check_int

FORMAT = "minigrad-checkpoint/1"
CKPT_PATTERN = re.compile(r"^ckpt_(\d+)\.safetensors$")

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16,
           "U8": np.uint8, "BOOL": np.bool_}
_CODES = {np.dtype(v): k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 * 1024 * 1024

# model type -> (module, model class, config class)
MODEL_TYPES = {"gpt": ("minigrad.models", "GPT", "GPTConfig"),
               "rwkv7": ("minigrad.models", "RWKV7", "RWKV7Config")}


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: truncated, corrupted, or not matching the model."""


# ----------------------------------------------------------------------------------------------
# safetensors files


def _as_array(v):
    if not isinstance(v, (np.ndarray, np.generic)):
        v = getattr(v, "data", v)  # a Tensor
    return np.asarray(v, order="C")


def _tensor_layout(tensors):
    """(header entries, arrays) of name -> array: the arrays little-endian and C-contiguous (views when
    they already are), in file order (sorted names), and each one's safetensors entry."""
    entries, arrays, offset = {}, [], 0
    for name in sorted(tensors):
        arr = _as_array(tensors[name])
        kind = arr.dtype.kind
        code = _CODES.get(np.dtype(f"{kind}{arr.dtype.itemsize}")) if kind in "fiub" else None
        if code is None:
            raise TypeError(f"safetensors: tensor {name!r} has unsupported dtype {arr.dtype}")
        arr = np.asarray(arr.astype(arr.dtype.newbyteorder("<"), copy=False), order="C")   # keeps 0-d
        entries[name] = {"dtype": code, "shape": list(arr.shape),
                         "data_offsets": [offset, offset + arr.nbytes]}
        arrays.append(arr)
        offset += arr.nbytes
    return entries, arrays


def _raw(arr):
    """The bytes of a C-contiguous array, without a copy."""
    return arr.reshape(-1).view(np.uint8)


def write_safetensors(f, tensors, metadata=None):
    """Write a safetensors file holding `tensors` (name -> array) and `metadata` (str -> str) to the binary
    file `f`, tensor by tensor (the data section is never copied into one buffer: a 1.6 GB checkpoint
    costs no 1.6 GB more memory). `minigrad.blake2b` (digest of the data section) and
    `minigrad.header_blake2b` (digest of the rest of the header, see `_header_digest`) are added to the
    metadata."""
    entries, arrays = _tensor_layout(tensors)
    digest = hashlib.blake2b(digest_size=16)
    for arr in arrays:
        digest.update(_raw(arr))
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    meta["minigrad.blake2b"] = digest.hexdigest()
    meta[_HEADER_DIGEST] = _header_digest(meta, entries)
    header = json.dumps({"__metadata__": meta, **entries}, separators=(",", ":")).encode("utf-8")
    header += b" " * (-len(header) % 8)
    f.write(struct.pack("<Q", len(header)) + header)
    for arr in arrays:
        f.write(_raw(arr))


def encode_safetensors(tensors, metadata=None):
    """The bytes of a safetensors file holding `tensors` and `metadata` (see `write_safetensors`)."""
    buf = BytesIO()
    write_safetensors(buf, tensors, metadata)
    return buf.getvalue()


_HEADER_DIGEST = "minigrad.header_blake2b"


def _header_digest(meta, entries):
    """Digest of the parsed header minus this digest itself, serialised canonically (sorted keys),
    so that it can be recomputed from what the reader parsed."""
    canon = {"__metadata__": {k: v for k, v in meta.items() if k != _HEADER_DIGEST}, **entries}
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def _is_count(v):
    return type(v) is int and v >= 0  # JSON integers only (not bool, not float)


def _parse_entry(key, info, bad):
    """(begin, end, key, dtype code, shape) of one header entry, each field checked."""
    try:
        code, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
    except (KeyError, TypeError, ValueError):
        raise bad(f"malformed entry for {key!r}") from None
    if not isinstance(code, str) or (code not in _DTYPES and code != "BF16"):
        raise bad(f"tensor {key!r} has unknown dtype {code!r}")
    if not (isinstance(shape, list) and all(map(_is_count, shape)) and _is_count(begin) and _is_count(end)):
        raise bad(f"tensor {key!r}: shape {shape!r} and offsets {[begin, end]!r} must be counts (ints >= 0)")
    itemsize = 2 if code == "BF16" else np.dtype(_DTYPES[code]).itemsize
    if end - begin != math.prod(shape) * itemsize or math.prod(d or 1 for d in shape) * itemsize >= 2 ** 62:
        raise bad(f"tensor {key!r}: offsets {begin}..{end} do not fit shape {shape} {code}")
    return begin, end, key, code, tuple(shape)


def bf16_to_float32(bits):
    """bfloat16 values given as their 16 bits (a uint16 array) as float32: the high half of a float32."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _read_tensor(view, begin, end, code, shape):
    """A copy of one tensor's bytes as an array (BF16 widened to float32). Slices of `view` stay
    temporaries so that nothing keeps the buffer exported once the caller releases `view`."""
    if code == "BF16":
        return bf16_to_float32(np.frombuffer(view[begin:end], "<u2")).reshape(shape)
    dtype = np.dtype(_DTYPES[code])
    return np.frombuffer(view[begin:end], dtype.newbyteorder("<")).reshape(shape).astype(dtype, copy=True)


def decode_safetensors(buf, name="<buffer>"):
    """(tensors, metadata) from the bytes of a safetensors file (bytes, or an mmap that the
    caller may close as soon as this returns or raises); CheckpointError if it is truncated or
    corrupted. Every header entry is checked before any data is read. BF16 tensors are widened
    to float32."""
    def bad(why):
        return CheckpointError(f"{name}: not a valid safetensors file ({why}); "
                               f"it is truncated or corrupted")

    if len(buf) < 8:
        raise bad(f"only {len(buf)} bytes")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > min(len(buf) - 8, _MAX_HEADER):
        raise bad(f"header length {n} exceeds the file size {len(buf)}")
    try:
        header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:  # RecursionError: [[[[...
        raise bad(f"unreadable header: {e}") from None
    if not isinstance(header, dict):
        raise bad("header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict):
        raise bad("metadata is not a JSON object")
    if _HEADER_DIGEST in meta and _header_digest(meta, header) != meta[_HEADER_DIGEST]:
        raise bad("header checksum mismatch")
    entries, covered, start = sorted(_parse_entry(k, v, bad) for k, v in header.items()), 0, 8 + n
    for begin, end, key, *_ in entries:
        if begin != covered:
            raise bad(f"tensor {key!r} starts at byte {begin}, expected {covered}")
        covered = end
    if covered != len(buf) - start:
        raise bad(f"data section has {len(buf) - start} bytes but the tensors cover {covered}")
    digest = meta.get("minigrad.blake2b")
    with memoryview(buf) as view:  # released even on error: an mmap with exported views cannot close
        if digest is not None and hashlib.blake2b(view[start:], digest_size=16).hexdigest() != digest:
            raise bad("checksum mismatch")
        tensors = {key: _read_tensor(view, start + begin, start + end, code, shape)
                   for begin, end, key, code, shape in entries}
    return tensors, meta


def _fsync_dir(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open directories; os.replace is still atomic there
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_temp(path, directory):
    """(fd, name) of a new temp file beside `path`, created exclusively with mode 0o666 less the
    umask, as a plain open() would (tempfile.mkstemp makes 0600, which os.replace would keep)."""
    prefix = os.path.join(directory, ".tmp_" + os.path.basename(path) + ".")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = prefix + secrets.token_hex(6)
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temp file beside {path}")


@contextlib.contextmanager
def atomic_output(path):
    """A binary file whose content replaces `path` in one step when the block succeeds (a temp file
    beside it, fsync, os.replace, directory fsync), so `path` is always either the old file or the
    whole new one and the new content is never held in memory. A new file gets the mode a plain
    open() would give it; a replaced file keeps its mode."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = _create_temp(path, directory)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(path):
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def atomic_write_bytes(path, payload):
    """Write `payload` to `path` atomically (see `atomic_output`)."""
    with atomic_output(path) as f:
        f.write(payload)


def save_safetensors(path, tensors, metadata=None):
    """Atomically write a safetensors file (`write_safetensors` into `atomic_output`)."""
    with atomic_output(path) as f:
        write_safetensors(f, tensors, metadata)


def load_safetensors(path):
    """(tensors, metadata) of a safetensors file, with clear errors for damaged files."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such checkpoint file: {path}")
    with open(path, "rb") as f:
        return decode_safetensors(f.read(), path)


# ----------------------------------------------------------------------------------------------
# nested state (optimizer state_dict, RNG states) <-> JSON skeleton + named arrays


def _is_array(v):
    return isinstance(v, (np.ndarray, np.generic)) or isinstance(getattr(v, "data", None), np.ndarray)


def flatten_state(obj, prefix, arrays):
    """A JSON-able skeleton of `obj`; arrays (and Tensors) go to `arrays` under `prefix.<path>`
    and are referenced from the skeleton. Non-string dict keys and tuples are preserved."""
    if _is_array(obj):
        arrays[prefix] = _as_array(obj)
        return {"__array__": prefix}
    if isinstance(obj, dict):
        items = [[k, flatten_state(v, f"{prefix}.{k}", arrays)] for k, v in obj.items()]
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return dict(items)
        return {"__items__": items}
    if isinstance(obj, (list, tuple)):
        seq = [flatten_state(v, f"{prefix}.{i}", arrays) for i, v in enumerate(obj)]
        return {"__tuple__": seq} if isinstance(obj, tuple) else seq
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"checkpoint: cannot store {type(obj).__name__} at {prefix!r}")


def unflatten_state(skel, arrays):
    """Inverse of `flatten_state`."""
    if isinstance(skel, dict):
        if "__array__" in skel:
            if skel["__array__"] not in arrays:
                raise CheckpointError(f"the checkpoint has no array {skel['__array__']!r}, which its "
                                      f"optimizer state refers to; it is truncated or corrupted")
            return arrays[skel["__array__"]]
        if "__items__" in skel:
            return {k: unflatten_state(v, arrays) for k, v in skel["__items__"]}
        if "__tuple__" in skel:
            return tuple(unflatten_state(v, arrays) for v in skel["__tuple__"])
        return {k: unflatten_state(v, arrays) for k, v in skel.items()}
    if isinstance(skel, list):
        return [unflatten_state(v, arrays) for v in skel]
    return skel


# ----------------------------------------------------------------------------------------------
# models


def model_type_of(model):
    """The registry name of a model instance ('gpt', 'rwkv7'), or its class name lower-cased."""
    name = type(model).__name__
    for key, (_, cls_name, _) in MODEL_TYPES.items():
        if cls_name == name:
            return key
    return name.lower()


def config_to_dict(config):
    if config is None:
        return None
    if dataclasses.is_dataclass(config):
        return dataclasses.asdict(config)
    if isinstance(config, dict):
        return dict(config)
    return {k: v for k, v in vars(config).items() if not k.startswith("_")}


def _registered(model_type):
    """(model class, config class) of a registered model type; CheckpointError for another."""
    if model_type not in MODEL_TYPES:
        raise CheckpointError(f"unknown model type {model_type!r}; known: {sorted(MODEL_TYPES)}")
    module, cls_name, cfg_name = MODEL_TYPES[model_type]
    mod = importlib.import_module(module)
    return getattr(mod, cls_name), getattr(mod, cfg_name)


def make_config(model_type, config, source="checkpoint"):
    """The config object of a registered model type from a saved dict (an object passes through):
    CheckpointError naming `source` for an unknown key or a value the config rejects."""
    cfg_cls = _registered(model_type)[1]
    if isinstance(config, cfg_cls):
        return config
    try:
        return cfg_cls(**config)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{source}: the saved {model_type!r} config {config!r} is invalid: "
                              f"{e}") from None


def build_model(model_type, config, dtype=np.float32, source="checkpoint"):
    """A fresh model of a registered type from its config (a dict or config object)."""
    return _registered(model_type)[0](make_config(model_type, config, source), dtype=dtype)


def _weights_signature(config):
    """What of a config decides what the weights compute (`weights_signature()` when the config
    defines one, e.g. GPTConfig leaves out max_seq_len), as a dict."""
    if hasattr(config, "weights_signature"):
        return config.weights_signature()
    return config_to_dict(config) or {}


def check_config_matches(model, ckpt):
    """CheckpointError naming every config field in which `ckpt` differs from `model.config`
    (same shapes do not make the same model: n_head, rope_base, norm_eps change the maths). Fields
    the config declares as runtime-only (GPT's max_seq_len) may differ."""
    if ckpt.config is None or getattr(model, "config", None) is None:
        return
    saved = ckpt.config
    if ckpt.model_type in MODEL_TYPES:
        saved = make_config(ckpt.model_type, saved, ckpt.path)
    saved, own = _weights_signature(saved), _weights_signature(model.config)
    diffs = [f"{k}: checkpoint {saved.get(k)!r} vs model {own.get(k)!r}"
             for k in sorted(set(saved) | set(own)) if saved.get(k) != own.get(k)]
    if diffs:
        raise CheckpointError(f"{ckpt.path} was saved from a {type(model).__name__} with another config: "
                              + _listing(diffs))


def dtype_problems(arrays, expected, exact=True):
    """'name: dtype D, expected E' for each array whose dtype is not `expected` (one dtype, or a
    dict name -> dtype; names it lacks are skipped). With exact=False any float may stand for a
    float (imports convert F16/BF16/F64 to the model's dtype), but never an int or bool."""
    out = []
    for name in sorted(set(arrays) & set(expected) if isinstance(expected, dict) else arrays):
        found = np.asarray(arrays[name]).dtype
        want = np.dtype(expected[name] if isinstance(expected, dict) else expected)
        if found != want and (exact or found.kind != "f" or want.kind != "f"):
            out.append(f"{name}: dtype {found}, expected {want}")
    return out


def _listing(items, n=8):
    return "; ".join(items[:n]) + (" ..." if len(items) > n else "")


def check_import_dtypes(arrays, expected, source):
    """TypeError naming every array of an imported (HF / official) checkpoint that is not floating
    point where the model has a float; float arrays of another precision are converted."""
    problems = dtype_problems(arrays, expected, exact=False)
    if problems:
        raise TypeError(f"{source}: weights must be floating point: {_listing(problems)}")


def _fit_problems(expected, arrays, stop_at_missing=False):
    """Problems of `arrays` (name -> array) against `expected`, (name, shape) pairs consumed lazily:
    missing and unexpected keys, shape mismatches ("name: checkpoint (..) vs model (..)"). With
    stop_at_missing the walk ends at the first missing name, so a file declaring 10**6 layers is
    rejected without walking them (unexpected keys are then not listed)."""
    seen, missing, shapes = set(), [], []
    for name, shape in expected:
        if name not in arrays:
            missing.append(name)
            if stop_at_missing:
                break
            continue
        seen.add(name)
        if tuple(arrays[name].shape) != tuple(shape):
            shapes.append(f"{name}: checkpoint {tuple(arrays[name].shape)} vs model {tuple(shape)}")
    unexpected = [] if missing and stop_at_missing else sorted(set(arrays) - seen)
    return [f"{what}: {_listing(items)}" for what, items in
            (("missing keys", sorted(missing)), ("unexpected keys", unexpected), ("shape mismatches", shapes))
            if items]


def check_state_compatible(model, state, source="checkpoint"):
    """Raise CheckpointError naming every missing/unexpected key and shape/dtype mismatch (a
    minigrad checkpoint must have exactly the model's dtypes: no silent casts)."""
    own = {name: t.data for name, t in model._state_items()}     # the arrays themselves, no copies
    problems = _fit_problems(((k, v.shape) for k, v in own.items()), state)
    dtypes = dtype_problems(state, {k: v.dtype for k, v in own.items()})
    if dtypes:
        problems.append("dtype mismatches: " + _listing(dtypes))
    if problems:
        raise CheckpointError(f"{source} does not fit {type(model).__name__}: " + " | ".join(problems))


def check_shapes(shapes, arrays, source):
    """Compare (name, shape) pairs (an iterator, consumed lazily) with `arrays` before any model is
    built: CheckpointError naming `source` and the (first) missing, unexpected and mis-shaped
    tensors. Stops at the first missing tensor, so a file declaring 10**6 layers fails at once."""
    problems = _fit_problems(shapes, arrays, stop_at_missing=True)
    if problems:
        raise CheckpointError(f"{source} does not fit its declared config: " + " | ".join(problems))


def load_model_weights(model, state, source="checkpoint"):
    """Copy `state` (name -> array) into `model`, after a compatibility check with a clear error."""
    check_state_compatible(model, state, source)
    model.load_state_dict(state)
    return model


def check_optimizer_state(optimizer, state, source="checkpoint"):
    """CheckpointError naming every per-parameter optimizer array that is not floating point
    (float arrays are cast to the parameter's dtype by `optimizer.load_state_dict`)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    try:  # saved parameter indices pair with the optimizer's parameters in group order
        saved = [i for group in state["param_groups"] for i in group["params"]]
        dtype_of = {i: p.data.dtype for i, p in zip(saved, params)}
        arrays = {(i, k): v for i, entry in state["state"].items() for k, v in entry.items()
                  if isinstance(v, np.ndarray) and v.ndim and i in dtype_of}
    except (KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{source}: the optimizer state is malformed: {e!r}") from None
    problems = dtype_problems({f"optim.state.{i}.{k}": v for (i, k), v in arrays.items()},
                              {f"optim.state.{i}.{k}": dtype_of[i] for i, k in arrays}, exact=False)
    if problems:
        raise CheckpointError(f"{source}: optimizer state of the wrong dtype: {_listing(problems)}")


def check_optimizer_checkpoint(optimizer, ckpt):
    """CheckpointError unless `ckpt` holds optimizer state for `optimizer`: present, saved from the
    same optimizer class (when the checkpoint records it), per-parameter arrays floating point."""
    if ckpt.optimizer_state is None:
        raise CheckpointError(f"{ckpt.path} holds no optimizer state")
    own_type = type(optimizer).__name__
    if ckpt.optimizer_type is not None and ckpt.optimizer_type != own_type:
        raise CheckpointError(f"{ckpt.path} holds the state of an optimizer of class "
                              f"{ckpt.optimizer_type}, not {own_type}")
    check_optimizer_state(optimizer, ckpt.optimizer_state, ckpt.path)


# ----------------------------------------------------------------------------------------------
# checkpoints


@dataclasses.dataclass
class Checkpoint:
    """What `load_checkpoint` returns. `model_state` and `optimizer_state` are plain numpy."""
    path: str
    step: int
    model_type: str
    config: dict
    model_state: dict
    optimizer_state: object = None
    rng: dict = None
    tokenizer: object = None
    extra: dict = None
    optimizer_type: str = None   # the optimizer's class name (None in checkpoints older than the field)
    lora: dict = None            # LoRA adapters: nn.lora.adapter_record + "base" (see save_checkpoint)

    def build_model(self):
        """A model of the saved type and config carrying the saved weights. With LoRA adapters (`lora`)
        they are put on it again (nn.lora.apply_adapter_record), on the base weights saved here or, in
        a checkpoint of adapters only, on the base model reloaded from lora["base"] (`load_base_model`:
        checked against its fingerprint)."""
        if self.lora is None:
            return self._plain_model(self.model_state)
        from minigrad.nn.lora import adapter_names, apply_adapter_record, load_lora_state_dict

        record = {k: v for k, v in self.lora.items() if k != "base"}
        names = set(adapter_names(record))
        base_state = {k: v for k, v in self.model_state.items() if k not in names}
        if self.lora.get("base") is None:
            model = self._plain_model(base_state)
        elif base_state or not names <= set(self.model_state):
            missing = sorted(names - set(self.model_state))
            raise CheckpointError(f"{self.path}: its tensors are not the adapters its LoRA record names "
                                  f"(unexpected {_listing(sorted(base_state), 3) or 'none'}; missing "
                                  f"{_listing(missing, 3) or 'none'}): it is corrupted")
        else:
            model = load_base_model(self.lora["base"], self.path, self)
        try:
            apply_adapter_record(model, record, where=f"{self.path}: its LoRA record")
            load_lora_state_dict(model, {k: v for k, v in self.model_state.items() if k in names})
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{self.path}: its LoRA adapters do not fit the model: {e}") from None
        return model

    def _plain_model(self, state):
        """A model of the saved type and config carrying `state` (name -> array)."""
        floats = {v.dtype for v in state.values() if v.dtype.kind == "f"}
        dtype = np.float64 if floats == {np.dtype(np.float64)} else np.float32  # as saved
        config = make_config(self.model_type, self.config, self.path)
        check_shapes(config.param_shapes(), state, self.path)  # before allocating the model
        model = build_model(self.model_type, config, dtype, self.path)
        return load_model_weights(model, state, self.path)


# ----------------------------------------------------------------------------------------------
# LoRA: the base model a checkpoint of adapters names


def _is_adapter(name):
    from minigrad.nn.lora import ADAPTER_PARTS

    return any(part in ADAPTER_PARTS for part in name.split("."))


def weights_fingerprint(model):
    """BLAKE2b (hex) of the model's weights without its LoRA adapters: every name, dtype, shape and
    byte, in name order. A checkpoint of adapters records its base model's, to refuse other weights."""
    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in sorted(model._state_items(), key=lambda item: item[0]):
        if _is_adapter(name):
            continue
        arr = np.ascontiguousarray(tensor.data)
        digest.update(f"{name}|{arr.dtype.str}|{arr.shape}\n".encode("utf-8"))
        digest.update(arr.reshape(-1).view(np.uint8))
    return digest.hexdigest()


def merged_model(model):
    """`model` with any LoRA adapters folded into its weights (nn.merge_lora), else as it is."""
    from minigrad.nn.lora import lora_layers, merge_lora

    return merge_lora(model) if lora_layers(model) else model


MAX_BASE_CHAIN = 16            # LoRA runs on LoRA runs: deeper than this is a broken record, not use
_BASE_CHAIN = threading.local()


def load_base_model(base, source, checkpoint=None):
    """The model at base["path"] (`minigrad.pretrained.load_pretrained`, any LoRA adapters of a minigrad
    checkpoint merged) whose kind and weights_fingerprint are base["kind"] and base["fingerprint"]:
    the base model the adapters of checkpoint `source` were trained on. CheckpointError when it is
    gone, unreadable or has other weights (the adapters would compute something else), or, given the
    `checkpoint` (a Checkpoint) of the adapters, another config than its saved one (`check_config_matches`:
    a config.json whose rope_theta or rms_norm_eps changed computes something else on the same weights)."""
    from minigrad.pretrained import LABELS, load_pretrained

    path, kind = base["path"], base["kind"]
    what = f"{source} holds only LoRA adapters; their base model ({LABELS.get(kind, kind)} {path})"
    if not os.path.exists(path):
        raise CheckpointError(f"{what} is no longer there: put it back at that path (a symlink will do); the "
                              "adapters cannot be used without it")
    chain = getattr(_BASE_CHAIN, "sources", ())     # the adapter checkpoints being loaded in this thread
    sources = chain + (os.path.realpath(source),)
    if os.path.realpath(path) in sources or len(sources) > MAX_BASE_CHAIN:
        raise CheckpointError(f"{what} leads back to a checkpoint that needs it (or through more than "
                              f"{MAX_BASE_CHAIN} LoRA runs): a crafted or corrupted record")
    _BASE_CHAIN.sources = sources
    try:
        loaded = load_pretrained(path, need_tokenizer=False)
    except (OSError, ValueError, ImportError, TypeError) as e:
        raise CheckpointError(f"{what} cannot be loaded: {e}") from None
    finally:
        _BASE_CHAIN.sources = chain
    if loaded.kind != kind:
        raise CheckpointError(f"{what} is now a {LABELS[loaded.kind]}: restore the original file")
    model = merged_model(loaded.model)
    found = weights_fingerprint(model)
    if found != base["fingerprint"]:
        raise CheckpointError(f"{what} has changed since the adapters were trained (weights fingerprint "
                              f"{found}, recorded {base['fingerprint']}): restore the original, or the "
                              "adapters would compute something else")
    if checkpoint is not None:
        try:
            check_config_matches(model, checkpoint)
        except CheckpointError as e:
            raise CheckpointError(f"{what} has changed since the adapters were trained (its config): {e}; "
                                  "restore the original") from None
    return model


def _lora_record(model, base):
    """The `lora` metadata of a checkpoint of `model`: None without adapters, else its adapter_record
    with "base": the base model the checkpoint then names instead of holding its weights (a dict of
    str path, kind, fingerprint; see load_base_model), or None (the base weights are in the file)."""
    from minigrad.nn.lora import adapter_record, lora_layers

    if not lora_layers(model):
        if base is not None:
            raise ValueError("save_checkpoint: base names the base model of LoRA adapters, but the model "
                             "has none")
        return None
    if base is not None and not _is_base_record(base):
        raise ValueError(f"save_checkpoint: base must be a dict of str path, kind and fingerprint, got "
                         f"{base!r}")
    return {**adapter_record(model), "base": None if base is None else dict(base)}


def _is_base_record(base):
    """True for a dict of str path, kind and fingerprint (see _lora_record)."""
    fields = ("path", "kind", "fingerprint")
    return isinstance(base, dict) and all(isinstance(base.get(k), str) for k in fields)


def checkpoint_path(run_dir, step):
    return os.path.join(run_dir, f"ckpt_{int(step):08d}.safetensors")


def list_checkpoints(run_dir):
    """[(step, path)] of the complete checkpoints in `run_dir`, oldest first."""
    found = []
    for path in glob.glob(os.path.join(glob.escape(run_dir), "ckpt_*.safetensors")):
        m = CKPT_PATTERN.match(os.path.basename(path))
        if m:
            found.append((int(m.group(1)), path))
    return sorted(found)


def latest_checkpoint(run_dir):
    """Path of the newest checkpoint in `run_dir`, or None."""
    found = list_checkpoints(run_dir)
    return found[-1][1] if found else None


def save_checkpoint(run_dir, step, model, optimizer=None, *, config=None, model_type=None,
                    tokenizer=None, rng=None, extra=None, keep=3, base=None):
    """Atomically write `ckpt_<step>.safetensors` in `run_dir` and keep only the newest `keep`
    up to `step`.

    `config` defaults to `model.config`; `rng` is a dict of JSON-able generator states (e.g. the
    batch sampler's and `minigrad.get_rng_state()`); `extra` any JSON-able training state.
    A model with LoRA adapters is recorded as such (metadata `lora`: their config and layers), so
    that `Checkpoint.build_model` puts them back. `base` (such a model only): {"path", "kind",
    "fingerprint"} of the pretrained model the adapters adapt (`weights_fingerprint` of it); the file
    then holds the adapters alone and `build_model` reloads the base from that path.
    `keep` 0 or None keeps every checkpoint. Checkpoints with a higher step than `step` (another
    run's) are never deleted, and a RuntimeWarning names the highest: `latest_checkpoint` and
    `load_checkpoint(run_dir)` return it, not the one just written.
    """
    step = check_int("save_checkpoint", "step", step, 0)  # ckpt_-0000001 would never be listed
    if keep is not None:                                   # keep=-1 would delete the oldest
        keep = check_int("save_checkpoint", "keep", keep, 0)
    os.makedirs(run_dir, exist_ok=True)
    for stale in glob.glob(os.path.join(glob.escape(run_dir), ".tmp_ckpt_*")):
        try:  # temp files of a save that was killed
            os.unlink(stale)
        except OSError:
            pass
    lora = _lora_record(model, base)
    if lora is not None and base is not None:   # the adapters only: the base model is named instead
        from minigrad.nn.lora import lora_state_dict

        state = lora_state_dict(model)
    else:
        state = model.state_dict()
    arrays = {f"model.{k}": _as_array(v) for k, v in state.items()}
    optim_skeleton = None
    if optimizer is not None:
        optim_skeleton = flatten_state(optimizer.state_dict(), "optim", arrays)
    info = {
        "format": FORMAT,
        "step": step,
        "model_type": model_type or model_type_of(model),
        "config": config_to_dict(config if config is not None else getattr(model, "config", None)),
        "optimizer": optim_skeleton,
        "optimizer_type": None if optimizer is None else type(optimizer).__name__,
        "rng": rng,
        "tokenizer": tokenizer.to_dict() if hasattr(tokenizer, "to_dict") else tokenizer,
        "extra": extra,
        "lora": lora,
    }
    path = checkpoint_path(run_dir, step)
    save_safetensors(path, arrays, {"format": FORMAT, "minigrad": json.dumps(info)})
    found = list_checkpoints(run_dir)
    if keep:
        for _, old in [c for c in found if c[0] <= step][:-keep]:
            os.unlink(old)
        _fsync_dir(run_dir)
    if found and found[-1][0] > step:
        warnings.warn(f"{run_dir} holds {found[-1][1]}, a higher step than the {step} just saved (another "
                      f"run?); it was kept, and latest_checkpoint / load_checkpoint({run_dir!r}) return it",
                      RuntimeWarning, stacklevel=2)
    return path


def _check_info(info, path):
    """CheckpointError naming the first field of the checkpoint metadata of the wrong type."""
    def bad(key, want):
        raise CheckpointError(f"{path}: checkpoint metadata field {key!r} must be {want}, got "
                              f"{info.get(key)!r}; the checkpoint is corrupted")

    if type(info["step"]) is not int or info["step"] < 0:
        bad("step", "an int >= 0")
    if not isinstance(info["model_type"], str):
        bad("model_type", "a string")
    for key in ("config", "rng", "extra"):
        if info.get(key) is not None and not isinstance(info[key], dict):
            bad(key, "an object or null")
    if info.get("optimizer_type") is not None and not isinstance(info["optimizer_type"], str):
        bad("optimizer_type", "a string or null")
    if info.get("tokenizer") is not None and not isinstance(info["tokenizer"], (dict, str)):
        bad("tokenizer", "an object, a string or null")
    lora = info.get("lora")
    if lora is not None:
        modules = lora.get("modules") if isinstance(lora, dict) else None
        if not (isinstance(modules, list) and all(isinstance(n, str) for n in modules)
                and (lora.get("base") is None or _is_base_record(lora["base"]))):
            raise CheckpointError(f"{path}: checkpoint metadata field 'lora' must be an object with a list "
                                  f"of module names and a base of str path, kind and fingerprint (or null), "
                                  f"got {lora!r:.200}; the checkpoint is corrupted")


def _load_file(path):
    tensors, meta = load_safetensors(path)
    if meta.get("format") != FORMAT or "minigrad" not in meta:
        raise CheckpointError(f"{path} is a safetensors file but not a minigrad checkpoint "
                              f"(format {meta.get('format')!r}, expected {FORMAT!r})")
    try:
        info = json.loads(meta["minigrad"])
        info["step"], info["model_type"], info["config"]  # noqa: B018 - required keys
    except (json.JSONDecodeError, KeyError, TypeError, RecursionError) as e:  # RecursionError: [[[[...
        raise CheckpointError(f"{path}: checkpoint metadata is corrupted: {e!r}") from None
    _check_info(info, path)
    model_state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    optim_state = None
    if info.get("optimizer") is not None:
        optim_state = unflatten_state(info["optimizer"], tensors)
    tok = info.get("tokenizer")
    if tok is not None:
        from minigrad.data.tokenizer import tokenizer_from_dict
        try:
            tok = tokenizer_from_dict(tok)
        except Exception as e:  # noqa: BLE001 - any failure means a damaged tokenizer record
            raise CheckpointError(f"{path}: the saved tokenizer cannot be rebuilt: {e!r}") from None
    return Checkpoint(path=path, step=info["step"], model_type=info["model_type"], config=info["config"],
                      model_state=model_state, optimizer_state=optim_state, rng=info.get("rng"),
                      tokenizer=tok, extra=info.get("extra"), optimizer_type=info.get("optimizer_type"),
                      lora=info.get("lora"))


def load_checkpoint(path, model=None, optimizer=None):
    """Load a checkpoint file, or the newest loadable one in a run directory.

    With `model`, the weights are copied in (its type, config and shapes must match, else
    CheckpointError; GPT's max_seq_len may differ); with `optimizer`, its state is restored (an
    optimizer of another class than the saved one is a CheckpointError). Returns a `Checkpoint`.
    In a directory, a damaged newest checkpoint is skipped with a warning in favour of the
    previous one.
    """
    if os.path.isdir(path):
        found = list_checkpoints(path)
        if not found:
            raise FileNotFoundError(f"no checkpoints (ckpt_*.safetensors) in {path}")
        errors = []
        for _, file in reversed(found):
            try:
                ckpt = _load_file(file)
            except CheckpointError as e:
                errors.append(str(e))
                warnings.warn(f"skipping damaged checkpoint: {e}", stacklevel=2)
                continue
            break
        else:
            raise CheckpointError(f"no loadable checkpoint in {path}:\n  " + "\n  ".join(errors))
    else:
        ckpt = _load_file(path)
    if optimizer is not None:  # checked first: a failed load changes neither weights nor state
        check_optimizer_checkpoint(optimizer, ckpt)
    if model is not None:
        own_type = model_type_of(model)
        if own_type != ckpt.model_type:
            raise CheckpointError(f"{ckpt.path} holds a {ckpt.model_type!r} model, not a {own_type!r} "
                                  f"({type(model).__name__})")
        check_state_compatible(model, ckpt.model_state, ckpt.path)  # keys, shapes, dtypes by name
        check_config_matches(model, ckpt)                           # same shapes, other maths
        model.load_state_dict(ckpt.model_state)
    if optimizer is not None:
        optimizer.load_state_dict(ckpt.optimizer_state)
    return ckpt
