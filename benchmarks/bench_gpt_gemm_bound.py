"""The MFU a GPT training step could reach if everything but its GEMMs were free.

    PYTHONPATH=. python benchmarks/bench_gpt_gemm_bound.py [--configs small,medium] [--threads 2] [--reps 8]

Every GEMM of one step of bench_gpt.py's configs (per layer the packed q/k/v, o, packed gate/up
and down projections, then the tied head; each as forward x W^T, input grad gy W and weight grad
gy^T x), timed through `minigrad.blas.gemm`, best of --reps per product. The 2048^3 sgemm is
re-measured before every shape and the highest rate kept, as bench_gpt.py's MFU denominator is.
Prints per shape the ms of the three products and their GFLOP/s, then the step's GEMM time and
`bound` = model FLOPs (bench_gpt's count, attention included) / GEMM time / sgemm rate: no step
of that config can read a higher MFU on this machine with these GEMMs.
"""
import argparse
import contextlib
import os
import sys
import time

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")   # as `import minigrad` sets it

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_gpt import CONFIGS, VOCAB, model_flops_per_step  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from minigrad import blas  # noqa: E402


def linear_shapes(c):
    """(d_in, d_out, count) of every Linear in one step (GQA-free configs: q, k, v all d_model)."""
    d, f, L = c["d_model"], c["ffn_hidden"], c["n_layer"]
    return [(d, 3 * d, L), (d, d, L), (d, 2 * f, L), (f, d, L), (d, VOCAB, 1)]


def best_seconds(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def linear_gemm_seconds(x, w, gy, reps):
    """Best seconds of a Linear's three products: y = x W^T, gx = gy W, gW = gy^T x."""
    return [best_seconds(lambda: blas.gemm(x, w, trans_b=True), reps),
            best_seconds(lambda: blas.gemm(gy, w), reps),
            best_seconds(lambda: blas.gemm(gy, x, trans_a=True), reps)]


def linears_seconds(rng, name, M, shapes, reps, remeasure, label=""):
    """(seconds, FLOPs) of one step's x W^T families, shapes = [(d_in, d_out, count)], M rows: each
    family's three products timed (best of `reps`) after `remeasure()` (the sgemm rate), one row
    printed per family."""
    total_seconds = total_flops = 0.0
    for d_in, d_out, count in shapes:
        remeasure()
        x = rng.standard_normal((M, d_in), dtype=np.float32)
        w = rng.standard_normal((d_out, d_in), dtype=np.float32)
        gy = rng.standard_normal((M, d_out), dtype=np.float32)
        seconds = linear_gemm_seconds(x, w, gy, reps)
        flops = 3 * 2 * M * d_in * d_out
        total_seconds += count * sum(seconds)
        total_flops += count * flops
        ms = "".join(f"{t * 1e3:9.2f}" for t in seconds)
        print(f"{name:8s} {d_in:5d} -> {d_out:5d}{label} {count:6d}{ms} {flops / sum(seconds) / 1e9:8.0f}")
    return total_seconds, total_flops


def sgemm_rate(square, reps=3):
    return 2 * square.shape[0] ** 3 / best_seconds(lambda: blas.gemm(square, square), reps) / 1e9


@contextlib.contextmanager
def bound_run(description, header):
    """The command line (--configs, --threads, --reps) and the measuring state both bound scripts
    share: yields (args, rng, best, remeasure) with BLAS on --threads threads; best["rate"] is the
    highest 2048^3 sgemm GFLOP/s read so far and remeasure() reads it again."""
    from minigrad.threads import set_num_threads

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--configs", default="small,medium")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=8)
    args = ap.parse_args()
    set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    square = rng.standard_normal((2048, 2048), dtype=np.float32)
    print(f"blas backend {blas.backend()}, {args.threads} threads, best of {args.reps}")
    print(header)
    with threadpool_limits(args.threads, user_api="blas"):
        best = {"rate": max(sgemm_rate(square) for _ in range(2))}
        yield args, rng, best, lambda: best.update(rate=max(best["rate"], sgemm_rate(square)))


def main():
    header = "config    d_in -> d_out  count   fwd ms    gx ms    gW ms  GFLOP/s"
    with bound_run(__doc__.splitlines()[0], header) as (args, rng, best, remeasure):
        for name in args.configs.split(","):
            c = CONFIGS[name]
            gemm_seconds, gemm_flops = linears_seconds(rng, name, c["B"] * c["T"], linear_shapes(c),
                                                       args.reps, remeasure)
            peak = best["rate"]
            bound = model_flops_per_step(c) / gemm_seconds / 1e9 / peak
            print(f"{name}: GEMMs {gemm_flops / 1e9:.1f} GFLOP in {gemm_seconds * 1e3:.0f} ms "
                  f"({gemm_flops / gemm_seconds / 1e9:.0f} GFLOP/s); sgemm 2048^3 {peak:.1f} GFLOP/s; "
                  f"MFU bound {bound * 100:.1f} %")


if __name__ == "__main__":
    main()
