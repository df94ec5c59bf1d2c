"""The training loop behind `python -m minigrad train`: data, model, AdamW, schedule, evaluation,
checkpoints, resume, metrics, plot and a closing sample.

    from minigrad.train import TrainConfig, train
    result = train(TrainConfig(model="gpt", size="small", minutes=5, out="runs/gpt"))

`--resume` continues bit-for-bit: the model, optimizer state, step, the batch sampler's and
minigrad's generators and the elapsed time all come from the newest checkpoint, so 20 steps
straight equal 10 steps + resume + 10 steps exactly (with the same thread count).
"""
import csv
import dataclasses
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
from minigrad import io
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
from minigrad.models.sampling import check_sampling, check_streamer
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


@dataclasses.dataclass
class TrainConfig:
    """Everything a training run needs; the CLI's options map one to one onto these fields."""
    model: str = "gpt"                # gpt | rwkv7
    size: str = "small"               # a key of PRESETS[model]
    corpus: str = "shakespeare"       # "shakespeare", a text file or a directory of them
    tokenizer: str = "byte"           # byte | char | bpe
    bpe_vocab: int = 1024
    steps: int = None                 # train this many steps ...
    minutes: float = None             # ... or for this long (the schedule follows elapsed time)
    stop_at: int = None               # stop at this step as if interrupted (schedule still for `steps`)
    out: str = None                   # run directory (default runs/<model>-<size>)
    resume: bool = False
    seed: int = 1337
    lr: float = None                  # peak learning rate (default per size)
    min_lr_ratio: float = 0.1         # cosine decays to lr * min_lr_ratio
    warmup: int = 50                  # linear warmup steps
    schedule: str = "cosine"          # cosine | constant (after warmup)
    weight_decay: float = 0.1         # on 2-D ".weight" matrices only
    beta2: float = 0.95
    grad_clip: float = 1.0            # max global grad norm (0 = off)
    batch_size: int = None            # sequences per micro-batch
    seq_len: int = None
    grad_accum: int = 1               # micro-batches whose gradients make one optimizer step
    gradient_checkpointing: bool = False   # recompute each layer's activations in backward
    threads: int = None
    val_fraction: float = 0.1
    eval_every: int = 100             # steps between validation evaluations (and checkpoints)
    eval_batches: int = 8
    keep: int = 3                     # checkpoints kept
    sample_tokens: int = 400
    prompt: str = None                # default: "ROMEO:\n" on Shakespeare, else "\n"
    temperature: float = 0.8
    top_k: int = None
    top_p: float = None
    progress: bool = True             # tqdm bar (plain log lines without tqdm)
    plot: bool = True

    def resolved(self):
        """A copy with the per-size defaults filled in and every choice validated."""
        if self.model not in PRESETS:
            raise ValueError(f"unknown model {self.model!r}; choose from {sorted(PRESETS)}")
        if self.size not in PRESETS[self.model]:
            raise ValueError(f"unknown size {self.size!r} for {self.model}; "
                             f"choose from {sorted(PRESETS[self.model])}")
        if self.steps is None and self.minutes is None:
            raise ValueError("give a length: steps or minutes")
        if self.steps is not None and self.minutes is not None:
            raise ValueError("give steps or minutes, not both")
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f"unknown schedule {self.schedule!r}; choose cosine or constant")
        self._check_ranges()
        preset = PRESETS[self.model][self.size]
        pick = lambda value, key: preset[key] if value is None else value  # noqa: E731
        return dataclasses.replace(
            self, corpus=_absolute_corpus(self.corpus),
            lr=self.lr if self.lr is not None else DEFAULT_LR[self.size],
            batch_size=pick(self.batch_size, "batch_size"), seq_len=pick(self.seq_len, "seq_len"),
            out=self.out or os.path.join("runs", f"{self.model}-{self.size}"))

    def _check_ranges(self):
        """Every numeric setting in its range before anything is read or written (a run that would
        fail at its first evaluation, save or sample must fail here instead). None: the default."""
        for name, low in (("steps", 1), ("stop_at", 1), ("batch_size", 1), ("seq_len", 1), ("threads", 1),
                          ("warmup", 0), ("eval_every", 1), ("eval_batches", 0), ("keep", 0),
                          ("sample_tokens", 0), ("bpe_vocab", 1), ("seed", 0), ("grad_accum", 1)):
            if getattr(self, name) is not None or name in ("warmup", "eval_every", "keep", "sample_tokens",
                                                           "seed", "grad_accum"):
                check_int("train", name, getattr(self, name), low)
        if self.minutes is not None:
            check_finite_scalar("train", "minutes", self.minutes, positive=True)
        # (name, upper bound, whether the bound itself is allowed): beta2 as AdamW takes it, [0, 1)
        for name, high, closed in (("lr", None, True), ("weight_decay", None, True),
                                   ("grad_clip", None, True), ("min_lr_ratio", 1, True), ("beta2", 1, False),
                                   ("val_fraction", 1, False)):   # 1 would leave no training data
            value = getattr(self, name)
            if value is None:
                continue
            value = check_finite_scalar("train", name, value)
            if not (value >= 0 and (high is None or value < high or (closed and value == high))):
                bound = "" if high is None else f" and {'<=' if closed else '<'} {high}"
                raise ValueError(f"train: {name} must be >= 0{bound}, got {value}")
        check_sampling(self.temperature, self.top_k, self.top_p)


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


