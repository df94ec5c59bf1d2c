"""One `blas.gemm_batch` call against the same products one `blas.gemm` after the other.

    PYTHONPATH=. python benchmarks/bench_gemm_batch.py [--threads 2] [--reps 15]

The product sets of one medium RWKV-7 layer (2 048 tokens, C 384, LoRA 64): the LoRA weight grads
(K = 2 048, thin outputs), the LoRAs' other products and the projections. Both ways alternate in
one process; the table gives min and median ms per set. With MKL, gemm_batch hands whole products
to its threads; with numpy (MINIGRAD_BLAS=numpy, or no MKL) it is the same loop.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")   # as `import minigrad` sets it

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import minigrad as mg  # noqa: E402
from minigrad import blas  # noqa: E402


def product_sets(M=2048, C=384, D=64, seed=0):
    rng = np.random.default_rng(seed)
    mk = lambda *s: rng.standard_normal(s).astype(np.float32)   # noqa: E731
    x = [mk(M, C) for _ in range(4)]         # the lerped inputs
    h = [mk(M, D) for _ in range(4)]         # LoRA hidden activations / their grads
    w_in, w_out = [mk(C, D) for _ in range(4)], [mk(D, C) for _ in range(4)]
    w_proj = [mk(C, C) for _ in range(3)]
    return {
        "LoRA wgrad x^T g_h (C x M x D, TN) x4": [(x[i], h[i], True, False) for i in range(4)],
        "LoRA wgrad x^T g_h x3 (layer 0)": [(x[i], h[i], True, False) for i in range(3)],
        "LoRA wgrad h^T g_z (D x M x C, TN) x4": [(h[i], x[i], True, False) for i in range(4)],
        "LoRA g_h = g_z W2^T (M x C x D, NT) x4": [(x[i], w_out[i], False, True) for i in range(4)],
        "LoRA gx = g_h W1^T (M x D x C, NT) x4": [(h[i], w_in[i], False, True) for i in range(4)],
        "LoRA x W1 (M x C x D, NN) x4": [(x[i], w_in[i], False, False) for i in range(4)],
        "projections x W^T (M x C x C, NT) x3": [(x[i], w_proj[i], False, True) for i in range(3)],
        "projection wgrads (C x M x C, TN) x3": [(x[i], x[i + 1], True, False) for i in range(3)],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    mg.set_num_threads(args.threads)
    print(f"gemm backend {blas.backend()}, {args.threads} thread(s), {args.reps} alternations\n")
    print("| products | one after the other ms (min / median) | gemm_batch ms (min / median) "
          "| ratio of minima |")
    print("|---|---|---|---|")
    for name, products in product_sets().items():
        times = {"loop": [], "batch": []}
        for _ in range(args.reps):
            for way in ("loop", "batch"):
                t0 = time.perf_counter()
                if way == "loop":
                    for prod in products:
                        blas.gemm(*prod)
                else:
                    blas.gemm_batch(products)
                times[way].append(time.perf_counter() - t0)
        lo, ba = (sorted(times[k]) for k in ("loop", "batch"))
        mid = args.reps // 2
        print(f"| {name} | {1e3 * lo[0]:.2f} / {1e3 * lo[mid]:.2f} | {1e3 * ba[0]:.2f} / {1e3 * ba[mid]:.2f} "
              f"| {ba[0] / lo[0]:.2f}x |")


if __name__ == "__main__":
    main()
