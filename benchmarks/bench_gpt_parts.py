"""The GPT step's non-GEMM parts, old path against fused path, interleaved in one process.

    PYTHONPATH=. python benchmarks/bench_gpt_parts.py                  # medium shapes, 2 threads
    PYTHONPATH=. python benchmarks/bench_gpt_parts.py --config small --threads 1

Each row times one layer's worth of a part (Function forward + backward on raw arrays, so no tape
overhead), alternating the variants every round so load from other jobs hits both alike; the
table shows the min and the median over --rounds rounds, in ms.

- split q/k/v + RoPE: the packed (B, T, (Hq + 2 Hkv) hd) projection -> rotated q, k and v.
  "two passes + copy" is the previous path (a rope kernel call each for q and k, numpy copying v;
  backward: two inverse rotations and a numpy copy of gv); "one pass" is kernels/rope.qkv_rope_*.
- residual add + RMSNorm: "add, norm" is x + r (numpy) then rms_norm; backward rms_norm's gx plus
  the residual's gradient (the sum the autograd engine forms). "fused" is ops/rms_norm.AddRMSNorm.
- SwiGLU (packed gate|up) forward + backward, for reference (unchanged).
Run it twice, with MINIGRAD_KEEP_FREED_MEMORY=0 and without, to see the page-fault cost
(minigrad/heap.py): every variant allocates its outputs as the model does.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import minigrad as mg  # noqa: E402, I001  (before numpy: it sets OPENBLAS_THREAD_TIMEOUT)
import numpy as np  # noqa: E402
from minigrad.heap import keep_freed_memory  # noqa: E402
from minigrad.kernels import rms_norm as rms_k  # noqa: E402
from minigrad.kernels import rope as rope_k  # noqa: E402
from minigrad.ops.rms_norm import AddRMSNorm  # noqa: E402
from minigrad.ops.rope import SplitQKVRoPE, rope_tables  # noqa: E402
from minigrad.ops.swiglu import SwiGLUPacked  # noqa: E402

CONFIGS = {"small": dict(d=128, H=4, f=384, T=128, B=16), "medium": dict(d=384, H=6, f=1024, T=256, B=8)}


class Ctx:
    needs_input_grad = (True, True, True, True)

    def save_for_backward(self, *arrays):
        self.saved_tensors = arrays


def split_two_pass(y, gq, H, hd, cos, sin, pos):
    """The previous split_qkv_rope: rope kernel on q's and k's column blocks, numpy copy of v."""
    B, T, W = y.shape
    y2 = y.reshape(B * T, W)
    outs = []
    for j in range(2):
        src = y2[:, j * H * hd:(j + 1) * H * hd].reshape(B * T, H, hd)
        out = np.empty((B, T, H, hd), y.dtype)
        rope_k.rope_forward(src, out.reshape(src.shape), cos, sin, pos, 0, False)
        outs.append(out)
    outs.append(np.ascontiguousarray(y2[:, 2 * H * hd:]).reshape(B, T, H, hd))
    gy = np.empty((B * T, W), y.dtype)
    for j in range(2):
        g3 = np.ascontiguousarray(gq).reshape(B * T, H, hd)
        dst = gy[:, j * H * hd:(j + 1) * H * hd].reshape(g3.shape)
        rope_k.rope_backward(g3, dst, cos, sin, pos, 0, False)
    gy[:, 2 * H * hd:] = gq.reshape(B * T, -1)
    return gy


def split_one_pass(y, gq, H):
    ctx = Ctx()
    SplitQKVRoPE.forward(ctx, y, 0, H, H, 10000.0, False, "bthd")
    return SplitQKVRoPE.backward(ctx, gq, gq, gq)


def add_norm_separate(x, r, w, gs, gy):
    s = x + r
    y, rstd = np.empty_like(s), np.empty(s.shape[0], s.dtype)
    rms_k.rms_norm_forward(s, w, 1e-5, y, rstd)
    gx, gw = np.empty_like(s), np.empty_like(w)
    rms_k.rms_norm_backward(gy, s, w, rstd, gx, gw, True, True)
    return gx + gs, gw


def add_norm_fused(x, r, w, gs, gy):
    ctx = Ctx()
    AddRMSNorm.forward(ctx, x, r, w, 1e-5)
    return AddRMSNorm.backward(ctx, gs, gy)


def swiglu(h, gout):
    ctx = Ctx()
    SwiGLUPacked.forward(ctx, h)
    return SwiGLUPacked.backward(ctx, gout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="medium", choices=sorted(CONFIGS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=30)
    args = p.parse_args()
    kept = keep_freed_memory()
    mg.set_num_threads(args.threads)
    c = CONFIGS[args.config]
    B, T, d, H, f = c["B"], c["T"], c["d"], c["H"], c["f"]
    hd, N = d // H, B * T
    rng = np.random.default_rng(0)
    r32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    y, gq = r32(B, T, 3 * d), r32(B, T, H, hd)
    x, r, w, gs, gy = r32(N, d), r32(N, d), r32(d), r32(N, d), r32(N, d)
    h, gout = r32(N, 2 * f), r32(N, f)
    cos, sin = rope_tables(T, hd, 10000.0, np.float32)
    pos = np.arange(T)
    np.testing.assert_allclose(split_two_pass(y, gq, H, hd, cos, sin, pos).reshape(B, T, -1),
                               split_one_pass(y, gq, H)[0], rtol=0, atol=0)
    np.testing.assert_allclose(add_norm_separate(x, r, w, gs, gy)[0], add_norm_fused(x, r, w, gs, gy)[0],
                               rtol=1e-5, atol=1e-5)
    cases = {
        ("split q/k/v + RoPE", "two passes + copy"): lambda: split_two_pass(y, gq, H, hd, cos, sin, pos),
        ("split q/k/v + RoPE", "one pass"): lambda: split_one_pass(y, gq, H),
        ("residual add + RMSNorm", "add, norm"): lambda: add_norm_separate(x, r, w, gs, gy),
        ("residual add + RMSNorm", "fused"): lambda: add_norm_fused(x, r, w, gs, gy),
        ("SwiGLU packed", "fwd + bwd"): lambda: swiglu(h, gout),
    }
    times = {k: [] for k in cases}
    for _ in range(args.rounds):
        for k, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    print(f"config {args.config}, {args.threads} threads, keep_freed_memory {kept}, {args.rounds} rounds; "
          "ms per layer (forward + backward)")
    print(f"{'part':24} {'variant':18} {'min':>7} {'median':>7}")
    for (part, variant), ts in times.items():
        print(f"{part:24} {variant:18} {min(ts) * 1e3:7.3f} {np.median(ts) * 1e3:7.3f}")


if __name__ == "__main__":
    main()
