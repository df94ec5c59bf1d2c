"""Recognise a model on disk and load it with its tokenizer: the loader behind
`python -m minigrad sample | eval | info --ckpt PATH`.

    loaded = load_pretrained("SmolLM2-135M-Instruct.Q4_1.gguf")
    loaded.model, loaded.tokenizer, loaded.description

PATH is one of (`detect(path)` names the kind without loading anything):

- "minigrad": a run directory (its newest ckpt_*.safetensors) or a checkpoint file written by
  `python -m minigrad train`: `minigrad.io.load_checkpoint`, the tokenizer saved inside;
- "hf": a Hugging Face model directory (config.json + model.safetensors / pytorch_model.bin, or
  shards; Llama, Mistral, Qwen2): `GPT.from_hf`, its tokenizer.json;
- "gguf": a llama.cpp `.gguf` file (Llama): `GPT.from_gguf`, the tokenizer in its metadata (needs the
  `gguf` and `tokenizers` packages);
- "rwkv7": an official RWKV-7 checkpoint (`.pth` / `.pt` / `.bin`, or `.safetensors` without
  minigrad's metadata): `RWKV7.from_pretrained`, the RWKV "World" tokenizer read from the vocabulary
  file shipped in the `rwkv` package (`RWKVWorldTokenizer`).

`tokenizer=PATH` replaces the model's tokenizer by a tokenizer.json (Hugging Face `tokenizers`) or an
RWKV vocabulary .txt. The tokenizer's ids must fit the model's vocabulary (ValueError otherwise).
"""
import dataclasses
import json
import os
import struct

from minigrad import io
from minigrad.data.tokenizer import (
    RWKV_VOCAB_NAME,
    BPETokenizer,
    RWKVWorldTokenizer,
    _require_tokenizers,
    default_rwkv_vocab,
)
from minigrad.models.rwkv7_io import TORCH_SUFFIXES  # PyTorch files: official RWKV-7 checkpoints

ACCEPTED = ("a minigrad run directory or ckpt_*.safetensors file, a Hugging Face model directory "
            "(config.json + weights), a .gguf file, or an official RWKV-7 .pth/.safetensors file")
TOKENIZER_FILES = "a tokenizer.json (Hugging Face tokenizers) or an RWKV vocabulary .txt"
HF_CONFIG, HF_TOKENIZER = "config.json", "tokenizer.json"
GGUF_MAGIC = b"GGUF"
_MAX_HEADER = 100 * 1024 * 1024                 # a safetensors header larger than this is not peeked at
LABELS = {"minigrad": "minigrad checkpoint", "hf": "Hugging Face model", "gguf": "GGUF model",
          "rwkv7": "official RWKV-7 checkpoint"}


@dataclasses.dataclass
class Loaded:
    """What `load_pretrained` returns. `tokenizer` is None only with need_tokenizer=False; then
    `tokenizer_source` says why there is none. `checkpoint` is the minigrad Checkpoint (kind
    "minigrad"), else None."""
    path: str
    kind: str
    model: object
    tokenizer: object
    tokenizer_source: str
    checkpoint: object = None

    @property
    def description(self):
        """One line: what was loaded, its size and context, and the tokenizer."""
        where = (f"{self.checkpoint.path} (step {self.checkpoint.step})" if self.checkpoint is not None
                 else self.path)
        size = parameter_count(self.model) / 1e6
        return (f"{LABELS[self.kind]} {where}: {architecture(self.model)}, {size:.1f}M parameters, "
                f"vocab {self.model.config.vocab_size}, context {context(self.model)}; "
                f"tokenizer {self.tokenizer!r} ({self.tokenizer_source})")


def architecture(model):
    """'GPT (llama)' or 'RWKV7'."""
    kind = getattr(model.config, "hf_model_type", None)
    return f"{type(model).__name__} ({kind})" if kind else type(model).__name__


def parameter_count(model):
    return sum(p.data.size for p in model.parameters())


def context(model):
    """The model's context window in words: GPT's max_seq_len, unbounded for a recurrent model."""
    limit = getattr(model.config, "max_seq_len", None)
    return f"{limit} tokens" if limit is not None else "unbounded (recurrent)"


# ---- what is at the path ---------------------------------------------------------------------------


