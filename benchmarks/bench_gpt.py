"""GPT training-step benchmark: minigrad vs PyTorch eager, side by side, plus per-kernel times.

    python benchmarks/bench_gpt.py                       # small + medium, 2 threads, 10 steps each
    python benchmarks/bench_gpt.py --configs small --steps 20 --threads 2

Each (framework, config) runs in its own subprocess, so peak RSS is that framework's alone; with
--rounds R (default 2) the subprocesses alternate R times (minigrad, torch, minigrad, ...) and each
framework keeps its best median, so a burst of load from other jobs does not land on one side only.
A step is forward + backward + AdamW on 2 048 tokens (vocab 256, tied head); the table shows the
median of --steps timed steps after --warmup untimed ones. MFU = model FLOPs / step time / the
large-sgemm GFLOP/s measured here with the same thread count (the fastest of six calls, measured
again before every round; the highest rate is used); model FLOPs per token =
6 * N (every weight matrix, the tied head counted once) + 12 * n_layer * T * d_model (attention,
counted as the full T x T product, the PaLM/nanoGPT convention).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

CONFIGS = {
    "small": dict(d_model=128, n_layer=4, n_head=4, ffn_hidden=384, T=128, B=16),
    "medium": dict(d_model=384, n_layer=6, n_head=6, ffn_hidden=1024, T=256, B=8),
}
VOCAB = 256


def model_flops_per_step(c):
    d, L, f, T, B = c["d_model"], c["n_layer"], c["ffn_hidden"], c["T"], c["B"]
    n_matmul = L * (4 * d * d + 3 * d * f) + VOCAB * d
    return (6 * n_matmul + 12 * L * T * d) * B * T


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed(fn, steps, warmup):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e3


# ----------------------------------------------------------------------------- minigrad
def model_config(c):
    """The GPTConfig of a CONFIGS entry (vocab 256, tied head, max_seq_len T)."""
    from minigrad.models import GPTConfig

    return GPTConfig(vocab_size=VOCAB, d_model=c["d_model"], n_layer=c["n_layer"], n_head=c["n_head"],
                     ffn_hidden=c["ffn_hidden"], max_seq_len=c["T"])


def minigrad_step(c):
    import minigrad as mg
    from minigrad import functional as F
    from minigrad.models import GPT

    mg.manual_seed(0)
    model = GPT(model_config(c))
    opt = mg.optim.AdamW(model.parameters(), lr=1e-4)
    rng = np.random.default_rng(0)
    x = rng.integers(0, VOCAB, (c["B"], c["T"]))
    y = rng.integers(0, VOCAB, (c["B"], c["T"]))

    def step():
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def minigrad_kernels(c, steps, warmup):
    import minigrad as mg
    from minigrad import functional as F

    B, T, d, H = c["B"], c["T"], c["d_model"], c["n_head"]
    hd = d // H
    rng = np.random.default_rng(0)
    t = lambda *s: mg.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
    q, k, v = t(B, H, T, hd), t(B, H, T, hd), t(B, H, T, hd)
    x, w = t(B * T, d), t(d)
    z, tgt = t(B * T, VOCAB), rng.integers(0, VOCAB, B * T)
    g, u = t(B * T, c["ffn_hidden"]), t(B * T, c["ffn_hidden"])
    xr = t(B, H, T, hd)

    def fb(fn):
        def run():
            out = fn()
            out.backward(mg.ones(*out.shape) if out.ndim else None)
        return run
    return {
        "causal_attention": timed(fb(lambda: F.causal_attention(q, k, v)), steps, warmup),
        "rms_norm": timed(fb(lambda: F.rms_norm(x, w, 1e-5)), steps, warmup),
        "cross_entropy": timed(fb(lambda: F.cross_entropy(z, tgt)), steps, warmup),
        "swiglu": timed(fb(lambda: F.swiglu(g, u)), steps, warmup),
        "rope": timed(fb(lambda: F.rope(xr, 0)), steps, warmup),
    }


# ----------------------------------------------------------------------------- torch
def torch_model(torch, c):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d, f = c["d_model"], c["ffn_hidden"]
            self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
            self.gate, self.up = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
            self.down = nn.Linear(f, d, bias=False)
            self.n1, self.n2 = nn.RMSNorm(d, eps=1e-5), nn.RMSNorm(d, eps=1e-5)

        def forward(self, x, cos, sin):
            B, T, d = x.shape
            H = c["n_head"]
            hd = d // H
            h = self.n1(x)
            q, k, v = (p(h).view(B, T, H, hd).transpose(1, 2) for p in (self.q, self.k, self.v))
            rot = lambda a: a * cos + torch.cat([-a[..., hd // 2:], a[..., :hd // 2]], -1) * sin
            o = nn.functional.scaled_dot_product_attention(rot(q), rot(k), v, is_causal=True)
            x = x + self.o(o.transpose(1, 2).reshape(B, T, d))
            h = self.n2(x)
            return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, c["d_model"])
            self.blocks = nn.ModuleList(Block() for _ in range(c["n_layer"]))
            self.norm = nn.RMSNorm(c["d_model"], eps=1e-5)
            hd = c["d_model"] // c["n_head"]
            inv = 1.0 / 10000.0 ** (torch.arange(0, hd, 2).float() / hd)
            ang = torch.arange(c["T"]).float()[:, None] * inv[None]
            self.cos, self.sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()

        def forward(self, idx):
            x = self.emb(idx)
            for b in self.blocks:
                x = b(x, self.cos, self.sin)
            return self.norm(x) @ self.emb.weight.T
    return Llama()


def torch_step(c):
    import torch

    torch.manual_seed(0)
    model = torch_model(torch, c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, VOCAB, (c["B"], c["T"]))
    y = torch.randint(0, VOCAB, (c["B"], c["T"]))

    def step():
        loss = torch.nn.functional.cross_entropy(model(x).view(-1, VOCAB), y.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def torch_kernels(c, steps, warmup):
    import torch

    B, T, d, H = c["B"], c["T"], c["d_model"], c["n_head"]
    hd = d // H
    t = lambda *s: torch.randn(*s, requires_grad=True)
    q, k, v = t(B, H, T, hd), t(B, H, T, hd), t(B, H, T, hd)
    x, w = t(B * T, d), t(d)
    z, tgt = t(B * T, VOCAB), torch.randint(0, VOCAB, (B * T,))
    g, u = t(B * T, c["ffn_hidden"]), t(B * T, c["ffn_hidden"])
    xr = t(B, H, T, hd)
    inv = 1.0 / 10000.0 ** (torch.arange(0, hd, 2).float() / hd)
    ang = torch.arange(T).float()[:, None] * inv[None]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    F = torch.nn.functional

    def fb(fn):
        def run():
            out = fn()
            out.backward(torch.ones_like(out))
        return run
    return {
        "causal_attention": timed(fb(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                                  steps, warmup),
        "rms_norm": timed(fb(lambda: F.rms_norm(x, (d,), w, 1e-5)), steps, warmup),
        "cross_entropy": timed(fb(lambda: F.cross_entropy(z, tgt)), steps, warmup),
        "swiglu": timed(fb(lambda: F.silu(g) * u), steps, warmup),
        "rope": timed(fb(lambda: xr * cos + torch.cat([-xr[..., hd // 2:], xr[..., :hd // 2]], -1) * sin),
                      steps, warmup),
    }


# ----------------------------------------------------------------------------- driver
def worker(args):
    c = CONFIGS[args.config]
    if args.framework == "torch":
        import torch
        torch.set_num_threads(args.threads)
        step, kernels = torch_step(c), torch_kernels
    else:
        import minigrad as mg
        mg.set_num_threads(args.threads)
        step, kernels = minigrad_step(c), minigrad_kernels
    ms = timed(step, args.steps, args.warmup)
    rss = peak_rss_mb()
    result = {"ms": ms, "rss_mb": rss}
    if args.kernels:
        result["kernels"] = kernels(c, args.steps, args.warmup)
    print(json.dumps(result))


def sgemm_gflops(threads, n=2048):
    """The best single n^3 float32 GEMM, through numpy and through MKL when minigrad uses it."""
    from threadpoolctl import threadpool_limits

    blas = _minigrad_blas()
    products = [lambda a, b: a @ b] + ([blas.gemm] if blas.backend() == "mkl" else [])
    with threadpool_limits(threads, user_api="blas"):
        a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
        b = a.T.copy()
        best = min(_time_once(lambda mm=mm: mm(a, b)) for mm in products for _ in range(6))
    return 2 * n ** 3 / best / 1e9


def _minigrad_blas():
    """minigrad.blas, imported by this driver after numpy: minigrad's warning that numpy's OpenBLAS
    was loaded first is about training steps, which run in the workers, not about these GEMMs."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        from minigrad import blas
    return blas


