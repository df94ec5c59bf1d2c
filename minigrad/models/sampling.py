"""Next-token sampling shared by every model's `generate`."""
import numpy as np

from minigrad.kernels.validate import check_int, check_number


def check_sampling(temperature, top_k, top_p):
    """Raise TypeError naming the argument for a non-number (None, "1"), ValueError for settings
    that would sample noise or nothing."""
    t = check_number("generate", "temperature", temperature)
    if not np.isfinite(t) or t < 0:   # nan passes `< 0` and samples noise
        raise ValueError(f"generate: temperature must be finite and >= 0, got {temperature}")
    if top_k is not None:
        check_int("generate", "top_k", top_k, 1)
    if top_p is not None and not 0.0 < check_number("generate", "top_p", top_p) <= 1.0:
        raise ValueError(f"generate: top_p must be in (0, 1] or None, got {top_p}")


def check_new_tokens(max_new_tokens):
    """max_new_tokens as an int >= 0 (a float or bool is a caller's mistake, not a count)."""
    return check_int("generate", "max_new_tokens", max_new_tokens, 0)


def sample(logits, temperature=1.0, top_k=None, top_p=None, rng=None):
    """One int64 token id per row of logits (B, V): greedy at temperature 0, else a softmax sample
    after temperature scaling, top-k, then nucleus (top-p) filtering (the top token always stays).
    NaN or +inf logits (a diverged model) raise ValueError instead of sampling token 0."""
    logits = np.asarray(logits, np.float64)
    bad = np.isnan(logits) | (logits == np.inf)
    bad[(logits == -np.inf).all(-1)] = True     # a row with no token left to choose
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(f"generate: the logits of row {row} hold {logits[row, col]} (token {col}); "
                         "the model's weights or inputs are not finite")
    if temperature == 0:
        return logits.argmax(-1)
    rng = rng if rng is not None else np.random.default_rng()
    # shift before dividing: a tiny temperature must not overflow the logits to inf - inf
    with np.errstate(over="ignore"):
        z = (logits - logits.max(-1, keepdims=True)) / temperature
    if top_k is not None and top_k < z.shape[-1]:
        kth = np.partition(z, -top_k, axis=-1)[:, -top_k][:, None]
        z = np.where(z < kth, -np.inf, z)
    probs = np.exp(z - z.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-probs, axis=-1)
        sorted_p = np.take_along_axis(probs, order, -1)
        keep_sorted = np.cumsum(sorted_p, -1) - sorted_p < top_p
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, -1)
        probs = np.where(keep, probs, 0.0)
        probs /= probs.sum(-1, keepdims=True)
    cdf = np.cumsum(probs, -1)
    u = rng.random((probs.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((cdf < u).sum(-1), probs.shape[-1] - 1).astype(np.int64)
