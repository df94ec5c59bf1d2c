"""The MFU an RWKV-7 training step could reach if everything but its GEMMs (and WKV7) were free.

    PYTHONPATH=. python benchmarks/bench_rwkv7_gemm_bound.py [--configs small,medium] [--threads 2] [--reps 8]

Every GEMM of one step of bench_rwkv7.py's configs, in the layouts and batches ops/rwkv7.py uses,
timed through `minigrad.blas`, best of --reps per product: per layer the receptance, key, value and
output projections and the channel-mix key/value (x W^T: forward, gx = gy W, gW = gy^T x), the
LoRAs w, a, g and (layers > 0) v (x W1 then h W2: forward, the input grads, and the weight grads
as the two `gemm_batch` calls of the backward), then the head. Then the WKV7 kernel's forward and
backward at the config's shapes. The 2048^3 sgemm is re-measured before every shape and the
highest rate kept, as bench_rwkv7.py's MFU denominator is.

Prints the step's GEMM time and two bounds, model FLOPs (bench_rwkv7's count) / time / sgemm
rate: `GEMM bound` with only the GEMMs timed, `GEMM+WKV bound` with the WKV7 kernel added. No
step of that config reads a higher MFU on this machine with these GEMMs and this kernel.
"""
import os
import sys
from functools import partial

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")   # as `import minigrad` sets it

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_gpt_gemm_bound import best_seconds, bound_run, linears_seconds  # noqa: E402
from bench_rwkv7 import CONFIGS, model_config, training_flops  # noqa: E402
from bench_wkv7_kernel import inputs as wkv_inputs  # noqa: E402

from minigrad import blas  # noqa: E402
from minigrad.ops.rwkv7 import _wkv7_backward, _wkv7_forward  # noqa: E402


def linear_shapes(cfg):
    """(d_in, d_out, count) of every x W^T product family in one step."""
    C, L = cfg.d_model, cfg.n_layer
    return [(C, C, 4 * L), (C, cfg.ffn_hidden, L), (cfg.ffn_hidden, C, L), (C, cfg.vocab_size, 1)]


def lora_seconds(rng, M, C, dims, reps):
    """Best seconds of one layer's LoRAs (C -> D -> C each, dims = their D): the forward products,
    the input grads g_h = g_z W2^T and g_x = g_h W1^T, and the two batched weight-grad calls."""
    mk = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    x, gz = mk(M, C), mk(M, C)
    w1s, w2s, hs = [mk(C, D) for D in dims], [mk(D, C) for D in dims], [mk(M, D) for D in dims]
    t = 0.0
    for w1, w2, h in zip(w1s, w2s, hs):
        for product in (partial(blas.gemm, x, w1), partial(blas.gemm, h, w2),
                        partial(blas.gemm, gz, w2, trans_b=True), partial(blas.gemm, h, w1, trans_b=True)):
            t += best_seconds(product, reps)
    t += best_seconds(lambda: blas.gemm_batch([(h, gz, True, False) for h in hs]), reps)
    t += best_seconds(lambda: blas.gemm_batch([(x, h, True, False) for h in hs]), reps)
    flops = sum(6 * 2 * M * C * D for D in dims)    # six products of 2 M C D each per LoRA
    return t, flops


def wkv_seconds(B, T, H, N, reps):
    """Best seconds of the WKV7 kernel's forward (saving) plus backward, fp32."""
    x = wkv_inputs(B, T, H, N, np.float32)
    gy, gs = np.ones_like(x[0]), np.zeros((B, H, N, N), np.float32)
    saved = _wkv7_forward(*x, None, save=True)[2]
    return (best_seconds(lambda: _wkv7_forward(*x, None, save=True), reps)
            + best_seconds(lambda: _wkv7_backward(*x, saved, gy, gs), reps))


def main():
    header = "config   product               count   fwd ms    gx ms    gW ms  GFLOP/s"
    with bound_run(__doc__.splitlines()[0], header) as (args, rng, best, remeasure):
        for name in args.configs.split(","):
            c, cfg = CONFIGS[name], model_config(name)
            M, C, L = c["B"] * c["T"], cfg.d_model, cfg.n_layer
            gemm_seconds, gemm_flops = linears_seconds(rng, name, M, linear_shapes(cfg), args.reps, remeasure,
                                                       " (x W^T)")
            dims = (cfg.d_decay_lora, cfg.d_aaa_lora, cfg.d_gate_lora)
            for layers, lora_dims in ((1, dims), (L - 1, dims + (cfg.d_mv_lora,))):
                if layers:
                    remeasure()
                    seconds, flops = lora_seconds(rng, M, C, lora_dims, args.reps)
                    gemm_seconds += layers * seconds
                    gemm_flops += layers * flops
                    print(f"{name:8s} {len(lora_dims)} LoRAs {C} -> {lora_dims[0]:3d} -> {C} {layers:3d}"
                          f"   all {seconds * 1e3:8.2f} ms {' ' * 16}{flops / seconds / 1e9:8.0f}")
            remeasure()
            peak = best["rate"]
            wkv = L * wkv_seconds(c["B"], c["T"], cfg.n_head, cfg.head_size, args.reps)
            flops = training_flops(cfg, M)
            print(f"{name}: GEMMs {gemm_flops / 1e9:.1f} GFLOP in {gemm_seconds * 1e3:.0f} ms "
                  f"({gemm_flops / gemm_seconds / 1e9:.0f} GFLOP/s), WKV7 fwd+bwd {wkv * 1e3:.0f} ms; "
                  f"sgemm 2048^3 {peak:.1f} GFLOP/s; model {flops / 1e9:.1f} GFLOP: "
                  f"GEMM bound {flops / gemm_seconds / 1e9 / peak * 100:.1f} %, "
                  f"GEMM+WKV bound {flops / (gemm_seconds + wkv) / 1e9 / peak * 100:.1f} %")


if __name__ == "__main__":
    main()