def _time_once(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run_worker(framework, config, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", framework, "--config", config,
           "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads)]
    if not args.no_kernels:
        cmd.append("--kernels")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads))
    # minigrad sets OMP_WAIT_POLICY=PASSIVE and OPENBLAS_THREAD_TIMEOUT=4 itself when imported (two
    # thread pools whose idle workers would otherwise spin on each other's cores); --spin undoes it.
    # torch runs with its own defaults unless --torch-passive gives it the same settings.
    # (This script imports numpy before minigrad, so the worker's environment carries them.)
    if args.spin:
        env.update(OMP_WAIT_POLICY="ACTIVE", OPENBLAS_THREAD_TIMEOUT="28")
    elif framework == "minigrad" or args.torch_passive:
        env.update(OMP_WAIT_POLICY="PASSIVE", OPENBLAS_THREAD_TIMEOUT="4")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"{framework}/{config} worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="small,medium")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2, help="alternate the framework subprocesses R times")
    p.add_argument("--no-kernels", action="store_true", help="skip the per-kernel table")
    p.add_argument("--spin", action="store_true",
                   help="make OpenMP/OpenBLAS busy-wait (minigrad's defaults are passive; see run_worker)")
    p.add_argument("--torch-passive", action="store_true",
                   help="run torch with minigrad's passive OpenMP/OpenBLAS waits instead of its defaults")
    p.add_argument("--worker", choices=["minigrad", "torch"], help=argparse.SUPPRESS)
    p.add_argument("--framework", help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)
    p.add_argument("--kernels", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.kernels_all = None
    if args.worker:
        args.framework = args.worker
        return worker(args)
    try:
        import torch  # noqa: F401
        frameworks = ["minigrad", "torch"]
    except ImportError:
        frameworks = ["minigrad"]
    peak = sgemm_gflops(args.threads)
    print(f"threads {args.threads}; minigrad's GEMMs: {_minigrad_blas().backend()}; large sgemm (2048^3): "
          f"{peak:.1f} GFLOP/s; median of {args.steps} steps after {args.warmup} warm-up")
    print(f"{'config':8} {'framework':10} {'ms/step':>9} {'tokens/s':>9} {'MFU':>6} {'peak RSS':>9} "
          f"{'vs torch':>9}")
    kernel_rows = []
    for name in args.configs.split(","):
        c = CONFIGS[name]
        tokens, flops = c["B"] * c["T"], model_flops_per_step(c)
        res = {}
        for _ in range(args.rounds):
            # re-measured every round (the machine's load drifts); the highest rate is kept
            peak = max(peak, sgemm_gflops(args.threads))
            for fw in frameworks:
                r = run_worker(fw, name, args)
                if fw not in res or r["ms"] < res[fw]["ms"]:
                    res[fw] = {**r, "rss_mb": max(r["rss_mb"], res.get(fw, r)["rss_mb"])}
                if args.kernels_all is None:
                    args.kernels_all = {}
                for k, v in r.get("kernels", {}).items():
                    key = (fw, k)
                    args.kernels_all[key] = min(v, args.kernels_all.get(key, v))
        for fw in frameworks:
            if "kernels" in res[fw]:
                res[fw]["kernels"] = {k: args.kernels_all[(fw, k)] for k in res[fw]["kernels"]}
        args.kernels_all = None
        print(f"{name}: large sgemm {peak:.1f} GFLOP/s (best of every measurement so far)")
        for fw in frameworks:
            r = res[fw]
            ratio = f"{r['ms'] / res['torch']['ms']:.2f}x" if "torch" in res else "-"
            print(f"{name:8} {fw:10} {r['ms']:9.1f} {tokens / r['ms'] * 1e3:9.0f} "
                  f"{flops / (r['ms'] / 1e3) / 1e9 / peak:6.1%} {r['rss_mb']:7.0f}MB {ratio:>9}", flush=True)
        if not args.no_kernels:
            for kname in res["minigrad"]["kernels"]:
                ours = res["minigrad"]["kernels"][kname]
                theirs = res["torch"]["kernels"][kname] if "torch" in res else float("nan")
                kernel_rows.append((name, kname, ours, theirs))
    if kernel_rows:
        print(f"\nper-kernel forward+backward, ms (fp32)\n{'config':8} {'kernel':17} {'minigrad':>9} "
              f"{'torch':>9} {'ratio':>6}")
        for name, kname, ours, theirs in kernel_rows:
            print(f"{name:8} {kname:17} {ours:9.2f} {theirs:9.2f} {ours / theirs:6.2f}")


if __name__ == "__main__":
    main()
