"""Per-op overhead of the tape: forward + backward of one small op, minigrad vs PyTorch eager.

    python benchmarks/bench_overhead.py [--repeat 2000]

Prints µs per (forward + backward) for add, mul and matmul on small float32 inputs, where the
numerical work is negligible and the time is the framework's own bookkeeping.
"""
import argparse
import time

import minigrad as mg  # (first: it sets OPENBLAS_THREAD_TIMEOUT before numpy loads)

# isort: split
import numpy as np


def _time(fn, repeat):
    for _ in range(max(10, repeat // 10)):
        fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t0) / repeat)
    return best * 1e6


def minigrad_cases(n):
    rng = np.random.default_rng(0)
    a = mg.Tensor(rng.standard_normal((n, n)).astype(np.float32), requires_grad=True)
    b = mg.Tensor(rng.standard_normal((n, n)).astype(np.float32), requires_grad=True)
    g = np.ones((n, n), np.float32)

    def run(op):
        def step():
            op(a, b).backward(g)
        return step
    return {"add": run(lambda x, y: x + y), "mul": run(lambda x, y: x * y),
            "matmul": run(lambda x, y: x @ y)}


def torch_cases(n):
    import torch

    torch.manual_seed(0)
    a = torch.randn(n, n, requires_grad=True)
    b = torch.randn(n, n, requires_grad=True)
    g = torch.ones(n, n)

    def run(op):
        def step():
            op(a, b).backward(g)
        return step
    return {"add": run(lambda x, y: x + y), "mul": run(lambda x, y: x * y),
            "matmul": run(lambda x, y: x @ y)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=2000)
    p.add_argument("--size", type=int, default=8, help="inputs are (size, size) float32")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    mg.set_num_threads(args.threads)
    ours = minigrad_cases(args.size)
    try:
        import torch

        torch.set_num_threads(args.threads)
        theirs = torch_cases(args.size)
    except ImportError:
        theirs = {}
    print(f"per-op forward+backward, ({args.size}, {args.size}) float32, {args.threads} thread(s)")
    print(f"{'op':<10}{'minigrad µs':>14}{'torch µs':>12}{'ratio':>9}")
    for name in ("add", "mul", "matmul"):
        m = _time(ours[name], args.repeat)
        t = _time(theirs[name], args.repeat) if name in theirs else float("nan")
        print(f"{name:<10}{m:>14.1f}{t:>12.1f}{m / t:>9.2f}")


if __name__ == "__main__":
    main()
