"""Reproducibility: the same seed and thread count give bit-identical losses and parameters, run
to run (separate processes) and within one process; 1 and 2 threads agree to fp32 tolerance.

Why bit-identical holds for a fixed thread count: every prange either writes disjoint outputs per
item (rows, batch x heads: which thread runs an item does not change its arithmetic) or reduces
into per-thread accumulators over a static row partition that depends only on the thread count,
summed in thread order afterwards. AdamW is elementwise. BLAS (OpenBLAS/MKL) GEMMs are
deterministic for a fixed thread count. Changing the thread count changes the row partition of
those reductions (and BLAS's blocking), so 1 vs 2 threads differ in the last bits: bounded below.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from _tiny_training import Trainer

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ["gpt", "rwkv7"]
STEPS = 6


def run_losses(kind, threads):
    env = dict(os.environ, OMP_WAIT_POLICY="passive", PYTHONPATH=os.path.dirname(HERE))
    cmd = [sys.executable, os.path.join(HERE, "_tiny_training.py"), "losses", kind, str(STEPS), str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_and_threads_are_bit_identical_across_processes(kind):
    for threads in (1, 2):
        a, b = run_losses(kind, threads), run_losses(kind, threads)
        assert a == b, f"{kind} with {threads} threads: runs differ\n{a}\n{b}"


@pytest.mark.parametrize("kind", KINDS)
def test_one_and_two_threads_agree_to_fp32_tolerance(kind):
    one, two = run_losses(kind, 1), run_losses(kind, 2)
    l1 = np.array([float.fromhex(v) for v in one["losses"]])
    l2 = np.array([float.fromhex(v) for v in two["losses"]])
    np.testing.assert_allclose(l1, l2, rtol=1e-5)
    for name in one["params"]:
        p1, p2 = float.fromhex(one["params"][name]), float.fromhex(two["params"][name])
        assert abs(p1 - p2) <= 1e-5 * abs(p1) + 1e-6, (name, p1, p2)
    print(f"{kind}: max loss difference 1 vs 2 threads {np.abs(l1 - l2).max():.2e}")


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_twice_in_one_process_is_bit_identical(kind):
    runs = []
    for _ in range(2):
        trainer = Trainer(kind, seed=3)
        losses = [trainer.step(i) for i in range(3)]
        runs.append((losses, trainer.params()))
    assert runs[0][0] == runs[1][0]
    for name, value in runs[0][1].items():
        assert np.array_equal(value, runs[1][1][name]), name
