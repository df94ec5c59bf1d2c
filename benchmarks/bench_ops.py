"""Python-level op choices, measured: embedding/getitem scatter-add and the vectorised erf.

    python benchmarks/bench_ops.py

Prints best-of-3 times (ms). The scatter-add rows compare np.add.at with the sort + np.add.reduceat
that minigrad.ops.indexing.scatter_add_rows uses.
"""
import argparse
import math
import time

import minigrad  # noqa: F401  (first: it sets OPENBLAS_THREAD_TIMEOUT before numpy loads)

# isort: split
import numpy as np

from minigrad.ops import special
from minigrad.ops.indexing import scatter_add_rows


def best_ms(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1e3


def _add_at(shape, dtype, ids, rows):
    out = np.zeros(shape, dtype)
    np.add.at(out, ids, rows)


def _reduceat(shape, dtype, ids, rows):
    scatter_add_rows(np.zeros(shape, dtype), ids, rows)


def scatter_table():
    rng = np.random.default_rng(0)
    print(f"{'scatter-add rows':<34}{'np.add.at':>12}{'sort+reduceat':>15}")
    for vocab, dim, n in [(50_000, 256, 8192), (256, 256, 8192), (4096, 64, 65_536)]:
        ids = rng.integers(0, vocab, n)
        for dtype in (np.float32, np.float64):
            args = ((vocab, dim), dtype, ids, rng.standard_normal((n, dim)).astype(dtype))
            label = f"V={vocab} D={dim} N={n} {np.dtype(dtype).name}"
            print(f"{label:<34}{best_ms(lambda: _add_at(*args)):>12.1f}"   # noqa: B023 - called at once
                  f"{best_ms(lambda: _reduceat(*args)):>15.1f}")          # noqa: B023


def erf_table():
    x = np.random.default_rng(1).standard_normal(1_000_000) * 3
    sample = x[:20_000]
    ref = np.array([math.erf(v) for v in sample])
    print(f"\n{'erf, 1M elements':<34}{'ms':>12}{'max abs err':>15}")
    for dtype in (np.float32, np.float64):
        xs = x.astype(dtype)
        err = np.abs(special.erf(sample.astype(dtype)) - ref).max()
        print(f"{np.dtype(dtype).name:<34}{best_ms(lambda: special.erf(xs)):>12.1f}{err:>15.2e}")  # noqa: B023
    print(f"{'np.tanh (for scale), float32':<34}{best_ms(lambda: np.tanh(x.astype(np.float32))):>12.1f}")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    scatter_table()
    erf_table()
