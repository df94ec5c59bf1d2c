"""The training loop behind `python -m minigrad train`: data, model, AdamW, schedule, evaluation,
checkpoints, resume, metrics, plot and a closing sample.

    from minigrad.train import TrainConfig, train
    result = train(TrainConfig(model="gpt", size="small", minutes=5, out="runs/gpt"))
    result = train(TrainConfig(init_from="SmolLM2-135M-Instruct.Q4_1.gguf", lora=8, steps=20))

A run trains a fresh model of a preset size (with size overrides), or fine-tunes the pretrained
model at `init_from` (anything `minigrad.pretrained.load_pretrained` reads: its architecture, weights
and tokenizer), all of its weights or, with `lora` R, LoRA adapters on its linear projections. The
same loop, checkpoints, metrics and resume serve both; only the defaults differ (FINETUNE).

`--resume` continues bit-for-bit: the model, optimizer state, step, the batch sampler's and
minigrad's generators and the elapsed time all come from the newest checkpoint, so 20 steps
straight equal 10 steps + resume + 10 steps exactly (with the same thread count). A LoRA run's
checkpoints hold only the adapters: the base model is reloaded from `init_from` and checked against
the fingerprint of its weights recorded when the run started (`io.load_base_model`).
"""
import csv
import dataclasses
import importlib
import inspect
import json
import math
import os
import resource
import signal
import sys
import threading
import time
import typing

import numpy as np

import minigrad as mg
from minigrad import io, pretrained
from minigrad.data import (
    BatchSampler,
    compact_ids,
    eval_batches,
    load_corpus,
    make_tokenizer,
    train_val_split,
)
from minigrad.data.batching import sampler_generator
from minigrad.kernels.validate import check_finite_scalar, check_int
from minigrad.models.rwkv7_io import TORCH_SUFFIXES
from minigrad.models.sampling import check_sampling, check_streamer, textless_ids
from minigrad.nn.lora import LoraConfig, apply_lora, lora_layers
from minigrad.optim.lr_scheduler import warmup_constant, warmup_cosine
from minigrad.random import generator_from_state

# Model sizes: the model's config (vocab_size is filled from the tokenizer) and batch shape.
PRESETS = {
    "gpt": {
        "tiny": dict(model=dict(d_model=32, n_layer=2, n_head=2, ffn_hidden=64), batch_size=4, seq_len=32),
        "small": dict(model=dict(d_model=128, n_layer=4, n_head=4, ffn_hidden=384), batch_size=16,
                      seq_len=128),
        "medium": dict(model=dict(d_model=384, n_layer=6, n_head=6, ffn_hidden=1024), batch_size=8,
                       seq_len=256),
    },
    "rwkv7": {
        "tiny": dict(model=dict(d_model=32, n_layer=2, head_size=16, d_decay_lora=8, d_aaa_lora=8,
                                d_mv_lora=8, d_gate_lora=8), batch_size=4, seq_len=32),
        "small": dict(model=dict(d_model=128, n_layer=4, head_size=64, d_decay_lora=32, d_aaa_lora=32,
                                 d_mv_lora=32, d_gate_lora=32), batch_size=16, seq_len=128),
        "medium": dict(model=dict(d_model=384, n_layer=6, head_size=64, d_decay_lora=64, d_aaa_lora=64,
                                  d_mv_lora=64, d_gate_lora=64), batch_size=8, seq_len=256),
    },
}
DEFAULT_LR = {"tiny": 3e-3, "small": 3e-3, "medium": 1.5e-3}
SCRATCH = dict(warmup=50, weight_decay=0.1, keep=3, tokenizer="byte", bpe_vocab=1024)
# Fine-tuning a pretrained model (--init-from): a small learning rate (larger for LoRA adapters, which
# start at zero), a short warmup, no weight decay (it would pull pretrained weights towards zero),
# short batches a 135M model trains on a laptop, and one checkpoint kept for a full fine-tune (its
# weights and AdamW's two moments: 1.6 GB for 135M parameters)
FINETUNE = dict(lr=5e-5, lora_lr=1e-3, max_warmup=10, weight_decay=0.0, keep=3, full_keep=1, batch_size=4,
                seq_len=128)
# size overrides of a preset (from scratch), per model type, and their flags
SIZE_FLAGS = {"d_model": "--d-model", "n_layer": "--n-layer", "n_head": "--n-head",
              "ffn_hidden": "--ffn-hidden", "head_size": "--head-size"}
SIZE_FIELDS = {"gpt": ("d_model", "n_layer", "n_head", "ffn_hidden"),
               "rwkv7": ("d_model", "n_layer", "ffn_hidden", "head_size")}
# settings that describe a model trained from scratch: the pretrained model of --init-from decides them
SCRATCH_FLAGS = {"model": "--model", "size": "--config", "tokenizer": "--tokenizer",
                 "bpe_vocab": "--bpe-vocab", **SIZE_FLAGS}
LORA_FLAGS = {"lora_alpha": "--lora-alpha", "lora_dropout": "--lora-dropout",
              "lora_targets": "--lora-targets"}
ALL_LINEAR = "all-linear"
PRETRAINED_SUFFIXES = (".gguf", ".safetensors", *TORCH_SUFFIXES)


