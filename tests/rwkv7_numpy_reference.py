"""A slow, plain-numpy fp64 RWKV-7 ("x070") used as ground truth by the tests.

Written for clarity, one token at a time, straight from the official maths
(BlinkDL/RWKV-LM RWKV-v7): nothing here is shared with minigrad's implementation.

`params` is a dict of arrays with the official checkpoint names (`emb.weight`,
`blocks.{i}.att.w1`, ...); `state` is a list with one `(att_shift (B,C), wkv (B,H,N,N),
ffn_shift (B,C))` tuple per layer, `wkv[b, h, i, j]` with i the value index, j the key index.
"""
import numpy as np

LN_EPS = 1e-5
GROUPNORM_EPS = 64e-5
DECAY_SCALE = np.exp(-0.5)


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _layer_norm(x, weight, bias, eps=LN_EPS):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _time_mix_step(p, layer, x, x_prev, wkv, v_first, n_head):
    """One token of the time mix for the whole batch. x, x_prev: (B, C); wkv: (B, H, N, N)."""
    B, C = x.shape
    N = C // n_head
    prefix = f"blocks.{layer}.att."
    att = {k[len(prefix):]: (v.reshape(-1) if v.ndim == 3 else v)
           for k, v in p.items() if k.startswith(prefix)}
    get = att.__getitem__
    dx = x_prev - x
    xr, xw, xk, xv, xa, xg = (x + dx * get(f"x_{c}") for c in "rwkvag")
    r = xr @ get("receptance.weight").T
    k = xk @ get("key.weight").T
    v = xv @ get("value.weight").T
    w = np.exp(-DECAY_SCALE * _sigmoid(get("w0") + np.tanh(xw @ get("w1")) @ get("w2")))
    a = _sigmoid(get("a0") + (xa @ get("a1")) @ get("a2"))
    g = _sigmoid(xg @ get("g1")) @ get("g2")
    if layer == 0:
        v_first = v
    else:
        v = v + (v_first - v) * _sigmoid(get("v0") + (xv @ get("v1")) @ get("v2"))
    kk = (k * get("k_k")).reshape(B, n_head, N)
    kk = kk / np.maximum(np.linalg.norm(kk, axis=-1, keepdims=True), 1e-12)
    k = k * (1.0 + (a - 1.0) * get("k_a"))
    heads = lambda t: t.reshape(B, n_head, N)
    r_, w_, k_, v_, a_ = heads(r), heads(w), heads(k), heads(v), heads(a)
    aa, bb = -kk, kk * a_
    new_wkv = np.empty_like(wkv)
    y = np.empty((B, n_head, N))
    for b in range(B):
        for h in range(n_head):
            S = wkv[b, h]
            S = S * w_[b, h][None, :] + np.outer(v_[b, h], k_[b, h]) + np.outer(S @ aa[b, h], bb[b, h])
            new_wkv[b, h] = S
            y[b, h] = S @ r_[b, h]
    mean = y.mean(-1, keepdims=True)
    var = ((y - mean) ** 2).mean(-1, keepdims=True)
    y = ((y - mean) / np.sqrt(var + GROUPNORM_EPS)).reshape(B, C) * get("ln_x.weight") + get("ln_x.bias")
    bonus = (r_ * k_ * get("r_k")[None]).sum(-1, keepdims=True) * v_
    y = (y + bonus.reshape(B, C)) * g
    return y @ get("output.weight").T, new_wkv, v_first


def _channel_mix_step(p, layer, x, x_prev):
    pre = f"blocks.{layer}.ffn."
    xk = x + (x_prev - x) * p[pre + "x_k"].reshape(-1)
    hidden = np.maximum(xk @ p[pre + "key.weight"].T, 0.0) ** 2
    return hidden @ p[pre + "value.weight"].T


def zero_state(params, batch, head_size):
    """The all-zeros recurrent state for `batch` sequences."""
    C = params["emb.weight"].shape[1]
    H = C // head_size
    n_layer = len({k.split(".")[1] for k in params if k.startswith("blocks.")})
    return [(np.zeros((batch, C)), np.zeros((batch, H, head_size, head_size)), np.zeros((batch, C)))
            for _ in range(n_layer)]


def reference_forward(params, idx, head_size, state=None):
    """logits (B, T, V) and the final state for token ids idx (B, T), token by token in fp64."""
    p = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    idx = np.asarray(idx)
    B, T = idx.shape
    C = p["emb.weight"].shape[1]
    H = C // head_size
    state = zero_state(p, B, head_size) if state is None else [tuple(np.array(s, np.float64) for s in st)
                                                                 for st in state]
    logits = np.empty((B, T, p["head.weight"].shape[0]))
    for t in range(T):
        x = p["emb.weight"][idx[:, t]]
        v_first = None
        for layer, (att_shift, wkv, ffn_shift) in enumerate(state):
            pre = f"blocks.{layer}."
            if layer == 0:
                x = _layer_norm(x, p[pre + "ln0.weight"], p[pre + "ln0.bias"])
            xa = _layer_norm(x, p[pre + "ln1.weight"], p[pre + "ln1.bias"])
            dx, wkv, v_first = _time_mix_step(p, layer, xa, att_shift, wkv, v_first, H)
            x = x + dx
            xf = _layer_norm(x, p[pre + "ln2.weight"], p[pre + "ln2.bias"])
            x = x + _channel_mix_step(p, layer, xf, ffn_shift)
            state[layer] = (xa, wkv, xf)
        logits[:, t] = _layer_norm(x, p["ln_out.weight"], p["ln_out.bias"]) @ p["head.weight"].T
    return logits, state
