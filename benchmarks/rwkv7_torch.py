"""Plain PyTorch RWKV-7 ("x070"), the way users write it, for the tests and the benchmark.

Module and parameter names follow the official checkpoints, so one state_dict of arrays loads into
this model and into minigrad's. The WKV recurrence comes in two flavours:

- `wkv7_loop`: a per-timestep Python loop (what people write first; eager only);
- `wkv7_chunked`: the chunked closed form (chunks of 16 tokens, a unit-lower-triangular solve per
  chunk, a short loop over chunks only), which `torch.compile` can handle.

Chunked maths, per head, inside one chunk starting from state S0 (S[i value, j key]), with
W_t = prod_{s<=t} w_s, u_t = S_{t-1} a_t:
    ã_t = a_t W_{t-1}, b̃_s = b_s / W_s, k̃_s = k_s / W_s, r̂_t = r_t W_t
    U  = (I - tril(ÃB̃ᵀ, -1))⁻¹ (Ã S0ᵀ + tril(ÃK̃ᵀ, -1) V)
    Y  = R̂ S0ᵀ + tril(R̂B̃ᵀ) U + tril(R̂K̃ᵀ) V
    S_Lᵀ = diag(W_L) S0ᵀ + (B̃ W_L)ᵀ U + (K̃ W_L)ᵀ V
RWKV-7's decay is bounded below by exp(-exp(-0.5)), so 1/W over 16 steps stays below ~2e4.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

DECAY_SCALE = math.exp(-0.5)


def wkv7_loop(r, w, k, v, a, b, state):
    """y (B,T,H,N), final state (B,H,N,N): S = S diag(w) + v kᵀ + (S a) bᵀ; y = S r, one step at a time."""
    T = r.shape[1]
    S = state
    ys = []
    for t in range(T):
        sa = S @ a[:, t, :, :, None]
        S = S * w[:, t, :, None, :] + v[:, t, :, :, None] @ k[:, t, :, None, :] + sa @ b[:, t, :, None, :]
        ys.append((S @ r[:, t, :, :, None]).squeeze(-1))
    return torch.stack(ys, dim=1), S


def wkv7_chunked(r, w, k, v, a, b, state, chunk=16):
    """Same result as wkv7_loop, computed chunk by chunk in closed form (see the module docstring)."""
    B, T, H, N = r.shape
    pad = (-T) % chunk
    if pad:  # padded steps: w = 1 and zero r, k, v, a, b leave the state untouched
        zeros = lambda t: F.pad(t, (0, 0, 0, 0, 0, pad))
        r, k, v, a, b = map(zeros, (r, k, v, a, b))
        w = F.pad(w, (0, 0, 0, 0, 0, pad), value=1.0)
    n_chunks = (T + pad) // chunk
    # (B, H, n_chunks, L, N)
    shape = lambda t: t.reshape(B, n_chunks, chunk, H, N).permute(0, 3, 1, 2, 4)
    r, w, k, v, a, b = map(shape, (r, w, k, v, a, b))
    cum = torch.cumsum(torch.log(w), dim=3)
    a_t = a * torch.exp(cum - torch.log(w))
    inv = torch.exp(-cum)
    b_t, k_t, r_t = b * inv, k * inv, r * torch.exp(cum)
    lower = torch.ones(chunk, chunk, dtype=torch.bool, device=r.device)
    strict = torch.tril(lower, -1)
    incl = torch.tril(lower)
    A_ab = (a_t @ b_t.transpose(-1, -2)).masked_fill(~strict, 0.0)
    A_ak = (a_t @ k_t.transpose(-1, -2)).masked_fill(~strict, 0.0)
    A_rb = (r_t @ b_t.transpose(-1, -2)).masked_fill(~incl, 0.0)
    A_rk = (r_t @ k_t.transpose(-1, -2)).masked_fill(~incl, 0.0)
    eye = torch.eye(chunk, dtype=r.dtype, device=r.device)
    system = eye - A_ab
    P = torch.linalg.solve_triangular(system, a_t, upper=False, unitriangular=True)
    Q = torch.linalg.solve_triangular(system, A_ak @ v, upper=False, unitriangular=True)
    W_last = torch.exp(cum[:, :, :, -1:, :])                 # (B, H, n, 1, N)
    b_end, k_end = (b_t * W_last).transpose(-1, -2), (k_t * W_last).transpose(-1, -2)
    S_T = state.transpose(-1, -2)                             # (B, H, N key, N value)
    ys = []
    for c in range(n_chunks):
        U = P[:, :, c] @ S_T + Q[:, :, c]
        ys.append(r_t[:, :, c] @ S_T + A_rb[:, :, c] @ U + A_rk[:, :, c] @ v[:, :, c])
        S_T = W_last[:, :, c].transpose(-1, -2) * S_T + b_end[:, :, c] @ U + k_end[:, :, c] @ v[:, :, c]
    y = torch.stack(ys, dim=2).permute(0, 2, 3, 1, 4).reshape(B, n_chunks * chunk, H, N)
    return y[:, :T], S_T.transpose(-1, -2)


def token_shift(x, prev):
    """x shifted one step right along T, with `prev` (B, C) (or zeros) entering at t = 0."""
    first = torch.zeros_like(x[:, :1]) if prev is None else prev[:, None]
    return torch.cat([first, x[:, :-1]], dim=1)


class TimeMix(nn.Module):
    def __init__(self, C, n_head, layer_id, d_decay, d_aaa, d_mv, d_gate):
        super().__init__()
        self.layer_id, self.n_head = layer_id, n_head
        vec = lambda: nn.Parameter(torch.zeros(1, 1, C))
        mat = lambda i, o: nn.Parameter(torch.zeros(i, o))
        self.x_r, self.x_w, self.x_k, self.x_v, self.x_a, self.x_g = (vec() for _ in range(6))
        self.w0, self.w1, self.w2 = vec(), mat(C, d_decay), mat(d_decay, C)
        self.a0, self.a1, self.a2 = vec(), mat(C, d_aaa), mat(d_aaa, C)
        if layer_id > 0:
            self.v0, self.v1, self.v2 = vec(), mat(C, d_mv), mat(d_mv, C)
        self.g1, self.g2 = mat(C, d_gate), mat(d_gate, C)
        self.k_k, self.k_a = vec(), vec()
        self.r_k = nn.Parameter(torch.zeros(n_head, C // n_head))
        self.receptance, self.key, self.value, self.output = (nn.Linear(C, C, bias=False) for _ in range(4))
        self.ln_x = nn.GroupNorm(n_head, C, eps=64e-5)

    def forward(self, x, v_first, shift, wkv_state, wkv):
        B, T, C = x.shape
        H, N = self.n_head, C // self.n_head
        dx = token_shift(x, shift) - x
        lerps = (self.x_r, self.x_w, self.x_k, self.x_v, self.x_a, self.x_g)
        xr, xw, xk, xv, xa, xg = (x + dx * m for m in lerps)
        r, k, v = self.receptance(xr), self.key(xk), self.value(xv)
        w = torch.exp(-DECAY_SCALE * torch.sigmoid(self.w0 + torch.tanh(xw @ self.w1) @ self.w2))
        if self.layer_id == 0:
            v_first = v
        else:
            v = v + (v_first - v) * torch.sigmoid(self.v0 + (xv @ self.v1) @ self.v2)
        a = torch.sigmoid(self.a0 + (xa @ self.a1) @ self.a2)
        g = torch.sigmoid(xg @ self.g1) @ self.g2
        kk = F.normalize((k * self.k_k).view(B, T, H, N), dim=-1, p=2.0, eps=1e-12)
        k = k * (1 + (a - 1) * self.k_a)
        heads = lambda t: t.view(B, T, H, N)
        if wkv_state is None:
            wkv_state = torch.zeros(B, H, N, N, dtype=x.dtype)
        y, wkv_state = wkv(heads(r), heads(w), heads(k), heads(v), -kk, kk * heads(a), wkv_state)
        y = self.ln_x(y.reshape(B * T, C)).view(B, T, C)
        y = y + ((heads(r) * heads(k) * self.r_k).sum(-1, keepdim=True) * heads(v)).view(B, T, C)
        return self.output(y * g), v_first, x[:, -1], wkv_state


class ChannelMix(nn.Module):
    def __init__(self, C, hidden):
        super().__init__()
        self.x_k = nn.Parameter(torch.zeros(1, 1, C))
        self.key = nn.Linear(C, hidden, bias=False)
        self.value = nn.Linear(hidden, C, bias=False)

    def forward(self, x, shift):
        xk = x + (token_shift(x, shift) - x) * self.x_k
        return self.value(torch.relu(self.key(xk)) ** 2), x[:, -1]


class Block(nn.Module):
    def __init__(self, C, n_head, layer_id, loras, ffn_hidden):
        super().__init__()
        if layer_id == 0:
            self.ln0 = nn.LayerNorm(C)
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.att = TimeMix(C, n_head, layer_id, *loras)
        self.ffn = ChannelMix(C, ffn_hidden)


class RWKV7Torch(nn.Module):
    """emb -> ln0 -> n x [ln1 -> time mix -> +; ln2 -> channel mix -> +] -> ln_out -> head."""

    def __init__(self, vocab_size, d_model, n_layer, head_size, loras, ffn_hidden, wkv="loop"):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, d_model // head_size, i, loras, ffn_hidden)
                                    for i in range(n_layer))
        self.ln_out = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.wkv = {"loop": wkv7_loop, "chunked": wkv7_chunked}[wkv]

    @classmethod
    def from_state_dict(cls, arrays, head_size, wkv="loop", dtype=torch.float32):
        """Build from a dict of numpy arrays with the official names (sizes inferred)."""
        V, C = arrays["emb.weight"].shape
        n_layer = len({k.split(".")[1] for k in arrays if k.startswith("blocks.")})
        loras = [arrays[f"blocks.0.att.{n}"].shape[1] for n in ("w1", "a1")]
        d_mv = arrays["blocks.1.att.v1"].shape[1] if n_layer > 1 else 32
        loras = (*loras, d_mv, arrays["blocks.0.att.g1"].shape[1])
        ffn_hidden = arrays["blocks.0.ffn.key.weight"].shape[0]
        model = cls(V, C, n_layer, head_size, loras, ffn_hidden, wkv).to(dtype)
        model.load_state_dict({k: torch.tensor(v, dtype=dtype) for k, v in arrays.items()
                               if not (k.startswith("blocks.0.att.v") and k[-1] in "012")})
        return model

    def forward(self, idx, state=None):
        """logits (B, T, V) and the new state [(att_shift, wkv, ffn_shift)] * n_layer."""
        x = self.emb(idx)
        v_first = None
        new_state = []
        for i, blk in enumerate(self.blocks):
            att_shift, wkv_state, ffn_shift = state[i] if state is not None else (None, None, None)
            if i == 0:
                x = blk.ln0(x)
            dx, v_first, att_shift, wkv_state = blk.att(blk.ln1(x), v_first, att_shift, wkv_state, self.wkv)
            x = x + dx
            dx, ffn_shift = blk.ffn(blk.ln2(x), ffn_shift)
            x = x + dx
            new_state.append((att_shift, wkv_state, ffn_shift))
        return self.head(self.ln_out(x)), new_state