@dataclasses.dataclass
class TrainConfig:
    """Everything a training run needs; the CLI's options map one to one onto these fields. None
    means the default, which `resolved` fills in (it differs between training from scratch and
    fine-tuning a pretrained model, `init_from`)."""
    model: str = None                 # gpt | rwkv7 (default gpt; with init_from: the pretrained model's)
    size: str = None                  # a key of PRESETS[model] (default small)
    corpus: str = "shakespeare"       # "shakespeare", a text file or a directory of them
    tokenizer: str = None             # byte | char | bpe (default byte; with init_from: the pretrained one)
    bpe_vocab: int = None             # vocabulary of the bpe tokenizer (default 1024)
    init_from: str = None             # fine-tune this pretrained model (pretrained.load_pretrained's PATH)
    lora: int = 0                     # LoRA rank (0 = off: every weight trains); needs init_from
    lora_alpha: float = None          # LoRA scale s = lora_alpha / lora (default 2 * lora)
    lora_dropout: float = None        # dropout on the LoRA branch's input (default 0)
    lora_targets: str = None          # "all-linear" (default) or comma-separated layer names (q_proj,v_proj)
    d_model: int = None               # from scratch: size overrides on top of the preset
    n_layer: int = None
    n_head: int = None                # GPT
    ffn_hidden: int = None
    head_size: int = None             # RWKV-7
    steps: int = None                 # train this many steps ...
    minutes: float = None             # ... or for this long (the schedule follows elapsed time)
    stop_at: int = None               # stop at this step as if interrupted (schedule still for `steps`)
    out: str = None                   # run directory (default: `default_out`)
    resume: bool = False
    seed: int = 1337
    lr: float = None                  # peak learning rate (default per size; fine-tuning 5e-5, LoRA 1e-3)
    min_lr_ratio: float = 0.1         # cosine decays to lr * min_lr_ratio
    warmup: int = None                # linear warmup steps (default 50; fine-tuning 10 % of steps, <= 10)
    schedule: str = "cosine"          # cosine | constant (after warmup)
    weight_decay: float = None        # on 2-D ".weight" matrices only (default 0.1; fine-tuning 0)
    beta2: float = 0.95
    grad_clip: float = 1.0            # max global grad norm (0 = off)
    batch_size: int = None            # sequences per micro-batch (default per size; fine-tuning 4)
    seq_len: int = None               # (default per size; fine-tuning 128, at most the model's max_seq_len)
    grad_accum: int = 1               # micro-batches whose gradients make one optimizer step
    gradient_checkpointing: bool = False   # recompute each layer's activations in backward
    threads: int = None
    val_fraction: float = 0.1
    eval_every: int = 100             # steps between validation evaluations (and checkpoints)
    eval_batches: int = 8
    keep: int = None                  # checkpoints kept (default 3; a full fine-tune 1)
    sample_tokens: int = 400
    prompt: str = None                # default: "ROMEO:\n" on Shakespeare, else "\n"
    temperature: float = 0.8
    top_k: int = None
    top_p: float = None
    progress: bool = True             # tqdm bar (plain log lines without tqdm)
    plot: bool = True

    def resolved(self):
        """A copy with the defaults filled in (from scratch: per size; fine-tuning: FINETUNE) and every
        choice validated. A fine-tune's seq_len may stay None: `fit_to_model` sets it once the
        pretrained model (its max_seq_len) is loaded."""
        if self.steps is None and self.minutes is None:
            raise ValueError("give a length: steps or minutes")
        if self.steps is not None and self.minutes is not None:
            raise ValueError("give steps or minutes, not both")
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f"unknown schedule {self.schedule!r}; choose cosine or constant")
        self._check_ranges()
        cfg = self._resolved_finetune() if self.init_from is not None else self._resolved_scratch()
        return dataclasses.replace(cfg, corpus=_absolute_corpus(self.corpus), out=self.out or default_out(
            cfg.model, cfg.size, cfg.init_from, cfg.lora))

    def _resolved_scratch(self):
        """Model, size, tokenizer and the per-size defaults of a run from scratch."""
        model, size = self.model or "gpt", self.size or "small"
        if model not in PRESETS:
            raise ValueError(f"unknown model {model!r}; choose from {sorted(PRESETS)}")
        if size not in PRESETS[model]:
            raise ValueError(f"unknown size {size!r} for {model}; choose from {sorted(PRESETS[model])}")
        if self.lora:
            raise ValueError("train: --lora needs --init-from PATH: LoRA adapts the weights of a pretrained "
                             "model (a model trained from scratch trains all of its weights)")
        self._check_lora_off()
        check_size_overrides(model, size, self.size_overrides())
        preset = PRESETS[model][size]
        return dataclasses.replace(
            self, model=model, size=size, tokenizer=_or(self.tokenizer, SCRATCH["tokenizer"]),
            bpe_vocab=_or(self.bpe_vocab, SCRATCH["bpe_vocab"]), lr=_or(self.lr, DEFAULT_LR[size]),
            warmup=_or(self.warmup, SCRATCH["warmup"]),
            weight_decay=_or(self.weight_decay, SCRATCH["weight_decay"]),
            keep=_or(self.keep, SCRATCH["keep"]), batch_size=_or(self.batch_size, preset["batch_size"]),
            seq_len=_or(self.seq_len, preset["seq_len"]))

    def _resolved_finetune(self):
        """The fine-tuning defaults (FINETUNE) of a run from the pretrained model at init_from, which
        must exist and be a kind minigrad.pretrained recognises; the settings of a model trained from
        scratch must not be given."""
        given = [flag for field, flag in SCRATCH_FLAGS.items() if getattr(self, field) is not None]
        if given:
            raise ValueError(f"train: {given[0]} cannot be combined with --init-from: the architecture, "
                             "weights and tokenizer come from the pretrained model")
        init_from = os.path.abspath(os.path.expanduser(str(self.init_from)))
        try:    # a resumed full fine-tune no longer needs it (a LoRA run's checkpoint checks it)
            if not self.resume:
                pretrained.detect(init_from)
        except (OSError, ValueError) as e:
            raise _with_context(e, f"train: --init-from {self.init_from}") from None
        lora = self._lora_settings()
        warmup = self.warmup
        if warmup is None:
            warmup = min(FINETUNE["max_warmup"], self.steps // 10) if self.steps else FINETUNE["max_warmup"]
        return dataclasses.replace(
            self, init_from=init_from, **lora, lr=_or(self.lr, FINETUNE["lora_lr" if self.lora else "lr"]),
            warmup=warmup, weight_decay=_or(self.weight_decay, FINETUNE["weight_decay"]),
            keep=_or(self.keep, FINETUNE["keep" if self.lora else "full_keep"]),
            batch_size=_or(self.batch_size, FINETUNE["batch_size"]))

    def _check_lora_off(self):
        """The LoRA settings need --lora R."""
        given = [flag for field, flag in LORA_FLAGS.items() if getattr(self, field) is not None]
        if given:
            raise ValueError(f"train: {given[0]} is a setting of LoRA adapters: give --lora R (the rank) too")

    def _lora_settings(self):
        """lora_alpha (default 2 r), lora_dropout (0) and lora_targets ("all-linear") of a LoRA run."""
        if not self.lora:
            self._check_lora_off()
            return {}
        targets = ALL_LINEAR if self.lora_targets is None else self.lora_targets
        lora_target_modules(targets)      # a malformed list fails here, before anything is loaded
        return dict(lora_alpha=_or(self.lora_alpha, 2 * self.lora), lora_dropout=_or(self.lora_dropout, 0.0),
                    lora_targets=targets)

    def size_overrides(self):
        """{field: value} of the size overrides given (d_model, n_layer, ...)."""
        return {k: getattr(self, k) for k in SIZE_FLAGS if getattr(self, k) is not None}

    def _check_ranges(self):
        """Every numeric setting in its range before anything is read or written (a run that would
        fail at its first evaluation, save or sample must fail here instead). None: the default."""
        for name, low in (("steps", 1), ("stop_at", 1), ("batch_size", 1), ("seq_len", 1), ("threads", 1),
                          ("warmup", 0), ("eval_every", 1), ("eval_batches", 0), ("keep", 0),
                          ("sample_tokens", 0), ("bpe_vocab", 1), ("seed", 0), ("grad_accum", 1),
                          ("lora", 0), *((field, 1) for field in SIZE_FLAGS)):
            required = name in ("eval_every", "sample_tokens", "seed", "grad_accum", "lora")
            if getattr(self, name) is not None or required:
                check_int("train", name, getattr(self, name), low)
        if self.minutes is not None:
            check_finite_scalar("train", "minutes", self.minutes, positive=True)
        if self.lora_alpha is not None:
            check_finite_scalar("train", "lora_alpha", self.lora_alpha, positive=True)
        # (name, upper bound, whether the bound itself is allowed): beta2 as AdamW takes it, [0, 1)
        for name, high, closed in (("lr", None, True), ("weight_decay", None, True),
                                   ("grad_clip", None, True), ("min_lr_ratio", 1, True), ("beta2", 1, False),
                                   ("val_fraction", 1, False),   # 1 would leave no training data
                                   ("lora_dropout", 1, False)):
            value = getattr(self, name)
            if value is None:
                continue
            value = check_finite_scalar("train", name, value)
            if not (value >= 0 and (high is None or value < high or (closed and value == high))):
                bound = "" if high is None else f" and {'<=' if closed else '<'} {high}"
                raise ValueError(f"train: {name} must be >= 0{bound}, got {value}")
        if self.lora_targets is not None and not isinstance(self.lora_targets, str):
            raise TypeError(f"train: lora_targets must be a string, got {self.lora_targets!r}")
        check_sampling(self.temperature, self.top_k, self.top_p)


def _or(value, default):
    """`value`, or `default` when it is None."""
    return default if value is None else value


def default_out(model=None, size=None, init_from=None, lora=0):
    """The default run directory: runs/<model>-<size> from scratch (gpt, small unless given), and
    runs/<name of init_from>-finetune (or -lora<r>) for a fine-tune."""
    if init_from:
        name = os.path.basename(os.path.normpath(str(init_from)))
        stem = next((name[:-len(s)] for s in PRETRAINED_SUFFIXES if name.endswith(s) and name != s), name)
        return os.path.join("runs", f"{stem}-{f'lora{lora}' if lora else 'finetune'}")
    return os.path.join("runs", f"{model or 'gpt'}-{size or 'small'}")


def lora_target_modules(spec):
    """LoraConfig.target_modules of --lora-targets: "all-linear", or a tuple of the comma-separated
    names (each matched as PEFT matches a list entry: the layer's name or its end after a dot)."""
    if spec == ALL_LINEAR:
        return ALL_LINEAR
    names = tuple(name.strip() for name in spec.split(","))
    if not all(names):
        raise ValueError(f"train: --lora-targets {spec!r}: give {ALL_LINEAR!r} or comma-separated layer "
                         "names such as 'q_proj,v_proj'")
    return names


def model_kwargs(model_type, size, overrides=None):
    """The model config's keyword arguments (without vocab_size) of a preset with size overrides."""
    return dict(PRESETS[model_type][size]["model"], **(overrides or {}))


def check_size_overrides(model_type, size, overrides):
    """ValueError naming the flag when size overrides (d_model, n_head, ...) do not make a model of
    `model_type` with the preset's other sizes: a field of the other model type, heads that do not
    divide d_model, anything else the config rejects."""
    if not overrides:
        return
    foreign = [SIZE_FLAGS[k] for k in overrides if k not in SIZE_FIELDS[model_type]]
    if foreign:
        raise ValueError(f"train: {foreign[0]} is not a setting of {model_type} (its sizes: "
                         f"{', '.join(SIZE_FLAGS[k] for k in SIZE_FIELDS[model_type])})")
    kw = model_kwargs(model_type, size, overrides)
    C, heads = kw["d_model"], "n_head" if model_type == "gpt" else "head_size"
    if C % kw[heads]:
        whose = "" if heads in overrides else f" (the {size} preset's)"
        raise ValueError(f"train: --d-model {C} must be a multiple of {SIZE_FLAGS[heads]} {kw[heads]}{whose}")
    if model_type == "gpt" and (C // kw["n_head"]) % 2:
        raise ValueError(f"train: --d-model {C} / --n-head {kw['n_head']} = {C // kw['n_head']} must be even "
                         "(RoPE rotates pairs of channels)")
    try:
        _model_classes(model_type)[1](vocab_size=256, **kw)
    except (TypeError, ValueError) as e:
        raise ValueError(f"train: the model sizes {overrides} do not make a {model_type}: {e}") from None


class TrainingError(RuntimeError):
    """Training cannot go on (e.g. the loss became NaN)."""


def _absolute_corpus(spec):
    """A corpus spec with every existing path made absolute, so that the run's recorded settings
    (extra.train.corpus) still name its text from another directory (--resume, `minigrad eval`)."""
    if isinstance(spec, (list, tuple)):
        return [_absolute_corpus(s) for s in spec]
    path = os.path.expanduser(str(spec))
    if str(spec).lower() == "shakespeare" or not os.path.exists(path):
        return spec
    return os.path.abspath(path)


def _newest_good(out):
    path = io.latest_checkpoint(out)
    return f"the newest good checkpoint is {path}" if path else "no checkpoint was saved before it"


def learning_rate(cfg, step, time_fraction=0.0):
    """The learning rate at `step`: a linear warmup, then constant or a half-cosine down to
    lr * min_lr_ratio.

    With `steps` the schedule follows the step count (`warmup_cosine` / `warmup_constant`). With
    `minutes` it follows elapsed time (`time_fraction` of the budget): the warmup ends after
    `cfg.warmup` steps or 5 % of the time, whichever comes first, so a slow machine still gets a
    full schedule.
    """
    floor = cfg.lr * cfg.min_lr_ratio
    if cfg.steps:
        if cfg.schedule == "constant":
            return warmup_constant(step, cfg.lr, cfg.warmup)
        return warmup_cosine(step, cfg.lr, cfg.warmup, cfg.steps, floor)
    frac = min(max(time_fraction, 0.0), 1.0)
    ramp = min(1.0, (step + 1) / (cfg.warmup + 1), max(frac, 1e-3) / 0.05)
    if cfg.schedule == "constant":
        return cfg.lr * ramp
    return ramp * (floor + 0.5 * (cfg.lr - floor) * (1.0 + math.cos(math.pi * frac)))


def _model_classes(model_type):
    """(model class, config class) of a registered model type (io.MODEL_TYPES)."""
    module, cls_name, cfg_name = io.MODEL_TYPES[model_type]
    models = importlib.import_module(module)
    return getattr(models, cls_name), getattr(models, cfg_name)


def build_model(model_type, size, vocab_size, seq_len, seed, overrides=None):
    """A freshly initialised model of a preset size (with `overrides`: {d_model: ..., n_layer: ...}),
    deterministic for a given seed."""
    kwargs = dict(model_kwargs(model_type, size, overrides), vocab_size=vocab_size)
    if model_type == "gpt":
        kwargs["max_seq_len"] = max(seq_len, 1024)
    cls, config_cls = _model_classes(model_type)
    config = config_cls(**kwargs)
    mg.manual_seed(seed)
    if "seed" in inspect.signature(cls).parameters:
        return cls(config, seed=seed)
    return cls(config)


def make_optimizer(model, cfg):
    """AdamW over the trainable parameters (all of them, or a LoRA run's adapters), with weight decay
    on the 2-D `.weight` matrices and none on norms, biases and vectors."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (decay if p.ndim == 2 and name.endswith("weight") else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return mg.optim.AdamW([g for g in groups if g["params"]], lr=cfg.lr, betas=(0.9, cfg.beta2))


def split_corpus(tokenizer, text, val_fraction):
    """(train_ids, val_ids): the text's token ids (compact dtype), the trailing `val_fraction` held out
    (`train_val_split`); `minigrad eval` rebuilds a run's validation split with this too."""
    return train_val_split(compact_ids(tokenizer.encode(text), tokenizer.vocab_size), val_fraction)


def lm_loss(model, x, y):
    """Mean next-token cross-entropy (nats/token) of int64 batches x, y (B, T)."""
    logits = model(mg.from_numpy(x))
    V = logits.shape[-1]
    return mg.F.cross_entropy(logits.reshape(-1, V), mg.from_numpy(y.reshape(-1)))


def accumulate_gradients(model, sampler, micro_batches=1):
    """Backward of the mean LM loss over `micro_batches` batches drawn from `sampler` (the grads add
    up in .grad); returns that mean, or the first non-finite micro-batch loss (then stops)."""
    total = 0.0
    for _ in range(micro_batches):
        x, y = sampler.next()
        loss = lm_loss(model, x, y)
        value = loss.item()
        if not math.isfinite(value):
            return value
        total += value / micro_batches
        (loss / micro_batches if micro_batches > 1 else loss).backward()
    return total


def evaluate(model, batches):
    """Mean loss over fixed batches, in eval mode without a tape (the model's mode is restored)."""
    was_training = model.training
    model.eval()
    try:
        with mg.no_grad():
            losses = [lm_loss(model, x, y).item() for x, y in batches]
    finally:
        model.train(was_training)
    return float(np.mean(losses))


def generate_text(model, tokenizer, prompt, tokens=200, temperature=0.8, top_k=None, top_p=None, seed=0,
                  window=None, **generate_kwargs):
    """Continue `prompt` by `tokens` sampled tokens and return the whole text.

    A model with a position limit (GPT: RoPE positions beyond those trained on extrapolate badly) gets a
    sliding `window` (default its config's max_seq_len): once the context fills it, generation restarts
    from the newest window/2 tokens. Recurrent models (RWKV-7) continue in one go. generate_kwargs
    (min_p, repetition_penalty, eos_token_id, ...) go to every `model.generate` call; an eos stops it all.
    A streamer (e.g. models.TextStreamer(tokenizer)) sees one generation across the windows: put(the
    prompt ids (1, T)), put each new id (1,) once, end() once.
    """
    ids = tokenizer.encode(prompt)
    if len(ids) == 0:
        ids = tokenizer.encode("\n")
    return tokenizer.decode(generate_ids(model, ids, tokens, temperature, top_k, top_p, seed, window,
                                         **generate_kwargs))


def generate_ids(model, ids, tokens, temperature=0.8, top_k=None, top_p=None, seed=0, window=None,
                 **generate_kwargs):
    """`ids` (1-D) followed by up to `tokens` sampled ids, through a sliding window as in
    `generate_text` (fewer when generation stops at an eos_token_id)."""
    streamer = check_streamer(generate_kwargs.pop("streamer", None))
    tokens = check_int("generate", "tokens", tokens, 0)
    seed = check_int("generate", "seed", seed, 0)     # each window samples with seed + its index
    limit = getattr(getattr(model, "config", None), "max_seq_len", None)
    if limit is not None and limit < 2 and tokens:
        raise ValueError(f"generate: the model's max_seq_len is {limit}: it cannot hold a prompt token "
                         "and a new one")
    if window is not None and window < 1:
        raise ValueError(f"generate: window must be >= 1, got {window}")
    window = min(w for w in (window, limit) if w) if (window or limit) else None
    if window is not None:
        window = max(window, 2)     # one token of context + the new one: a window of 1 sees one token
    eos = generate_kwargs.get("eos_token_id")
    eos = None if eos is None else set(np.atleast_1d(eos).tolist())
    model.eval()
    out, produced, chunk = list(ids.tolist()), 0, 0
    if streamer is not None:
        streamer.put(np.asarray(out, dtype=np.int64)[None, :])
        generate_kwargs["streamer"] = _WindowStreamer(streamer)
    while produced < tokens:
        context = out if window is None else out[-(window - 1 if chunk == 0 else max(1, window // 2)):]
        n = tokens - produced if window is None else min(tokens - produced, window - len(context))
        new = model.generate(np.asarray(context, dtype=np.int64)[None, :], n, temperature=temperature,
                             top_k=top_k, top_p=top_p, seed=seed + chunk, **generate_kwargs)
        got = np.asarray(getattr(new, "data", new))[0, len(context):].tolist()
        out += got
        if len(got) < n or (eos is not None and got and got[-1] in eos):    # stopped at an eos
            break
        produced, chunk = produced + n, chunk + 1
    if streamer is not None:
        streamer.end()
    return np.asarray(out, dtype=np.int64)


class _WindowStreamer:
    """Passes the new ids of one `model.generate` call of generate_ids to the caller's streamer,
    dropping the call's put(prompt) (its window of ids the streamer has seen) and its end():
    generate_ids puts the whole prompt once and ends once."""

    def __init__(self, streamer):
        self.streamer, self.prompt_next = streamer, True

    def put(self, ids):
        if self.prompt_next:
            self.prompt_next = False
        else:
            self.streamer.put(ids)

    def end(self):
        self.prompt_next = True


def _event_step(line):
    """The step of one metrics.jsonl line; a line cut short by a crash counts as after every step."""
    try:
        return json.loads(line).get("step", 0)
    except (json.JSONDecodeError, AttributeError):
        return math.inf


class MetricsLog:
    """metrics.csv (one row per step, val_loss at evaluations) and metrics.jsonl (every event)."""
    FIELDS = ["step", "elapsed_s", "lr", "train_loss", "val_loss", "tokens_per_s"]

    def __init__(self, run_dir, resume_step=None):
        self.csv_path = os.path.join(run_dir, "metrics.csv")
        self.jsonl_path = os.path.join(run_dir, "metrics.jsonl")
        if resume_step is None:
            for p in (self.csv_path, self.jsonl_path):
                if os.path.exists(p):
                    os.unlink(p)
        else:  # drop what the interrupted run logged after its last checkpoint
            self._truncate(resume_step)
        new = not os.path.exists(self.csv_path)
        self._csv = open(self.csv_path, "a", newline="")
        self._writer = csv.DictWriter(self._csv, self.FIELDS)
        if new:
            self._writer.writeheader()
        self._jsonl = open(self.jsonl_path, "a")

    def _truncate(self, step):
        if os.path.exists(self.csv_path):
            with open(self.csv_path, newline="") as f:
                rows = [r for r in csv.DictReader(f) if int(r["step"]) <= step]
            with open(self.csv_path, "w", newline="") as f:
                w = csv.DictWriter(f, self.FIELDS)
                w.writeheader()
                w.writerows(rows)
        if os.path.exists(self.jsonl_path):
            with open(self.jsonl_path) as f:
                events = [line for line in f if _event_step(line) <= step]
            with open(self.jsonl_path, "w") as f:
                f.writelines(events)

    def step(self, **row):
        self._writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in self.FIELDS})
        self._csv.flush()
        self.event("step", **row)

    def event(self, kind, **data):
        self._jsonl.write(json.dumps({"event": kind, **data}) + "\n")
        self._jsonl.flush()

    def rows(self):
        self._csv.flush()
        with open(self.csv_path, newline="") as f:
            return list(csv.DictReader(f))

    def close(self):
        self._csv.close()
        self._jsonl.close()


def plot_losses(rows, path, title):
    """loss.png: per-step train loss (raw and smoothed) and validation loss against step."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    steps = np.array([int(r["step"]) for r in rows])
    train_loss = np.array([float(r["train_loss"]) for r in rows])
    val = [(int(r["step"]), float(r["val_loss"])) for r in rows if r["val_loss"]]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    if len(steps):
        ax.plot(steps, train_loss, color="tab:blue", alpha=0.25, lw=0.8)
        w = max(1, min(51, len(train_loss) // 20))  # a centred moving average over w steps
        smooth = np.convolve(train_loss, np.ones(w) / w, mode="valid")
        ax.plot(steps[w // 2:w // 2 + len(smooth)], smooth, color="tab:blue", lw=1.5,
                label=f"train (mean of {w} steps)" if w > 1 else "train")
    if val:
        ax.plot(*zip(*val), "o-", color="tab:orange", lw=1.5, ms=4, label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)
    return path


class _Progress:
    """A tqdm bar when available (and wanted), else a log line every ~10 s."""

    def __init__(self, enabled, total, initial):
        self.bar = None
        self._last = 0.0
        if enabled:
            try:
                from tqdm.auto import tqdm
                self.bar = tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True,
                                mininterval=0.5, file=sys.stderr)
            except ImportError:
                pass

    def update(self, step, total, info, step_time):
        if self.bar is not None:
            if total is not None and total != self.bar.total:
                self.bar.total = total
            self.bar.set_postfix_str(info, refresh=False)
            self.bar.update(step - self.bar.n)
        elif time.monotonic() - self._last > 10:
            self._last = time.monotonic()
            eta = f" | ETA {max(0, total - step) * step_time / 60:.1f} min" if total else ""
            print(f"step {step}/{total or '?'} {info}{eta}", file=sys.stderr, flush=True)

    def write(self, text):
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


class _StopOnInterrupt:
    """Ctrl-C once: finish the current step, save a checkpoint and stop. Twice: stop at once."""

    def __init__(self):
        self.requested, self._old = False, None

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


def _set_aside_previous_run(run_dir, log):
    """A fresh run in a directory holding another run's files moves them to run_dir/previous/
    (replacing what was there), so checkpoints of two runs never mix. Leftover logs of a run that
    saved no checkpoint are removed instead, so they never push a real run out of previous/."""
    ckpts = [p for _, p in io.list_checkpoints(run_dir)]
    old = ckpts + [os.path.join(run_dir, f) for f in ("metrics.csv", "metrics.jsonl", "loss.png")
                   if os.path.exists(os.path.join(run_dir, f))]
    if not old:
        return
    if not ckpts:   # logs of a run that saved nothing: drop them, keep what previous/ holds
        for path in old:
            os.unlink(path)
        log(f"{run_dir} held the logs of a run without checkpoints: removed them")
        return
    previous = os.path.join(run_dir, "previous")
    if os.path.isdir(previous):
        for name in os.listdir(previous):
            os.unlink(os.path.join(previous, name))
    os.makedirs(previous, exist_ok=True)
    for path in old:
        os.replace(path, os.path.join(previous, os.path.basename(path)))
    log(f"{run_dir} held an earlier run: moved its files to {previous}/ (--resume continues a run instead)")


def _peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


@dataclasses.dataclass
class _Run:
    """What a training run works on, fresh or restored from a checkpoint. A fine-tune also has its
    `origin` ({"path", "kind"} of the pretrained model, recorded as extra["init_from"]) and, with LoRA,
    `base` (the origin and its weights' fingerprint: checkpoints then hold only the adapters)."""
    cfg: TrainConfig
    model: object
    optimizer: object
    tokenizer: object
    sampler: BatchSampler
    val_batches: list
    corpus_desc: str
    step: int = 0
    elapsed_s: float = 0.0
    prompt: str = "\n"
    origin: dict = None
    base: dict = None

    def save(self, step, elapsed):
        """Checkpoint step `step`; a model whose parameters are no longer finite is never saved
        (a later `--resume` or `sample` would take it for the newest good one)."""
        cfg = self.cfg
        bad = next((name for name, p in self.model.named_parameters() if not np.isfinite(p.data).all()), None)
        if bad is not None:
            raise TrainingError(
                f"the parameters became non-finite by step {step} ({bad} holds nan/inf), so it was not "
                f"saved; {_newest_good(cfg.out)}. Try a lower --lr (now {cfg.lr:g}), a longer --warmup "
                "or a smaller --grad-clip.")
        extra = {"elapsed_s": elapsed, "train": dataclasses.asdict(cfg)}
        if self.origin is not None:
            extra["init_from"] = self.origin
        return io.save_checkpoint(
            cfg.out, step, self.model, self.optimizer, model_type=io.model_type_of(self.model),
            tokenizer=self.tokenizer, keep=cfg.keep, base=self.base, extra=extra,
            rng={"sampler": self.sampler.state_dict(), "minigrad": mg.get_rng_state()})

    def name(self):
        """gpt-small (from scratch), or e.g. "SmolLM2-135M.gguf + LoRA r 8" (a fine-tune)."""
        if self.origin is None:
            return f"{self.cfg.model}-{self.cfg.size}"
        base = os.path.basename(self.origin["path"])
        return f"{base} + LoRA r {self.cfg.lora}" if self.cfg.lora else f"{base} fine-tuned"

    def describe(self):
        """The model line of the log: type and size (from scratch) or where it started, parameters,
        and what trains."""
        cfg, model = self.cfg, self.model
        n_params = pretrained.parameter_count(model)
        what = (f"{io.model_type_of(model)} from {self.origin['path']} ({self.origin['kind']})" if self.origin
                else f"{cfg.model}-{cfg.size}")
        line = f"{what}, {n_params / 1e6:.2f}M parameters"
        if cfg.lora:
            trained = sum(p.data.size for p in model.parameters() if p.requires_grad)
            line += (f" ({trained / 1e6:.3f}M trained: LoRA r {cfg.lora}, alpha {cfg.lora_alpha:g} on "
                     f"{len(lora_layers(model))} layers)")
        return line


class _Start(typing.NamedTuple):
    """The model a run trains and its tokenizer, with `_Run.origin` and `_Run.base`."""
    model: object
    tokenizer: object
    origin: dict = None
    base: dict = None


def _start(cfg, ckpt, text, log):
    """The `_Start` of a run: restored from `ckpt` (resume), loaded from cfg.init_from (with fresh
    LoRA adapters if cfg.lora), or a fresh model of cfg's size with a tokenizer made from `text`."""
    if ckpt is not None:
        return _Start(ckpt.build_model(), ckpt.tokenizer, (ckpt.extra or {}).get("init_from"),
                      (ckpt.lora or {}).get("base"))
    if cfg.init_from is not None:
        return _pretrained_start(cfg, log)
    tokenizer = make_tokenizer(cfg.tokenizer, text, cfg.bpe_vocab)
    model = build_model(cfg.model, cfg.size, tokenizer.vocab_size, cfg.seq_len, cfg.seed,
                        cfg.size_overrides())
    return _Start(model, tokenizer)


def _pretrained_start(cfg, log):
    """The `_Start` of a fine-tune: the model and tokenizer at cfg.init_from (a LoRA run's adapters merged
    into its weights), and with cfg.lora fresh adapters on it (seeded by cfg.seed)."""
    try:
        loaded = pretrained.load_pretrained(cfg.init_from)
    except (OSError, ValueError, ImportError) as e:
        raise _with_context(e, f"train: --init-from {cfg.init_from}") from None
    log(f"init from: {loaded.description}")
    model = io.merged_model(loaded.model)
    path = loaded.checkpoint.path if loaded.checkpoint is not None else cfg.init_from
    origin = {"path": os.path.abspath(path), "kind": loaded.kind}
    if not cfg.lora:
        return _Start(model, loaded.tokenizer, origin)
    base = dict(origin, fingerprint=io.weights_fingerprint(model))
    _add_adapters(model, cfg)
    return _Start(model, loaded.tokenizer, origin, base)


def _with_context(error, context):
    """An exception of the same type as `error` whose message starts with `context` (a ValueError when
    that type cannot be built from one message)."""
    message = f"{context}: {error}"
    try:
        return type(error)(message)
    except TypeError:
        return ValueError(message)


def _add_adapters(model, cfg):
    """Put LoRA adapters (cfg.lora, lora_alpha, lora_dropout, lora_targets) on `model`, in place,
    freezing every other weight; A is initialised from minigrad's generator seeded with cfg.seed."""
    if cfg.lora_dropout and io.model_type_of(model) == "rwkv7":
        raise ValueError("train: --lora-dropout must be 0 for RWKV-7: its fused time mix and channel mix "
                         "multiply by W + s B A, which cannot drop the LoRA branch's input alone")
    config = LoraConfig(r=cfg.lora, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                        target_modules=lora_target_modules(cfg.lora_targets))
    mg.manual_seed(cfg.seed)
    try:
        apply_lora(model, config)
    except ValueError as e:
        raise ValueError(f"train: --lora-targets {cfg.lora_targets}: {e}") from None


def fit_to_model(cfg, model, source):
    """`cfg` with seq_len fitted to the model: a fine-tune's default (FINETUNE, at most the model's
    max_seq_len); ValueError when a given one exceeds a GPT's max_seq_len (`source`: where the
    model came from)."""
    limit = getattr(model.config, "max_seq_len", None)
    if cfg.seq_len is None:
        cfg = dataclasses.replace(cfg, seq_len=min(FINETUNE["seq_len"], limit or FINETUNE["seq_len"]))
    if limit is not None and cfg.seq_len > limit:
        raise ValueError(f"train: --seq-len: seq_len {cfg.seq_len} exceeds the model's max_seq_len {limit}"
                         + (f" (from {source})" if source else ""))
    return cfg


def _resume_checkpoint(cfg, log):
    """(the newest checkpoint of cfg.out, its `_Saved` record) when resuming, checked against cfg;
    (None, None) otherwise."""
    if not cfg.resume:
        return None, None
    if not io.list_checkpoints(cfg.out):
        log(f"--resume: no checkpoint in {cfg.out}, starting a new run")
        return None, None
    ckpt = io.load_checkpoint(cfg.out)
    saved = saved_run_state(ckpt)
    _check_resume_matches(ckpt, cfg, saved.settings)
    return ckpt, saved


def _prepare(cfg, log):
    """Data, model and optimizer: fresh, or restored exactly from the newest checkpoint on resume.
    The returned run's cfg has the model's seq_len (`fit_to_model`)."""
    ckpt, saved = _resume_checkpoint(cfg, log)
    text, corpus_desc = load_corpus(cfg.corpus)
    # everything that can fail on the user's settings (model, data, optimizer, the context length)
    # before anything on disk moves
    start = _start(cfg, ckpt, text, log)
    model, tokenizer = start.model, start.tokenizer
    cfg = fit_to_model(cfg, model, ckpt.path if ckpt else cfg.init_from)
    train_ids, val_ids = split_corpus(tokenizer, text, cfg.val_fraction)
    sampler = BatchSampler(train_ids, cfg.batch_size, cfg.seq_len, seed=cfg.seed)
    val_batches = eval_batches(val_ids, cfg.batch_size, cfg.seq_len, cfg.eval_batches) if len(val_ids) else []
    prompt = _sample_prompt(cfg, tokenizer, text)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    optimizer = make_optimizer(model, cfg)
    if ckpt is None:        # only once the data, settings, model and optimizer are known to work
        _set_aside_previous_run(cfg.out, log)
    else:
        io.check_optimizer_checkpoint(optimizer, ckpt)
    log(f"corpus: {corpus_desc}; {len(train_ids):,} train / {len(val_ids):,} val tokens ({tokenizer})")
    run = _Run(cfg, model, optimizer, tokenizer, sampler, val_batches, corpus_desc, prompt=prompt,
               origin=start.origin, base=start.base)
    if ckpt is None:
        return run
    optimizer.load_state_dict(ckpt.optimizer_state)
    sampler.load_state_dict(saved.sampler)
    mg.set_rng_state(saved.rng)
    log(f"resumed from {ckpt.path} at step {ckpt.step}")
    return dataclasses.replace(run, step=ckpt.step, elapsed_s=saved.elapsed_s)


class _Saved(typing.NamedTuple):
    """What `_Run.save` records beside the weights, checked by `saved_run_state`."""
    sampler: dict       # BatchSampler.state_dict()
    rng: dict           # minigrad.get_rng_state()
    elapsed_s: float
    settings: dict      # the run's TrainConfig as a dict


def saved_run_state(ckpt):
    """The `_Saved` record of a checkpoint written by `_Run.save`, every field checked before any of
    it is used: CheckpointError naming the file and the field."""
    def bad(problem):
        raise io.CheckpointError(f"--resume: {ckpt.path}: {problem}; the checkpoint is damaged or was not "
                                 f"written by `minigrad train`")

    rng, extra = ckpt.rng or {}, ckpt.extra or {}
    try:    # the checks BatchSampler.load_state_dict and set_rng_state make, before either runs
        sampler_generator(rng.get("sampler"), "rng.sampler")
        generator_from_state(rng.get("minigrad"), "rng.minigrad")
    except ValueError as e:
        bad(str(e))
    elapsed = extra.get("elapsed_s")
    if type(elapsed) not in (int, float) or not 0 <= elapsed < math.inf:
        bad(f"extra.elapsed_s must be a finite number of seconds >= 0, got {elapsed!r}")
    if not isinstance(extra.get("train"), dict):
        bad(f"extra.train must be an object (the run's settings), got {extra.get('train')!r:.120}")
    return _Saved(rng["sampler"], rng["minigrad"], float(elapsed), extra["train"])


def _sample_prompt(cfg, tokenizer, text):
    """The prompt of the closing sample, checked before training: a given one must encode (a
    character outside a char vocabulary would fail after the whole run); the default ("ROMEO:\\n"
    on Shakespeare, else a newline) falls back to the corpus's first character."""
    if cfg.prompt is not None:
        if cfg.sample_tokens:
            tokenizer.encode(cfg.prompt)      # raises ValueError naming the character
        return cfg.prompt
    prompt = "ROMEO:\n" if str(cfg.corpus).lower() == "shakespeare" else "\n"
    try:
        tokenizer.encode(prompt)
    except ValueError:
        prompt = text[:1]
    return prompt


RESUME_FLAGS = {"model": "--model", "size": "--config", "tokenizer": "--tokenizer",
                "init_from": "--init-from", "lora": "--lora", **LORA_FLAGS, **SIZE_FLAGS}


def _check_resume_matches(ckpt, cfg, settings):
    """--resume continues the checkpoint's run (`settings`: its TrainConfig as a dict): a different model
    type, size, tokenizer, pretrained model or LoRA setting is an error (the checkpoint's model and
    tokenizer would be used while the log and the next save said otherwise)."""
    saved = dict(settings)
    if saved.get("init_from") is None:      # a fine-tune's model type is the pretrained model's
        saved["model"] = ckpt.model_type
    for key, flag in RESUME_FLAGS.items():
        if key in saved and saved[key] != getattr(cfg, key):
            value = saved[key]
            what = (f"a {value!r} model" if key == "model" else f"a run without {flag}" if value is None
                    else f"a run with {flag} {value}")
            fix = f"give {flag} {value} or" if value is not None else "use"
            raise io.CheckpointError(f"--resume: {ckpt.path} holds {what}, not {flag} {getattr(cfg, key)}; "
                                     f"{fix} another --out")


def train(cfg, log=print):
    """Run training as `cfg` says and return a dict of results (losses, speed, sample, paths)."""
    cfg = cfg.resolved()
    if cfg.threads:
        mg.set_num_threads(cfg.threads)
    os.makedirs(cfg.out, exist_ok=True)
    run = _prepare(cfg, log)
    cfg, model, optimizer, sampler = run.cfg, run.model, run.optimizer, run.sampler
    val_batches = run.val_batches
    step, elapsed_before = run.step, run.elapsed_s

    n_params = pretrained.parameter_count(model)
    tokens_per_step = cfg.batch_size * cfg.seq_len * cfg.grad_accum
    accum = f" x {cfg.grad_accum} micro-batches" if cfg.grad_accum > 1 else ""
    log(f"model: {run.describe()}; batch {cfg.batch_size} x "
        f"{cfg.seq_len}{accum} = {tokens_per_step} tokens/step; lr {cfg.lr:g}; threads {mg.get_num_threads()}"
        + ("; gradient checkpointing" if cfg.gradient_checkpointing else ""))
    length = f"{cfg.steps} steps" if cfg.steps else f"{cfg.minutes:g} minutes"
    log(f"training for {length}; run directory {cfg.out}")

    metrics = MetricsLog(cfg.out, resume_step=step if run.step else None)
    metrics.event("start", step=step, config=dataclasses.asdict(cfg), n_params=int(n_params))
    budget = cfg.minutes * 60.0 if cfg.minutes else None
    last_step = cfg.steps if cfg.steps else None
    if cfg.stop_at is not None:
        last_step = min(cfg.stop_at, last_step) if last_step else cfg.stop_at

    def done(at_step, elapsed):
        if last_step is not None and at_step >= last_step:
            return True
        return budget is not None and elapsed >= budget

    plot_path, title = os.path.join(cfg.out, "loss.png"), f"{run.name()} on {run.corpus_desc}"
    progress = _Progress(cfg.progress, cfg.steps, step)
    params = [p for p in model.parameters() if p.requires_grad]
    t_start = time.perf_counter()
    step_time, train_loss, val_loss, ema_loss = None, None, None, None
    elapsed = elapsed_before
    stop = _StopOnInterrupt()
    try:
        with stop:
            while not done(step, elapsed) and not stop.requested:
                t0 = time.perf_counter()
                lr = learning_rate(cfg, step, elapsed / budget if budget else 0.0)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                optimizer.zero_grad()
                train_loss = accumulate_gradients(model, sampler, cfg.grad_accum)
                if not math.isfinite(train_loss):
                    raise TrainingError(
                        f"the training loss became {train_loss} at step {step + 1} (lr {lr:.3g}); "
                        f"{_newest_good(cfg.out)}. Try a lower --lr "
                        f"(now {cfg.lr:g}), a longer --warmup or a smaller --grad-clip.")
                if cfg.grad_clip:
                    mg.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
                optimizer.step()
                step += 1
                dt = time.perf_counter() - t0
                step_time = dt if step_time is None else 0.9 * step_time + 0.1 * dt
                ema_loss = train_loss if ema_loss is None else 0.9 * ema_loss + 0.1 * train_loss
                elapsed = elapsed_before + time.perf_counter() - t_start
                evaluate_now = val_batches and (step % cfg.eval_every == 0 or done(step, elapsed)
                                                or stop.requested)
                if evaluate_now:
                    val_loss = evaluate(model, val_batches)
                metrics.step(step=step, elapsed_s=round(elapsed, 3), lr=lr, train_loss=train_loss,
                             val_loss=val_loss if evaluate_now else None,
                             tokens_per_s=round(tokens_per_step / dt, 1))
                total = cfg.steps
                if budget is not None:
                    total = step + max(0, int((budget - elapsed) / step_time))
                progress.update(step, total, f"loss {ema_loss:.3f}"
                                + (f" val {val_loss:.3f}" if val_loss is not None else "")
                                + f" | {tokens_per_step / step_time:,.0f} tok/s | lr {lr:.2e}", step_time)
                if evaluate_now:
                    progress.write(f"step {step}: train {ema_loss:.4f}  val {val_loss:.4f}")
                    run.save(step, elapsed)
                    if cfg.plot:
                        plot_losses(metrics.rows(), plot_path, title)
    except KeyboardInterrupt:  # a second Ctrl-C: the step in flight is lost, the checkpoints are not
        progress.close()
        metrics.close()
        log(f"\nstopped during step {step + 1}; the newest checkpoint is {io.latest_checkpoint(cfg.out)}. "
            f"Continue with --resume --out {cfg.out}")
        raise
    progress.close()
    if stop.requested:
        log(f"\ninterrupted: saving step {step}. Continue with --resume --out {cfg.out}")
    if not io.list_checkpoints(cfg.out) or io.list_checkpoints(cfg.out)[-1][0] != step:
        run.save(step, elapsed)
    plot = plot_losses(metrics.rows(), plot_path, title) if cfg.plot else None
    trained = time.perf_counter() - t_start
    result = {"step": step, "train_loss": train_loss, "val_loss": val_loss, "elapsed_s": elapsed,
              "tokens_per_s": tokens_per_step / step_time if step_time else None,
              "peak_rss_mb": _peak_rss_mb(), "out": cfg.out, "plot": plot, "model": model,
              "tokenizer": run.tokenizer, "checkpoint": io.latest_checkpoint(cfg.out),
              "interrupted": stop.requested}
    metrics.event("end", **{k: v for k, v in result.items() if k not in ("model", "tokenizer")})
    metrics.close()
    if val_loss is not None:
        log(f"done: step {step}, val loss {val_loss:.4f} nats/token, "
            f"{trained / 60:.1f} min this run, {result['tokens_per_s'] or 0:,.0f} tok/s, "
            f"peak RSS {result['peak_rss_mb']:.0f} MB")
    log(f"checkpoint: {result['checkpoint']}" + (f"; loss curve: {plot}" if plot else ""))
    if cfg.sample_tokens and not stop.requested:
        result["sample"] = generate_text(model, run.tokenizer, run.prompt, cfg.sample_tokens, cfg.temperature,
                                         cfg.top_k, cfg.top_p, seed=cfg.seed, window=cfg.seq_len,
                                         eos_token_id=getattr(run.tokenizer, "eos_token_id", None),
                                         suppress_tokens=textless_ids(model, run.tokenizer))
        log("-" * 30 + " sample " + "-" * 30 + "\n" + result["sample"] + "\n" + "-" * 68)
    return result
