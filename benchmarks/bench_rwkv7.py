"""RWKV-7 training and generation speed: minigrad vs PyTorch, side by side.

    python benchmarks/bench_rwkv7.py                    # small + medium, every framework, 2 threads
    python benchmarks/bench_rwkv7.py --configs small --frameworks minigrad --steps 5

Per config (2 048 tokens per step, vocab 256, head_size 64):
  small:  d_model 128, n_layer 4, T 128, B 16, LoRA sizes 32
  medium: d_model 384, n_layer 6, T 256, B 8,  LoRA sizes 64
Frameworks, each timed in its own subprocess (so peak RSS is its own; with --rounds R they take
turns R times and each keeps its fastest median):
  minigrad        fused Cython time-mix / channel-mix / LayerNorm nodes
  torch-loop      PyTorch eager, WKV as a per-timestep loop (as users write it)
  torch-chunked   PyTorch, chunked closed-form WKV, torch.compile'd
  rwkv-pip        BlinkDL's `rwkv` package (pip install rwkv==0.8.32; CPU fp32, its TorchScript on),
                  the official inference code, on the same weights: generation only
Reported: ms per training step (forward + backward + AdamW, median), tokens/s, peak RSS,
model-FLOPs utilisation against the sgemm rate measured here (6 x GEMM weights per token + WKV;
the rate is the fastest single call over the step's GEMM shapes, re-measured every round, highest kept),
WKV7 kernel fwd+bwd GFLOP/s (useful 9 N^2 + 21 N^2 per batch x token x head, as in
docs/rwkv7_kernels.md) and recurrent generation tokens/s (batch 1, one token at a time through the
O(1) state; minigrad samples, torch takes the argmax).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

# What `import minigrad` sets (minigrad/__init__.py); numpy, imported first here, loads OpenBLAS.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

CONFIGS = {
    "small": dict(d_model=128, n_layer=4, T=128, B=16, lora=32),
    "medium": dict(d_model=384, n_layer=6, T=256, B=8, lora=64),
}
VOCAB, HEAD_SIZE = 256, 64
FRAMEWORKS = ("minigrad", "torch-loop", "torch-chunked", "rwkv-pip")
WKV_FLOPS_PER_STEP = 30  # useful x N^2 per (batch, token, head): forward 9, backward 21 (no recompute)
CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}


def model_config(name):
    from minigrad.models import RWKV7Config

    c = CONFIGS[name]
    return RWKV7Config(vocab_size=VOCAB, d_model=c["d_model"], n_layer=c["n_layer"], head_size=HEAD_SIZE,
                       d_decay_lora=c["lora"], d_aaa_lora=c["lora"], d_mv_lora=c["lora"],
                       d_gate_lora=c["lora"])


def training_flops(cfg, tokens):
    """6 x (GEMM weights) per token for forward + backward, plus the WKV recurrence."""
    C, L = cfg.d_model, cfg.n_layer
    gemm = L * (4 * C * C + 2 * C * cfg.ffn_hidden
                + 2 * C * (cfg.d_decay_lora + cfg.d_aaa_lora + cfg.d_gate_lora)) \
        + (L - 1) * 2 * C * cfg.d_mv_lora + C * cfg.vocab_size
    wkv = L * cfg.n_head * WKV_FLOPS_PER_STEP * cfg.head_size ** 2
    return tokens * (6 * gemm + wkv)


def batch(cfg, B, T, seed):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, cfg.vocab_size, (B, T + 1))
    return idx[:, :-1], idx[:, 1:]


def timed(step, warmup, steps, clock="wall"):
    """Median seconds per call: wall clock, or this process's CPU time (all its threads)."""
    now = CLOCK[clock]
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = now()
        step()
        times.append(now() - t0)
    return float(np.median(times))


def init_weights(cfg):
    """Official init, with the zero-initialised output projections made non-zero (realistic grads)."""
    from minigrad.models.rwkv7_init import official_init

    w = official_init(cfg, seed=0)
    rng = np.random.default_rng(1)
    for k in w:
        if k.endswith(("att.output.weight", "ffn.value.weight")) or k.endswith(("w1", "a1", "v1", "g1")):
            w[k] = (0.02 * rng.standard_normal(w[k].shape)).astype(np.float32)
    return w


