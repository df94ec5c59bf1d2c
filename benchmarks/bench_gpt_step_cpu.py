"""One process, one config: wall and process CPU time per GPT training step, and page faults.

    PYTHONPATH=. python benchmarks/bench_gpt_step_cpu.py --config medium --threads 2 --steps 6

On a machine shared with other jobs the wall time of a step moves by 2x between runs; the process
CPU time (user + system, from getrusage) moves much less, so two trees are compared by running this
alternately from each (A, B, A, B, ...) and reading the CPU columns next to the wall columns.
Runs the same step as benchmarks/bench_gpt.py (forward, backward, AdamW on 2 048 tokens).
"""
import argparse
import os
import resource
import sys
import time

import minigrad  # noqa: F401  (first: it sets OPENBLAS_THREAD_TIMEOUT before numpy loads)

# isort: split
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_gpt  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="medium", choices=sorted(bench_gpt.CONFIGS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    import minigrad as mg

    mg.set_num_threads(args.threads)
    step = bench_gpt.minigrad_step(bench_gpt.CONFIGS[args.config])
    for _ in range(args.warmup):
        step()

    def usage():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime, r.ru_stime, r.ru_minflt

    wall, cpu, sys_t = [], [], []
    faults0 = usage()[2]
    for _ in range(args.steps):
        c0, s0, _ = usage()
        t0 = time.perf_counter()
        step()
        wall.append(time.perf_counter() - t0)
        c1, s1, _ = usage()
        cpu.append(c1 - c0)
        sys_t.append(s1 - s0)
    faults = (usage()[2] - faults0) / args.steps
    lo, mid = (lambda xs: min(xs) * 1e3), (lambda xs: float(np.median(xs)) * 1e3)  # noqa: E731
    print(f"{args.config} {args.threads} threads: wall min {lo(wall):.0f} median {mid(wall):.0f} | "
          f"CPU min {lo(cpu):.0f} median {mid(cpu):.0f} (system {mid(sys_t):.0f}) ms per step | "
          f"{faults:.0f} minor faults per step")


if __name__ == "__main__":
    main()
