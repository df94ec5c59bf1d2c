"""AdamW step time: minigrad's fused Cython kernel vs plain numpy vs torch.optim.AdamW.

    python benchmarks/bench_optim.py [--n 10000000] [--reps 10] [--threads 1 2] [--dtype float32]
    python benchmarks/bench_optim.py --model rwkv7-medium     # that model's parameter shapes

Prints one table row per (implementation, threads): median and best ms per step over `reps`
steps on one flat parameter of n elements (or on every parameter of a benchmark model: 201 of
them for bench_rwkv7's medium RWKV-7, most of them small), and effective memory bandwidth (bytes
touched / time: the fused step reads p, g, m, v and writes p, m, v = 7 arrays).
"""
import argparse  # noqa: I001 (minigrad is imported before numpy on purpose)
import time

import minigrad as mg  # before numpy: it sets OPENBLAS_THREAD_TIMEOUT, read when OpenBLAS loads
import numpy as np
from minigrad import nn, optim
from minigrad.optim.adamw import adamw_step_numpy


def _time(step, reps):
    step()  # warm up (first-touch page faults, lazy state)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), float(min(times))


def _model_shapes(name):
    """The parameter shapes of bench_gpt's / bench_rwkv7's medium model."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if name == "rwkv7-medium":
        from bench_rwkv7 import model_config

        from minigrad.models import RWKV7
        model = RWKV7(model_config("medium"))
    else:
        from bench_gpt import CONFIGS, model_config

        from minigrad.models import GPT
        model = GPT(model_config(CONFIGS["medium"]))
    return [p.shape for p in model.parameters()]


def _ours(shapes, dtype, rng):
    params = []
    for shape in shapes:
        p = nn.Parameter(rng.standard_normal(shape).astype(dtype))
        p.grad = mg.Tensor(rng.standard_normal(shape).astype(dtype))
        params.append(p)
    opt = optim.AdamW(params, lr=1e-3, weight_decay=0.1)
    return opt.step


def _numpy(shapes, dtype, rng):
    arrays = [(rng.standard_normal(s).astype(dtype), rng.standard_normal(s).astype(dtype),
               np.zeros(s, dtype), np.zeros(s, dtype)) for s in shapes]
    state = {"step": 0}

    def step():
        state["step"] += 1
        for p, g, m, v in arrays:
            adamw_step_numpy(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.1, state["step"])
    return step


def _torch(shapes, dtype, rng, **flags):
    import torch

    params = []
    for shape in shapes:
        p = torch.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)
        p.grad = torch.tensor(rng.standard_normal(shape).astype(dtype))
        params.append(p)
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, **flags)
    return opt.step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--model", choices=["rwkv7-medium", "gpt-medium"],
                    help="step that model's parameters instead of one of --n elements")
    args = ap.parse_args()
    dtype = np.dtype(args.dtype)
    shapes = _model_shapes(args.model) if args.model else [(args.n,)]
    n = sum(int(np.prod(s)) for s in shapes)
    try:
        import torch
    except ImportError:
        torch = None
        print("(torch not installed: torch rows skipped)")
    impls = [("minigrad AdamW (fused kernel)", _ours), ("numpy AdamW (reference)", _numpy)]
    if torch is not None:
        impls += [("torch AdamW (default, for-loop)", lambda n, d, r: _torch(n, d, r, foreach=False)),
                  ("torch AdamW foreach=True", lambda n, d, r: _torch(n, d, r, foreach=True)),
                  ("torch AdamW fused=True", lambda n, d, r: _torch(n, d, r, fused=True))]
    gbytes = 7 * n * dtype.itemsize / 1e9
    what = (f"{args.model} ({len(shapes)} tensors, {n:,} {dtype} elements)" if args.model
            else f"{n:,} {dtype} params")
    print(f"AdamW step, {what}, median/best of {args.reps}; "
          f"{mg.build_info()['blas']}; OpenMP {mg.build_info()['openmp']}")
    print(f"{'implementation':34s} {'threads':>7s} {'median ms':>10s} {'best ms':>9s} {'GB/s':>6s}")
    for threads in args.threads:
        mg.set_num_threads(threads)
        if torch is not None:
            torch.set_num_threads(threads)
        for name, make in impls:
            try:
                median, best = _time(make(shapes, dtype, np.random.default_rng(0)), args.reps)
            except (RuntimeError, TypeError) as e:  # e.g. fused=True unsupported on this build
                print(f"{name:34s} {threads:7d}   unavailable: {str(e).splitlines()[0][:60]}")
                continue
            print(f"{name:34s} {threads:7d} {median * 1e3:10.2f} {best * 1e3:9.2f} {gbytes / median:6.1f}")


if __name__ == "__main__":
    main()