# ---- workers (one framework each, in a fresh process) --------------------------------------------
def work_minigrad(cfg, c, args):
    import minigrad as mg
    from minigrad import functional as F
    from minigrad.models import RWKV7
    from minigrad.optim import AdamW

    mg.set_num_threads(args.threads)
    model = RWKV7.from_state_dict(init_weights(cfg))
    opt = AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    x, y = batch(cfg, c["B"], c["T"], 0)
    y = mg.tensor(y.reshape(-1))

    def step():
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), y)
        loss.backward()
        opt.step()

    result = {"step_s": timed(step, args.warmup, args.steps, args.clock)}
    # WKV7 kernel alone, fwd + bwd, at this config's shapes
    B, T, H, N = c["B"], c["T"], cfg.n_head, cfg.head_size
    rng = np.random.default_rng(2)
    mk = lambda lo, hi: mg.tensor(rng.uniform(lo, hi, (B, T, H, N)).astype(np.float32), requires_grad=True)
    r, k, v = mk(-1, 1), mk(-1, 1), mk(-1, 1)
    w = mk(0.55, 1.0)
    kk = rng.standard_normal((B, T, H, N))
    kk /= np.linalg.norm(kk, axis=-1, keepdims=True)
    a = mg.tensor((-kk).astype(np.float32), requires_grad=True)
    b = mg.tensor((kk * rng.uniform(0, 1, kk.shape)).astype(np.float32), requires_grad=True)
    gy = mg.tensor(rng.standard_normal((B, T, H, N)).astype(np.float32))

    def wkv_step():
        y_, _ = F.wkv7(r, w, k, v, a, b)
        (y_ * gy).sum().backward()

    result["wkv_s"] = timed(wkv_step, 1, max(3, args.steps), args.clock)
    result["gen_tok_s"] = generation_speed(lambda prompt, n: model.generate(prompt, n, seed=0), cfg, args)
    return result


def torch_setup(cfg, args, wkv):
    import torch
    from rwkv7_torch import RWKV7Torch

    torch.set_num_threads(args.threads)
    model = RWKV7Torch.from_state_dict(init_weights(cfg), HEAD_SIZE, wkv=wkv)
    return torch, model


def work_torch(cfg, c, args, wkv, compiled):
    torch, model = torch_setup(cfg, args, wkv)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    x, y = batch(cfg, c["B"], c["T"], 0)
    x, y = torch.tensor(x), torch.tensor(y.reshape(-1))
    forward = torch.compile(model) if compiled else model

    def step():
        opt.zero_grad()
        logits, _ = forward(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size), y)
        loss.backward()
        opt.step()

    t0 = time.perf_counter()
    step()  # first step (includes compilation when compiled)
    result = {"first_step_s": time.perf_counter() - t0,
              "step_s": timed(step, args.warmup, args.steps, args.clock)}
    if not compiled:
        @torch.no_grad()
        def generate(prompt, n):
            logits, state = model(torch.tensor(prompt))
            for _ in range(n):
                nxt = logits[:, -1].argmax(-1, keepdim=True)
                logits, state = model(nxt, state)

        result["gen_tok_s"] = generation_speed(generate, cfg, args)
    return result


def work_rwkv_package(cfg, args):
    """Greedy decoding with BlinkDL's `rwkv` package on minigrad's weights saved as an official .pth:
    the prompt in one `forward`, then one token per `forward` through its recurrent state."""
    import importlib.util
    import tempfile

    if importlib.util.find_spec("rwkv") is None or importlib.util.find_spec("torch") is None:
        return {"skipped": "pip install torch==2.13.0 rwkv==0.8.32"}
    for var, value in (("RWKV_V7_ON", "1"), ("RWKV_JIT_ON", "1"), ("RWKV_CUDA_ON", "0")):
        os.environ[var] = value
    import torch
    from rwkv.model import RWKV

    from minigrad.models import RWKV7

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        path = RWKV7.from_state_dict(init_weights(cfg)).save_pretrained(os.path.join(tmp, "model.pth"))
        model = RWKV(path[:-len(".pth")], "cpu fp32")

    def generate(prompt, n):
        logits, state = model.forward(prompt[0].tolist(), None)
        for _ in range(n):
            logits, state = model.forward([int(logits.argmax())], state)

    return {"gen_tok_s": generation_speed(generate, cfg, args)}


def generation_speed(generate, cfg, args):
    prompt = np.random.default_rng(3).integers(0, cfg.vocab_size, (1, 16))
    generate(prompt, 4)
    now = CLOCK[args.clock]
    t0 = now()
    generate(prompt, args.gen_tokens)
    return args.gen_tokens / (now() - t0)


def worker(args):
    cfg, c = model_config(args.config), CONFIGS[args.config]
    if args.worker == "minigrad":
        result = work_minigrad(cfg, c, args)
    elif args.worker == "rwkv-pip":
        result = work_rwkv_package(cfg, args)
    elif args.worker == "torch-loop":
        result = work_torch(cfg, c, args, "loop", compiled=False)
    else:
        result = work_torch(cfg, c, args, "chunked", compiled=True)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result))


# ---- driver --------------------------------------------------------------------------------------
def sgemm_rate(threads, c, clock, reps=8):
    """Best GFLOP/s of one float32 matmul call (fastest of `reps`; numpy's, and MKL's when minigrad
    uses it) over the step's dominant GEMM shapes and a 1024^3 square: the machine's GEMM rate in
    its quietest moment."""
    from threadpoolctl import threadpool_limits

    from minigrad import blas

    products = [lambda a, b: a @ b] + ([blas.gemm] if blas.backend() == "mkl" else [])
    rows, C = c["B"] * c["T"], c["d_model"]
    best = 0.0
    now = CLOCK[clock]
    with threadpool_limits(threads, user_api="blas"):
        for M, K, N in ((rows, C, 4 * C), (rows, 4 * C, C), (rows, C, C), (1024, 1024, 1024)):
            a = np.random.rand(M, K).astype(np.float32)
            b = np.random.rand(K, N).astype(np.float32)
            for mm in products:
                mm(a, b)
                fastest = float("inf")
                for _ in range(reps):
                    t0 = now()
                    mm(a, b)
                    fastest = min(fastest, now() - t0)
                best = max(best, 2 * M * K * N / fastest / 1e9)
    return best


