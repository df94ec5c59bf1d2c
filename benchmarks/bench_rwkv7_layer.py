"""Where the time of one RWKV-7 layer goes: fused time mix + channel mix, forward + backward.

    python benchmarks/bench_rwkv7_layer.py [--threads 1] [--reps 3] [--config medium]

Wraps every Cython kernel entry point with a timer, runs fwd+bwd of F.rwkv7_time_mix and
F.rwkv7_channel_mix at the benchmark shapes (float32), and prints the per-kernel times; the rest
is GEMMs (numpy/BLAS) and Python. With --threads 1 the clock is process CPU time, which stays
meaningful on a machine shared with other jobs; with more threads it is wall time.
"""
import argparse
import collections
import os
import sys
import time

# What `import minigrad` sets (minigrad/__init__.py); numpy, imported first here, loads OpenBLAS.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import minigrad as mg  # noqa: E402
from minigrad import functional as F  # noqa: E402
from minigrad.kernels import channel_mix, layer_norm, rwkv7_time_mix, token_shift, wkv7  # noqa: E402
from minigrad.threads import set_num_threads  # noqa: E402

CONFIGS = {"small": (16, 128, 128, 32), "medium": (8, 256, 384, 64)}   # B, T, C, LoRA size
HEAD = 64


def instrument(clock, totals):
    for mod in (wkv7, rwkv7_time_mix, token_shift, channel_mix, layer_norm):
        for name in dir(mod):
            fn = getattr(mod, name)
            if callable(fn) and name.endswith(("_forward", "_backward")):
                def timed(*args, _fn=fn, _name=name):
                    t0 = clock()
                    out = _fn(*args)
                    totals[_name] += clock() - t0
                    return out
                setattr(mod, name, timed)


def layer_inputs(B, T, C, D, rng):
    H = C // HEAD
    u = lambda *s, scale=1.0: mg.tensor((scale * (rng.random(s) - 0.5)).astype(np.float32),  # noqa: E731
                                        requires_grad=True)
    p = {f"x_{c}": u(1, 1, C) for c in "rwkvag"}
    p.update({f"{n}.weight": u(C, C, scale=0.1) for n in ("receptance", "key", "value", "output")})
    p.update({n: u(1, 1, C) for n in ("w0", "a0", "v0", "k_k", "k_a")}, r_k=u(H, HEAD))
    p.update({f"{n}1": u(C, D, scale=0.1) for n in "wavg"})
    p.update({f"{n}2": u(D, C, scale=0.1) for n in "wavg"})
    p["ln_x.weight"], p["ln_x.bias"] = u(C), u(C)
    ffn = [u(1, 1, C), u(4 * C, C, scale=0.05), u(C, 4 * C, scale=0.05)]
    return u(B, T, C, scale=2.0), u(B, T, C), p, ffn


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--config", choices=list(CONFIGS), default="medium")
    args = ap.parse_args()
    set_num_threads(args.threads)
    clock = time.process_time if args.threads == 1 else time.perf_counter
    B, T, C, D = CONFIGS[args.config]
    x, v_first, p, ffn = layer_inputs(B, T, C, D, np.random.default_rng(0))
    ones = np.ones((B, T, C), np.float32)

    def step():
        out, *_ = F.rwkv7_time_mix(x, p, None, None, v_first, layer_id=1, head_size=HEAD)
        out2, _ = F.rwkv7_channel_mix(out, None, *ffn)
        mg.autograd.backward([out2], [ones])

    totals = collections.Counter()
    instrument(clock, totals)
    step()
    totals.clear()
    t0 = clock()
    for _ in range(args.reps):
        step()
    total = (clock() - t0) / args.reps
    kernels = sum(totals.values()) / args.reps
    unit = "CPU ms" if args.threads == 1 else "ms"
    print(f"RWKV-7 layer ({args.config}: B {B} T {T} C {C} LoRA {D}, float32), time mix + channel mix, "
          f"fwd+bwd, {args.threads} thread(s): {1e3 * total:.1f} {unit}")
    for name, t in totals.most_common():
        print(f"  {name:28s} {1e3 * t / args.reps:8.2f}")
    print(f"  {'all kernels':28s} {1e3 * kernels:8.2f}")
    print(f"  {'GEMMs (BLAS), numpy, Python':28s} {1e3 * (total - kernels):8.2f}")
    a = np.random.default_rng(1).random((B * T, C), np.float32)
    w = np.random.default_rng(2).random((C, C), np.float32)
    t0 = clock()
    for _ in range(20):
        a @ w
    print(f"  sgemm ({B * T}x{C}x{C}) rate: {2 * B * T * C * C * 20 / (clock() - t0) / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
