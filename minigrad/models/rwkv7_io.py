"""Official RWKV-7 ("x070") checkpoints <-> minigrad's RWKV7.

`load_rwkv7(RWKV7, path)` reads BlinkDL's `.pth` files (also `.pt` / `.bin`; without torch, by
`minigrad.torch_format`, which never runs code named by the file; an unreadable one, or an entry that
is not name -> dense tensor, is a CheckpointError naming it) or `.safetensors` files with the same names
(`emb.weight`, `blocks.0.ln0.weight`, `blocks.{i}.att.x_r`, ..., `head.weight`); BF16/F16 weights
become float32 (or float64 with dtype=np.float64); integer or bool weights are rejected
(TypeError). The config is inferred from the shapes.

`save_rwkv7(model, path)` writes those names as safetensors, or as a PyTorch file when the path ends
in `.pth` / `.pt` / `.bin` (no torch needed; `.pth` is the only format BlinkDL's `rwkv` package reads):
the same suffix rule as the reader, so what it writes reads back. Layer 0's value-residual
parameters `blocks.0.att.v0/v1/v2`, present in official files but unused by every RWKV-7
implementation, are written as zeros so the file has the official key set.
"""
import os

import numpy as np

from minigrad.io import CheckpointError, check_import_dtypes, save_safetensors
from minigrad.torch_format import read_torch_state_dict, write_torch_file

_LAYER0_UNUSED = ("v0", "v1", "v2")
TORCH_SUFFIXES = (".pth", ".pt", ".bin")   # read and written as PyTorch files; anything else is safetensors
_STRIP_PREFIXES = ("_orig_mod.", "module.", "model.")


def _strip_prefix(state):
    for prefix in _STRIP_PREFIXES:
        if state and all(k.startswith(prefix) for k in state):
            return {k[len(prefix):]: v for k, v in state.items()}
    return state


def _read_pth(path, dtype):
    """name -> array (floats as `dtype`) of a PyTorch state dict file; CheckpointError naming the
    file (and the entry) when it is unreadable, not a flat name -> tensor dict, or names code."""
    try:
        return read_torch_state_dict(path, float_dtype=dtype)
    except CheckpointError as e:
        raise CheckpointError(f"RWKV7.from_pretrained: {e}") from None


def read_rwkv7_state(path, dtype=np.float32):
    """name -> array (official names, `dtype`) of a `.pth` or `.safetensors` RWKV-7 checkpoint."""
    from minigrad.models.hf_llama import read_safetensors_file

    if not os.path.isfile(path):
        raise FileNotFoundError(f"RWKV7.from_pretrained: no such file {path!r}")
    if path.endswith(".safetensors"):
        state = read_safetensors_file(path)
    elif path.endswith(TORCH_SUFFIXES):
        state = _read_pth(path, dtype)
    else:
        raise ValueError(f"RWKV7.from_pretrained: {path!r} must end in .safetensors or one of "
                         f"{', '.join(TORCH_SUFFIXES)} (a PyTorch file)")
    state = _strip_prefix(state)
    check_import_dtypes(state, dtype, f"RWKV7.from_pretrained: {path}")  # before any cast
    return {k: np.ascontiguousarray(v, dtype=dtype) for k, v in state.items()}


def load_rwkv7(cls, path, dtype=np.float32):
    """An RWKV7 (`cls`) carrying the weights of an official checkpoint file."""
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise TypeError(f"RWKV7.from_pretrained: dtype must be float32 or float64, got {dtype}")
    return cls.from_state_dict(read_rwkv7_state(path, dtype))


def official_state(model):
    """The model's weights under the official names, including layer 0's unused v0/v1/v2 (zeros);
    LoRA adapters folded in (nn.lora.merged_state_dict)."""
    from minigrad.nn.lora import merged_state_dict

    state = {k: np.ascontiguousarray(getattr(v, "data", v)) for k, v in merged_state_dict(model).items()}
    if "blocks.1.att.v0" in state:
        for name in _LAYER0_UNUSED:
            key = f"blocks.0.att.{name}"
            state.setdefault(key, np.zeros_like(state[f"blocks.1.att.{name}"]))
    return state


def save_rwkv7(model, path):
    """Write the model as an official-format file; returns the path. The suffix decides the format
    as in `load_rwkv7`: .pth / .pt / .bin a PyTorch file (written without torch), anything else safetensors
    (".safetensors" is appended unless the path ends in it), so the file written reads back."""
    state = official_state(model)
    if path.endswith(TORCH_SUFFIXES):
        write_torch_file(path, state)     # atomically
        return path
    if not path.endswith(".safetensors"):
        path += ".safetensors"
    save_safetensors(path, state, {"format": "pt"})
    return path
