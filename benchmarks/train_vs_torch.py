"""Train the same model on the same batches with minigrad and with PyTorch, side by side.

    python benchmarks/train_vs_torch.py --model gpt --size small --steps 300
    python benchmarks/train_vs_torch.py --model rwkv7 --size small --steps 300

Both frameworks start from the same initial weights (minigrad's init, copied into PyTorch), draw
the same batches (one seeded sampler), follow the same LR schedule, AdamW settings, weight-decay
groups and grad clipping as `python -m minigrad train`, and are evaluated on the same validation
batches. Each runs in its own subprocess (so peak RSS is its own) with the same thread count.
Prints a table: wall time, ms/step, tokens/s, final train and validation loss, peak RSS.
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def setup(args):
    from minigrad.data import (
        BatchSampler,
        ByteTokenizer,
        compact_ids,
        eval_batches,
        load_corpus,
        train_val_split,
    )
    from minigrad.train import TrainConfig, build_model

    cfg = TrainConfig(model=args.model, size=args.size, steps=args.steps, lr=args.lr, seed=args.seed,
                      batch_size=args.batch_size, seq_len=args.seq_len).resolved()
    text, _ = load_corpus("shakespeare")
    tok = ByteTokenizer()
    train_ids, val_ids = train_val_split(compact_ids(tok.encode(text), 256), cfg.val_fraction)
    sampler = BatchSampler(train_ids, cfg.batch_size, cfg.seq_len, seed=cfg.seed)
    val = eval_batches(val_ids, cfg.batch_size, cfg.seq_len, cfg.eval_batches)
    model = build_model(cfg.model, cfg.size, 256, cfg.seq_len, cfg.seed)
    return cfg, sampler, val, model


# ---- PyTorch models ---------------------------------------------------------------------------


def torch_gpt(model):
    """A plain PyTorch Llama-style GPT with minigrad GPT's weights (HF Llama names, half-split RoPE)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    c = model.config
    hd = c.d_model // c.n_head
    n_kv = c.n_kv_head or c.n_head

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(c.d_model))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c.norm_eps) * self.weight

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(c.d_model, c.n_head * hd, bias=False)
            self.k_proj = nn.Linear(c.d_model, n_kv * hd, bias=False)
            self.v_proj = nn.Linear(c.d_model, n_kv * hd, bias=False)
            self.o_proj = nn.Linear(c.n_head * hd, c.d_model, bias=False)

        def forward(self, x, cos, sin):
            B, T, _ = x.shape
            q = self.q_proj(x).view(B, T, c.n_head, hd).transpose(1, 2)
            k = self.k_proj(x).view(B, T, n_kv, hd).transpose(1, 2)
            v = self.v_proj(x).view(B, T, n_kv, hd).transpose(1, 2)

            def rope(t):
                t1, t2 = t[..., :hd // 2], t[..., hd // 2:]
                return t * cos + torch.cat([-t2, t1], -1) * sin

            y = F.scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True,
                                               enable_gqa=n_kv != c.n_head)
            return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            h = c.ffn_hidden
            self.gate_proj = nn.Linear(c.d_model, h, bias=False)
            self.up_proj = nn.Linear(c.d_model, h, bias=False)
            self.down_proj = nn.Linear(h, c.d_model, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
            self.self_attn, self.mlp = Attention(), MLP()

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + self.mlp(self.post_attention_layernorm(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(c.vocab_size, c.d_model)
            self.layers = nn.ModuleList(Layer() for _ in range(c.n_layer))
            self.norm = RMSNorm()
            self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
            if c.tie_embeddings:
                self.lm_head.weight = self.embed_tokens.weight

        def forward(self, idx):
            T = idx.shape[1]
            inv = 1.0 / (c.rope_base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
            ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
            ang = torch.cat([ang, ang], -1)
            cos, sin = ang.cos().float(), ang.sin().float()
            x = self.embed_tokens(idx)
            for layer in self.layers:
                x = layer(x, cos, sin)
            return self.lm_head(self.norm(x))

    net = GPT()
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in model.state_dict().items()}
    missing, unexpected = net.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    return net


def torch_rwkv7(model):
    from rwkv7_torch import RWKV7Torch
    return RWKV7Torch.from_state_dict(model.state_dict(), model.config.head_size, wkv="chunked")


# ---- one framework, one process ----------------------------------------------------------------


def run_minigrad(args):
    import minigrad as mg
    from minigrad.train import evaluate, learning_rate, lm_loss, make_optimizer

    mg.set_num_threads(args.threads)
    cfg, sampler, val, model = setup(args)
    opt = make_optimizer(model, cfg)
    params = list(model.parameters())
    losses, start = [], time.perf_counter()
    for step in range(cfg.steps):
        for g in opt.param_groups:
            g["lr"] = learning_rate(cfg, step)
        x, y = sampler.next()
        loss = lm_loss(model, x, y)
        opt.zero_grad()
        loss.backward()
        mg.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()
        losses.append(loss.item())
    elapsed = time.perf_counter() - start
    return cfg, losses, elapsed, evaluate(model, val)


def run_torch(args):
    import torch
    import torch.nn.functional as F

    from minigrad.train import learning_rate

    torch.set_num_threads(args.threads)
    cfg, sampler, val, model = setup(args)
    net = torch_gpt(model) if cfg.model == "gpt" else torch_rwkv7(model)
    decay = [p for n, p in net.named_parameters() if p.ndim == 2 and n.endswith("weight")]
    other = [p for n, p in net.named_parameters() if not (p.ndim == 2 and n.endswith("weight"))]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": other, "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=cfg.lr, betas=(0.9, cfg.beta2))

    def loss_of(x, y):
        out = net(torch.from_numpy(x))
        logits = out[0] if isinstance(out, tuple) else out
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y).reshape(-1))

    losses, start = [], time.perf_counter()
    for step in range(cfg.steps):
        for g in opt.param_groups:
            g["lr"] = learning_rate(cfg, step)
        x, y = sampler.next()
        loss = loss_of(x, y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
        opt.step()
        losses.append(loss.item())
    elapsed = time.perf_counter() - start
    with torch.no_grad():
        val_loss = float(np.mean([loss_of(x, y).item() for x, y in val]))
    return cfg, losses, elapsed, val_loss


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["gpt", "rwkv7"], default="gpt")
    p.add_argument("--size", default="small", help="a preset of minigrad.train.PRESETS (default small)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--seq-len", type=int, default=None)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--framework", choices=["both", "minigrad", "torch"], default="both")
    args = p.parse_args()

    if args.framework != "both":
        cfg, losses, elapsed, val_loss = (run_minigrad if args.framework == "minigrad" else run_torch)(args)
        tokens = cfg.batch_size * cfg.seq_len
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"framework": args.framework, "seconds": elapsed,
                          "ms_per_step": 1e3 * elapsed / cfg.steps,
                          "tokens_per_s": tokens * cfg.steps / elapsed,
                          "train_loss_last50": float(np.mean(losses[-50:])), "val_loss": val_loss,
                          "peak_rss_mb": peak, "batch": f"{cfg.batch_size}x{cfg.seq_len}", "lr": cfg.lr}))
        return
    rows = []
    for fw in ("minigrad", "torch"):
        cmd = [sys.executable, os.path.abspath(__file__), "--framework", fw] + \
              [a for a in sys.argv[1:] if not a.startswith("--framework")]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{fw} failed:\n{out.stderr[-3000:]}", file=sys.stderr)
            continue
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    batch = rows[0]["batch"] if rows else "?"
    print(f"\n{args.model}-{args.size}, {args.steps} steps, {args.threads} threads, batch {batch}")
    print(f"{'framework':>10} {'time s':>8} {'ms/step':>8} {'tok/s':>8} {'train':>7} {'val':>7} "
          f"{'RSS MB':>7}")
    for r in rows:
        print(f"{r['framework']:>10} {r['seconds']:8.1f} {r['ms_per_step']:8.1f} {r['tokens_per_s']:8.0f} "
              f"{r['train_loss_last50']:7.3f} {r['val_loss']:7.3f} {r['peak_rss_mb']:7.0f}")
    if math.isnan(sum(r["val_loss"] for r in rows)):
        sys.exit(1)


if __name__ == "__main__":
    main()
