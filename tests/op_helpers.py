"""Shared helpers of the tests/test_ops_*.py files: one-line op checks.

`check_op(family, fn, *arrays, ref=...)` runs `fn` on fp64 Tensors made from `arrays`, compares the
forward with the numpy reference `ref`, gradchecks every float input and records the worst
gradcheck error per op family. Set MINIGRAD_GRADCHECK_REPORT=path to dump those as JSON at exit.
"""
import atexit
import json
import os

import numpy as np

import minigrad as mg
from minigrad.autograd import gradcheck

WORST = {}
RTOL = 1e-6


def rng(seed=0):
    return np.random.default_rng(seed)


def randn(*shape, seed=0, low=None):
    """fp64 normal samples; `low` shifts them away from a kink (|x| >= low) for non-smooth ops."""
    x = rng(seed).standard_normal(shape)
    if low is not None:
        x = np.where(x >= 0, x + low, x - low)
    return x


def positive(*shape, seed=0):
    return rng(seed).uniform(0.5, 2.0, shape)


def leaf(a, requires_grad=True):
    """A fp64 leaf (float arrays require grad; other arrays are passed through as tensors)."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return mg.tensor(a, dtype=mg.float64, requires_grad=requires_grad)
    return mg.tensor(a)


def record(family, errors):
    if errors:
        WORST[family] = max(WORST.get(family, 0.0), *errors)


def check_op(family, fn, *arrays, ref=None, grad=True, rtol=RTOL, atol=1e-12, eps=1e-6):
    """Forward vs `ref` (fp64, tight) and gradcheck of every float input; returns the output."""
    inputs = [leaf(a) if isinstance(a, (np.ndarray, np.generic)) else a for a in arrays]
    out = fn(*inputs)
    if ref is not None:
        expected = ref(*arrays)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        exps = expected if isinstance(expected, (tuple, list)) else (expected,)
        assert len(outs) == len(exps)
        for o, e in zip(outs, exps):
            assert o.shape == np.shape(e), (o.shape, np.shape(e))
            np.testing.assert_allclose(o.data, e, rtol=1e-12, atol=atol)
    if grad:
        gradcheck(fn, inputs, eps=eps, rtol=rtol)
        record(family, gradcheck.last_errors)
    return out


def fp32_matches_fp64(fn, *arrays, rtol=1e-4, atol=1e-5):
    """fn in fp32 keeps fp32 (forward and grads) and agrees with fp64."""
    def run(dtype):
        ts = [mg.tensor(a, dtype=dtype, requires_grad=True) if a.dtype.kind == "f" else mg.tensor(a)
              for a in arrays]
        out = fn(*ts)
        out.backward(mg.tensor(np.ones(out.shape), dtype=dtype))
        return out, [t.grad for t in ts if t.requires_grad]

    o32, g32 = run(mg.float32)
    o64, g64 = run(mg.float64)
    assert o32.dtype == mg.float32
    np.testing.assert_allclose(o32.data, o64.data, rtol=rtol, atol=atol)
    for a, b in zip(g32, g64):
        assert a is None or a.dtype == mg.float32
        if a is not None:
            np.testing.assert_allclose(a.data, b.data, rtol=rtol, atol=atol)


def check_thread_count_invariance(model, idx, counts=(1, 2, 3)):
    """An fp64 model's logits and every parameter gradient of sum(logits^2) agree across OpenMP
    thread counts (rows enough for the kernels' parallel paths): catches races between threads."""
    from minigrad.threads import get_num_threads, set_num_threads
    before, results = get_num_threads(), []
    try:
        for n in counts:
            set_num_threads(n)
            model.zero_grad()
            logits = model(idx)
            (logits * logits).sum().backward()
            results.append((logits.numpy().copy(),
                            {k: p.grad.numpy().copy() for k, p in model.named_parameters()}))
    finally:
        set_num_threads(before)
    for logits, grads in results[1:]:
        np.testing.assert_allclose(logits, results[0][0], rtol=1e-11, atol=1e-11)
        for name, g in results[0][1].items():
            np.testing.assert_allclose(grads[name], g, rtol=1e-9, atol=1e-10 * max(np.abs(g).max(), 1.0),
                                       err_msg=name)


def _dump():
    path = os.environ.get("MINIGRAD_GRADCHECK_REPORT")
    if path and WORST:
        old = {}
        if os.path.exists(path):
            with open(path) as f:
                old = json.load(f)
        for k, v in WORST.items():
            old[k] = max(old.get(k, 0.0), v)
        with open(path, "w") as f:
            json.dump(old, f, indent=1, sort_keys=True)


atexit.register(_dump)