def run_worker(framework, config, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", framework, "--config", config,
           "--threads", str(args.threads), "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--gen-tokens", str(args.gen_tokens), "--clock", args.clock]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    sys.stderr.write(f"[{framework}/{config}] failed:\n{proc.stderr[-3000:]}\n")
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="small,medium")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--gen-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=1,
                   help="run the framework subprocesses R times, alternating, and keep each one's fastest "
                        "median (a burst of load from other jobs then does not land on one side only)")
    p.add_argument("--timeout", type=int, default=3600)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall clock (default) or process CPU time: on a machine shared with other jobs, "
                        "'--threads 1 --clock cpu' measures the work itself")
    p.add_argument("--results", help="JSON file to merge results into (and build the table from), so "
                   "frameworks can be (re)run separately")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)

    import minigrad

    print(f"minigrad {minigrad.build_info()}")
    print(f"threads {args.threads}, {args.clock} clock, median of {args.steps} steps after {args.warmup} "
          f"warm-up\n")
    saved = {}
    if args.results and os.path.exists(args.results):
        with open(args.results) as f:
            saved = json.load(f)
    key = lambda config, what: f"{config}/{what}/threads={args.threads}/{args.clock}"
    for config in args.configs.split(","):
        best, sgemm = {}, 0.0
        for _ in range(max(1, args.rounds)):
            # measured again every round (the machine's load drifts), and the highest rate kept
            sgemm = max(sgemm, sgemm_rate(args.threads, CONFIGS[config], args.clock))
            saved[key(config, "sgemm")] = sgemm
            for fw in args.frameworks.split(","):
                best[fw] = saved[key(config, fw)] = faster(best.get(fw), run_worker(fw, config, args))
                if args.results:
                    with open(args.results, "w") as f:
                        json.dump(saved, f, indent=1)
    print(table(args, saved, key))


def faster(old, new):
    """The result with the shorter step (generation only: the higher tokens/s; a failed run, None,
    loses), peak RSS the larger of the two."""
    if old is None or new is None or "skipped" in old:
        return new or old
    speed = (lambda r: r["step_s"]) if "step_s" in old else (lambda r: -r["gen_tok_s"])
    best = dict(min((old, new), key=speed))
    best["peak_rss_mb"] = max(old["peak_rss_mb"], new["peak_rss_mb"])
    return best


def table(args, saved, key):
    """A markdown table of every framework with a result for the chosen configs, threads and clock."""
    lines = ["| config | framework | ms/step | tokens/s | vs torch loop | vs torch compiled | MFU "
             "| peak RSS MB | WKV7 fwd+bwd GFLOP/s | generation tokens/s |", "|" + "---|" * 10]
    notes = []
    for config in args.configs.split(","):
        cfg, c = model_config(config), CONFIGS[config]
        tokens = c["B"] * c["T"]
        flops, peak = training_flops(cfg, tokens), saved[key(config, "sgemm")]
        notes.append(f"{config}: {flops / 1e9:.1f} model GFLOP per step, sgemm {peak:.0f} GFLOP/s measured "
                     f"(GEMM-bound step {flops / peak / 1e6:.0f} ms)")
        res = {fw: saved.get(key(config, fw)) for fw in FRAMEWORKS if key(config, fw) in saved}
        loop = (res.get("torch-loop") or {}).get("step_s")
        comp = (res.get("torch-chunked") or {}).get("step_s")
        for fw, r in res.items():
            if r is None or "skipped" in r:
                lines.append(f"| {config} | {fw} | {'failed' if r is None else 'skipped: ' + r['skipped']} |"
                             + " |" * 7)
                continue
            gen = f"{r['gen_tok_s']:.0f}" if "gen_tok_s" in r else "-"
            if "step_s" not in r:       # generation only
                lines.append(f"| {config} | {fw} | - | - | - | - | - | {r['peak_rss_mb']:.0f} | - | {gen} |")
                continue
            s = r["step_s"]
            ratio = lambda ref, s=s: f"{s / ref:.3f}x" if ref else "-"
            wkv_flops = tokens * cfg.n_head * WKV_FLOPS_PER_STEP * HEAD_SIZE ** 2
            wkv = f"{wkv_flops / r['wkv_s'] / 1e9:.1f}" if "wkv_s" in r else "-"
            mfu = flops / s / (peak * 1e9) * 100
            lines.append(f"| {config} | {fw} | {s * 1e3:.0f} | {tokens / s:.0f} | {ratio(loop)} "
                         f"| {ratio(comp)} | {mfu:.0f}% | {r['peak_rss_mb']:.0f} | {wkv} | {gen} |")
    return "\n".join(lines + [""] + notes)

if __name__ == "__main__":
    main()
