"""Train/validation split and a seeded random-window batch sampler.

Batches are `(x, y)` int64 arrays of shape (B, T) with `y[:, t] = x[:, t + 1]`'s successor in
the token stream, i.e. `y` is `x` shifted left by one token.
"""
import numpy as np

from minigrad.kernels.validate import check_int
from minigrad.random import generator_from_state


def train_val_split(ids, val_fraction=0.1):
    """Split a 1-D token array into a leading train part and a trailing validation part."""
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"train_val_split: expected a 1-D token array, got shape {ids.shape}")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"train_val_split: val_fraction must be in [0, 1), got {val_fraction}")
    n_val = int(round(len(ids) * val_fraction))
    return ids[:len(ids) - n_val], ids[len(ids) - n_val:]


def compact_ids(ids, vocab_size):
    """The token stream in the smallest unsigned dtype that holds the vocabulary (saves memory);
    ValueError for an id outside [0, vocab_size), which the cast would wrap silently."""
    ids = np.asarray(ids)
    if ids.size and ids.dtype.kind not in "iu":   # 1.7 -> 1 and NaN -> 0 by the cast, silently
        raise TypeError(f"compact_ids: token ids must be integers, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        bad = ids[(ids < 0) | (ids >= vocab_size)].reshape(-1)[0]
        raise ValueError(f"compact_ids: token id {int(bad)} is outside [0, {vocab_size})")
    dtype = np.uint8 if vocab_size <= 256 else np.uint16 if vocab_size <= 65536 else np.int64
    return np.ascontiguousarray(ids, dtype=dtype)


def _windows(data, starts, seq_len):
    idx = starts[:, None] + np.arange(seq_len + 1)[None, :]
    chunk = data[idx].astype(np.int64)
    return np.ascontiguousarray(chunk[:, :-1]), np.ascontiguousarray(chunk[:, 1:])


def _token_stream(data, who):
    """`data` as an integer array (a list works too); a float stream would be truncated silently."""
    data = np.asarray(data)
    if data.size and data.dtype.kind not in "iu":
        raise TypeError(f"{who}: token ids must be integers, got dtype {data.dtype}")
    return data


def _check_fits(data, seq_len, who, what="the token stream", fix="a larger corpus"):
    if np.ndim(data) != 1:
        raise ValueError(f"{who}: expected a 1-D token stream, got shape {np.shape(data)}")
    if len(data) < seq_len + 1:
        raise ValueError(f"{who}: {what} has {len(data)} tokens, fewer than "
                         f"seq_len + 1 = {seq_len + 1}; use a shorter --seq-len or {fix}")


class BatchSampler:
    """Random windows of `seq_len + 1` tokens drawn with a seeded numpy Generator.

    `next()` returns `(x, y)`, each int64 (batch_size, seq_len). `state_dict()` /
    `load_state_dict()` save and restore the generator exactly, so a resumed run draws the same
    batches as an uninterrupted one.
    """

    def __init__(self, data, batch_size, seq_len, seed=0):
        batch_size = check_int("BatchSampler", "batch_size", batch_size, 1)   # 2.7 is not 2
        seq_len = check_int("BatchSampler", "seq_len", seq_len, 1)
        data = _token_stream(data, "BatchSampler")
        _check_fits(data, seq_len, "BatchSampler")
        self.data, self.batch_size, self.seq_len = data, batch_size, seq_len
        self.rng = np.random.default_rng(check_int("BatchSampler", "seed", seed, 0))

    def next(self):
        starts = self.rng.integers(0, len(self.data) - self.seq_len, size=self.batch_size)
        return _windows(self.data, starts, self.seq_len)

    __next__ = next

    def __iter__(self):
        return self

    def state_dict(self):
        return {"bit_generator": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        self.rng = sampler_generator(state, "BatchSampler.load_state_dict: state")


def sampler_generator(state, what="BatchSampler state"):
    """The generator a `BatchSampler.state_dict()` describes; ValueError naming `what` for anything
    else (checked whole before a sampler takes it)."""
    if not isinstance(state, dict) or state.keys() != {"bit_generator"}:
        raise ValueError(f"{what} must be {{'bit_generator': a generator state}}, got {state!r:.120}")
    return generator_from_state(state["bit_generator"], f"{what}.bit_generator")


def eval_batches(data, batch_size, seq_len, n_batches):
    """A fixed list of `n_batches` (x, y) batches spread evenly over `data` (no randomness), so
    validation loss is comparable across evaluations and runs."""
    batch_size = check_int("eval_batches", "batch_size", batch_size, 1)
    seq_len = check_int("eval_batches", "seq_len", seq_len, 1)
    n_batches = check_int("eval_batches", "n_batches", n_batches, 0)
    data = _token_stream(data, "eval_batches")
    _check_fits(data, seq_len, "eval_batches", "the validation stream",
                "a larger --val-fraction (or --val-fraction 0: no validation)")
    n = batch_size * n_batches
    starts = np.linspace(0, len(data) - seq_len - 1, n).astype(np.int64)
    return [_windows(data, starts[i:i + batch_size], seq_len) for i in range(0, n, batch_size)]
