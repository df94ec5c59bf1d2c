"""WKV7 kernel throughput: forward and forward+backward GFLOP/s at the RWKV-7 benchmark shapes.

    python benchmarks/bench_wkv7_kernel.py [--threads 2] [--reps 5] [--cpu-time]

--cpu-time times with process CPU time instead of wall time: with --threads 1 it measures the
kernel's work even on a machine shared with other jobs.

FLOPs counted per (batch, step, head), N = head size: forward 9 N^2 (S a: 2N^2, the update
S w + v k^T + (S a) b^T: 5N^2, S r: 2N^2); backward 21 N^2 (see docs/rwkv7_kernels.md). The
backward's recomputation of each chunk's states (another 9 N^2) is NOT counted as useful work.
"""
import argparse
import os
import sys
import time
from functools import partial

# What `import minigrad` sets (minigrad/__init__.py); numpy, imported first here, loads OpenBLAS.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minigrad.ops.rwkv7 import WKV7_CHUNK, _wkv7_backward, _wkv7_forward  # noqa: E402
from minigrad.threads import set_num_threads  # noqa: E402

CONFIGS = {"small": (16, 128, 2, 64), "medium": (8, 256, 6, 64)}   # B, T, H, N


def inputs(B, T, H, N, dtype, seed=0):
    rng = np.random.default_rng(seed)
    r, k, v = (rng.standard_normal((B, T, H, N)).astype(dtype) for _ in range(3))
    w = rng.uniform(0.6, 1.0, (B, T, H, N)).astype(dtype)
    kk = rng.standard_normal((B, T, H, N))
    kk /= np.linalg.norm(kk, axis=-1, keepdims=True)
    a, b = (-kk).astype(dtype), (kk * rng.uniform(0, 1, kk.shape)).astype(dtype)
    return r, w, k, v, a, b


def best_of(fn, reps, clock=time.perf_counter):
    times = []
    for _ in range(reps):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return min(times), float(np.median(times))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cpu-time", action="store_true", help="time with process CPU time")
    args = ap.parse_args()
    set_num_threads(args.threads)
    clock = time.process_time if args.cpu_time else time.perf_counter
    print(f"WKV7 kernel, {args.threads} threads, chunk {WKV7_CHUNK}, best (median) of {args.reps}, "
          f"{'CPU' if args.cpu_time else 'wall'} time")
    print(f"{'config':8} {'dtype':8} {'fwd ms':>16} {'fwd GF/s':>9} {'bwd ms':>16} "
          f"{'fwd+bwd GF/s':>12}")
    for name, (B, T, H, N) in CONFIGS.items():
        for dtype in (np.float32, np.float64):
            x = inputs(B, T, H, N, dtype)
            gy = np.ones_like(x[0])
            gs = np.zeros((B, H, N, N), dtype)
            saved = _wkv7_forward(*x, None, save=True)[2]
            f_best, f_med = best_of(partial(_wkv7_forward, *x, None, save=True), args.reps, clock)
            b_best, b_med = best_of(partial(_wkv7_backward, *x, saved, gy, gs), args.reps, clock)
            steps = B * T * H
            fwd_gf = 9 * N * N * steps / f_best / 1e9
            tot_gf = 30 * N * N * steps / (f_best + b_best) / 1e9
            print(f"{name:8} {np.dtype(dtype).name:8} {1e3 * f_best:7.2f} ({1e3 * f_med:6.2f}) "
                  f"{fwd_gf:9.1f} {1e3 * b_best:7.2f} ({1e3 * b_med:6.2f}) {tot_gf:12.1f}")


if __name__ == "__main__":
    main()