def build_model(model_type, size, vocab_size, seq_len, seed):
    """A freshly initialised model of a preset size, deterministic for a given seed."""
    kwargs = dict(PRESETS[model_type][size]["model"], vocab_size=vocab_size)
    if model_type == "gpt":
        kwargs["max_seq_len"] = max(seq_len, 1024)
    module, cls_name, cfg_name = io.MODEL_TYPES[model_type]
    models = __import__(module, fromlist=[cls_name])
    config = getattr(models, cfg_name)(**kwargs)
    mg.manual_seed(seed)
    cls = getattr(models, cls_name)
    if "seed" in inspect.signature(cls).parameters:
        return cls(config, seed=seed)
    return cls(config)


def make_optimizer(model, cfg):
    """AdamW with weight decay on the 2-D `.weight` matrices and none on norms, biases and vectors."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
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
    """What a training run works on, fresh or restored from a checkpoint."""
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
        return io.save_checkpoint(
            cfg.out, step, self.model, self.optimizer, model_type=cfg.model, tokenizer=self.tokenizer,
            keep=cfg.keep, rng={"sampler": self.sampler.state_dict(), "minigrad": mg.get_rng_state()},
            extra={"elapsed_s": elapsed, "train": dataclasses.asdict(cfg)})


def _prepare(cfg, log):
    """Data, model and optimizer: fresh, or restored exactly from the newest checkpoint on resume."""
    ckpt = None
    if cfg.resume:
        if io.list_checkpoints(cfg.out):
            ckpt = io.load_checkpoint(cfg.out)
        else:
            log(f"--resume: no checkpoint in {cfg.out}, starting from scratch")
    if ckpt is not None:
        saved = saved_run_state(ckpt)
        _check_resume_matches(ckpt, cfg, saved.settings)
    text, corpus_desc = load_corpus(cfg.corpus)
    tokenizer = ckpt.tokenizer if ckpt else make_tokenizer(cfg.tokenizer, text, cfg.bpe_vocab)
    train_ids, val_ids = split_corpus(tokenizer, text, cfg.val_fraction)
    sampler = BatchSampler(train_ids, cfg.batch_size, cfg.seq_len, seed=cfg.seed)
    val_batches = eval_batches(val_ids, cfg.batch_size, cfg.seq_len, cfg.eval_batches) if len(val_ids) else []
    prompt = _sample_prompt(cfg, tokenizer, text)
    # everything that can fail on the user's settings (model, optimizer, the context length) before
    # anything on disk moves
    if ckpt is None:
        model = build_model(cfg.model, cfg.size, tokenizer.vocab_size, cfg.seq_len, cfg.seed)
    else:
        model = ckpt.build_model()
    limit = getattr(model.config, "max_seq_len", None)
    if limit is not None and cfg.seq_len > limit:
        raise ValueError(f"train: seq_len {cfg.seq_len} exceeds the model's max_seq_len {limit}"
                         + (f" (from {ckpt.path})" if ckpt else ""))
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    optimizer = make_optimizer(model, cfg)
    if ckpt is None:        # only once the data, settings, model and optimizer are known to work
        _set_aside_previous_run(cfg.out, log)
    else:
        io.check_optimizer_checkpoint(optimizer, ckpt)
    log(f"corpus: {corpus_desc}; {len(train_ids):,} train / {len(val_ids):,} val tokens ({tokenizer})")
    if ckpt is None:
        return _Run(cfg, model, optimizer, tokenizer, sampler, val_batches, corpus_desc, prompt=prompt)
    optimizer.load_state_dict(ckpt.optimizer_state)
    sampler.load_state_dict(saved.sampler)
    mg.set_rng_state(saved.rng)
    log(f"resumed from {ckpt.path} at step {ckpt.step}")
    return _Run(cfg, model, optimizer, tokenizer, sampler, val_batches, corpus_desc, ckpt.step,
                saved.elapsed_s, prompt)


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


def _check_resume_matches(ckpt, cfg, settings):
    """--resume continues the checkpoint's run (`settings`: its TrainConfig as a dict): a different model
    type, size or tokenizer is an error (the checkpoint's model and tokenizer would be used while the
    log and the next save said otherwise)."""
    saved = dict(settings, model=ckpt.model_type)
    for key in ("model", "size", "tokenizer"):
        if key in saved and saved[key] != getattr(cfg, key):
            what = f"a {saved[key]!r} model" if key == "model" else f"a run with {key} {saved[key]!r}"
            raise io.CheckpointError(f"--resume: {ckpt.path} holds {what}, not {getattr(cfg, key)!r}; "
                                     f"use --{key} {saved[key]} or another --out")


def train(cfg, log=print):
    """Run training as `cfg` says and return a dict of results (losses, speed, sample, paths)."""
    cfg = cfg.resolved()
    if cfg.threads:
        mg.set_num_threads(cfg.threads)
    os.makedirs(cfg.out, exist_ok=True)
    run = _prepare(cfg, log)
    model, optimizer, sampler, val_batches = run.model, run.optimizer, run.sampler, run.val_batches
    step, elapsed_before = run.step, run.elapsed_s

    n_params = sum(p.data.size for p in model.parameters())
    tokens_per_step = cfg.batch_size * cfg.seq_len * cfg.grad_accum
    accum = f" x {cfg.grad_accum} micro-batches" if cfg.grad_accum > 1 else ""
    log(f"model: {cfg.model}-{cfg.size}, {n_params / 1e6:.2f}M parameters; batch {cfg.batch_size} x "
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

    plot_path, title = os.path.join(cfg.out, "loss.png"), f"{cfg.model}-{cfg.size} on {run.corpus_desc}"
    progress = _Progress(cfg.progress, cfg.steps, step)
    params = list(model.parameters())
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
                                         cfg.top_k, cfg.top_p, seed=cfg.seed, window=cfg.seq_len)
        log("-" * 30 + " sample " + "-" * 30 + "\n" + result["sample"] + "\n" + "-" * 68)
    return result