def detect(path):
    """The kind of model at `path` ("minigrad", "hf", "gguf" or "rwkv7"), from its name, a directory's
    listing or a file's first bytes, without loading it. FileNotFoundError / ValueError naming what is
    accepted when it is none of them."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such checkpoint or model: {path!r} does not exist "
                                f"(accepted: {ACCEPTED})")
    if os.path.isdir(path):
        if io.list_checkpoints(path):
            return "minigrad"
        if os.path.isfile(os.path.join(path, HF_CONFIG)):
            return "hf"
        raise FileNotFoundError(f"no checkpoints (ckpt_*.safetensors) in {path} and no {HF_CONFIG}: it is "
                                f"neither a minigrad run directory nor a Hugging Face model directory "
                                f"(accepted: {ACCEPTED})")
    if path.endswith(".gguf") or _first_bytes(path, 4) == GGUF_MAGIC:
        return "gguf"
    if path.endswith(".safetensors"):
        return "minigrad" if _is_minigrad_safetensors(path) else "rwkv7"
    if path.endswith(TORCH_SUFFIXES):
        return "rwkv7"
    raise ValueError(f"{path}: not a model file minigrad recognises (accepted: {ACCEPTED})")


def _first_bytes(path, n):
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def _safetensors_metadata(path):
    """The `__metadata__` dict of a safetensors file's header ({} if it has none), or None when the
    header cannot be read (then minigrad's loader names the damage)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return None
            (n,) = struct.unpack("<Q", head)
            if n > min(os.path.getsize(path) - 8, _MAX_HEADER):
                return None
            header = json.loads(f.read(n).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    return meta if isinstance(meta, dict) else {}


def _is_minigrad_safetensors(path):
    """A ckpt_*.safetensors name, minigrad's metadata, or a header too damaged to tell (so that
    `io.load_checkpoint` reports the damage as it always has)."""
    if io.CKPT_PATTERN.match(os.path.basename(path)):
        return True
    meta = _safetensors_metadata(path)
    return meta is None or meta.get("format") == io.FORMAT or "minigrad" in meta


# ---- loading --------------------------------------------------------------------------------------


def load_pretrained(path, tokenizer=None, need_tokenizer=True):
    """`Loaded` model and tokenizer of what is at `path` (see the module docstring). `tokenizer`: a
    tokenizer file that replaces the model's own. What the tokenizer needs (a package, a file) is
    checked before the weights load; with need_tokenizer=False a missing tokenizer is not an error
    (`Loaded.tokenizer` None, `tokenizer_source` the reason)."""
    kind = detect(path)
    if tokenizer is not None:
        override = load_tokenizer_file(tokenizer)
        model, ckpt = _load_model(kind, path, want_tokenizer=False)
        return _with_tokenizer(path, kind, model, ckpt, override, f"--tokenizer {tokenizer}")
    try:
        source = _tokenizer_source(kind, path)
    except (ValueError, ImportError) as e:
        if need_tokenizer:
            raise
        model, ckpt = _load_model(kind, path, want_tokenizer=False)
        return Loaded(path, kind, model, None, _reason(e), ckpt)
    model, ckpt = _load_model(kind, path, want_tokenizer=True)
    try:
        tok, source = _own_tokenizer(kind, path, model, ckpt, source)
    except (ValueError, ImportError) as e:
        if need_tokenizer:
            raise
        return Loaded(path, kind, model, None, _reason(e), ckpt)
    return _with_tokenizer(path, kind, model, ckpt, tok, source)


def _with_tokenizer(path, kind, model, ckpt, tok, source):
    """The `Loaded` of a model and its tokenizer, once the tokenizer's ids are known to fit the model."""
    check_vocab_fits(model, tok, source)
    return Loaded(path, kind, model, tok, source, ckpt)


def _reason(error):
    return "none: " + " ".join(str(error).split())


def _load_model(kind, path, want_tokenizer):
    """(model, minigrad Checkpoint or None) of a path of `kind`."""
    from minigrad.models import GPT, RWKV7

    if kind == "minigrad":
        ckpt = io.load_checkpoint(path)
        return ckpt.build_model(), ckpt
    if kind == "hf":
        return GPT.from_hf(path), None
    if kind == "gguf":
        return GPT.from_gguf(path, tokenizer=want_tokenizer), None
    try:
        return RWKV7.from_pretrained(path), None
    except KeyError as e:       # a state dict without RWKV-7's names
        what = "not a minigrad checkpoint and not" if path.endswith(".safetensors") else "not"
        raise ValueError(f"{path} is {what} an RWKV-7 checkpoint ({e.args[0]}); accepted: {ACCEPTED}"
                         ) from None


def _tokenizer_source(kind, path):
    """Where the tokenizer of a `kind` model at `path` comes from, checked before its weights load: the
    file to read (HF tokenizer.json, RWKV vocabulary) or None (inside the checkpoint / GGUF).
    ValueError / ImportError saying what is missing and that --tokenizer PATH gives one."""
    if kind == "hf":
        file = os.path.join(path, HF_TOKENIZER)
        if not os.path.isfile(file):
            raise ValueError(f"{path} has no {HF_TOKENIZER} (the model's tokenizer): give one with "
                             f"--tokenizer PATH ({TOKENIZER_FILES})")
        _require_tokenizers()
        return file
    if kind == "gguf":
        _require_tokenizers()
    if kind == "rwkv7":
        vocab = default_rwkv_vocab()
        if vocab is None:
            raise ValueError(f"{path} is an RWKV-7 model: it reads text with the RWKV World tokenizer, whose "
                             f"vocabulary {RWKV_VOCAB_NAME} ships in the `rwkv` package (pip install rwkv), "
                             f"which is not installed: give the vocabulary file with --tokenizer PATH")
        return vocab
    return None


def _own_tokenizer(kind, path, model, ckpt, source):
    """(tokenizer, where it came from) of a loaded model, from `source` (`_tokenizer_source`)."""
    if kind == "minigrad":
        if ckpt.tokenizer is None:
            raise ValueError(f"{ckpt.path} has no tokenizer: give one with --tokenizer PATH "
                             f"({TOKENIZER_FILES})")
        return ckpt.tokenizer, "saved in the checkpoint"
    if kind == "rwkv7":
        return RWKVWorldTokenizer.from_file(source), source
    tok = getattr(model, "tokenizer", None)
    if tok is None and kind == "hf":          # from_hf warned and went on: read it again for the error
        tok = load_tokenizer_file(source)
    if tok is None:
        raise ValueError(f"{path}: its metadata holds no byte-level BPE tokenizer: give one with "
                         f"--tokenizer PATH ({TOKENIZER_FILES})")
    return tok, source or "the GGUF's metadata"


def load_tokenizer_file(path):
    """A tokenizer from a file: a tokenizer.json (or a directory holding one) -> BPETokenizer, an RWKV
    vocabulary .txt -> RWKVWorldTokenizer."""
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, HF_TOKENIZER)):
            raise FileNotFoundError(f"--tokenizer: the directory {path} holds no {HF_TOKENIZER} "
                                    f"(give {TOKENIZER_FILES})")
        path = os.path.join(path, HF_TOKENIZER)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--tokenizer: no such file {path!r} (give {TOKENIZER_FILES})")
    if path.endswith(".txt"):
        return RWKVWorldTokenizer.from_file(path)
    if not path.endswith(".json"):
        raise ValueError(f"--tokenizer {path!r}: give {TOKENIZER_FILES}")
    _require_tokenizers()
    try:
        with open(path, encoding="utf-8") as f:
            return BPETokenizer.from_json(f.read())
    except Exception as e:      # noqa: BLE001 - the tokenizers library raises plain Exceptions
        raise ValueError(f"--tokenizer {path}: not a Hugging Face tokenizer.json "
                         f"({type(e).__name__}: {e})") from None


def check_vocab_fits(model, tokenizer, source="the tokenizer"):
    """ValueError when the tokenizer can produce ids the model has no embedding for."""
    vocab = model.config.vocab_size
    if tokenizer.vocab_size > vocab:
        raise ValueError(f"the tokenizer {tokenizer!r} ({source}) has ids up to {tokenizer.vocab_size - 1}, "
                         f"but the model's vocabulary has {vocab} entries: it is not this model's tokenizer "
                         f"(give the right one with --tokenizer PATH)")


def summary(loaded):
    """{field: value} that `python -m minigrad info --ckpt PATH` prints."""
    model, tok = loaded.model, loaded.tokenizer
    return {"path": loaded.checkpoint.path if loaded.checkpoint is not None else loaded.path,
            "kind": LABELS[loaded.kind], "model": architecture(model),
            "config": repr(model.config), "parameters": f"{parameter_count(model):,}",
            "context": context(model), "tokenizer": repr(tok) if tok is not None else "none",
            "tokenizer from": loaded.tokenizer_source,
            "eos token id": getattr(tok, "eos_token_id", None)}
