"""Threads: set_num_threads is honoured (OpenMP in every Python thread, and BLAS), kernels give the
same results with 1 and 2 threads, and two Python threads using minigrad at once get exactly
the results they get alone."""
import os
import threading

import numpy as np
import pytest
from _tiny_training import Trainer

import minigrad as mg
from minigrad import functional as F
from minigrad.kernels import _threads
from minigrad.ops.rwkv7 import TIME_MIX_PARAMS


@pytest.fixture(autouse=True)
def restore_threads():
    n = mg.get_num_threads()
    yield
    mg.set_num_threads(n)


def in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_set_num_threads_is_honoured_by_every_python_thread():
    for n in (1, 2, 3):
        mg.set_num_threads(n)
        assert mg.get_num_threads() == n and _threads.get_threads() == n

        def fresh_thread():       # OpenMP's team size is per thread: an op syncs it
            (mg.ones(2) + 1).sum()
            return _threads.get_threads()
        assert in_thread(fresh_thread) == n
    with pytest.raises(ValueError, match=">= 1"):
        mg.set_num_threads(0)


def test_set_num_threads_caps_blas():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    mg.set_num_threads(1)
    blas = [i for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
    assert blas and all(i["num_threads"] == 1 for i in blas)


def _fused_cases(dt):
    """F.* calls big enough that 2 threads split the work; returns fn() -> list of arrays."""
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(dt) * 0.5  # noqa: E731
    B, T, H, N = 2, 33, 4, 8
    C, D = H * N, 5
    arrays = {"x": r(B, T, C), "w": r(C), "b": r(C), "q": r(B, H, T, N), "k": r(B, 2, T, N),
              "v": r(B, 2, T, N), "logits": r(B * T, 50), "gate": r(B * T, 3 * C), "up": r(B * T, 3 * C),
              "wk": [r(B, T, H, N) for _ in range(6)], "s0": r(B, H, N, N)}
    wk = arrays["wk"]
    wk[1] = np.exp(-np.exp(wk[1]))
    wk[4] = wk[4] / np.linalg.norm(wk[4], axis=-1, keepdims=True)
    wk[5] = -wk[4] * 0.5
    shapes = {"w1": (C, D), "a1": (C, D), "v1": (C, D), "g1": (C, D), "w2": (D, C), "a2": (D, C),
              "v2": (D, C), "g2": (D, C), "r_k": (H, N), "ln_x.weight": (C,), "ln_x.bias": (C,)}
    tm_params = {n: r(*shapes.get(n, (C, C) if n.endswith("weight") else (1, 1, C))) for n in TIME_MIX_PARAMS}
    targets = rng.integers(0, 50, B * T)

    def grads(fn, *arrs):
        ts = [mg.Tensor(a, requires_grad=True) for a in arrs]
        outs = fn(*ts)
        outs = outs if isinstance(outs, tuple) else (outs,)
        total = sum(((o * o).sum() for o in outs if o.requires_grad), mg.zeros((), dtype=dt))
        total.backward()
        return [o.data.copy() for o in outs] + [t.grad.data.copy() for t in ts if t.grad is not None]

    a = arrays
    return {
        "rms_norm": lambda: grads(lambda x, w: F.rms_norm(x, w), a["x"], a["w"]),
        "layer_norm": lambda: grads(lambda x, w, b: F.layer_norm(x, w, b), a["x"], a["w"], a["b"]),
        "attention": lambda: grads(F.causal_attention, a["q"], a["k"], a["v"]),
        "rope": lambda: grads(lambda q: F.rope(q), a["q"]),
        "cross_entropy": lambda: grads(lambda z: F.cross_entropy(z, targets), a["logits"]),
        "swiglu": lambda: grads(F.swiglu, a["gate"], a["up"]),
        "wkv7": lambda: grads(lambda *t: F.wkv7(*t), *wk, a["s0"]),
        "time_mix": lambda: grads(lambda x, *p: F.rwkv7_time_mix(x, dict(zip(TIME_MIX_PARAMS, p)), layer_id=0,
                                                                 head_size=N)[:3],
                                  a["x"], *(tm_params[n] for n in TIME_MIX_PARAMS)),
    }


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fused_ops_agree_with_one_and_two_threads(dt):
    cases = _fused_cases(dt)
    tol = 1e-5 if dt == np.float32 else 1e-12
    for name, fn in cases.items():
        mg.set_num_threads(1)
        one = fn()
        mg.set_num_threads(2)
        two = fn()
        for i, (x, y) in enumerate(zip(one, two)):
            np.testing.assert_allclose(x, y, rtol=tol, atol=tol, err_msg=f"{name} output/grad {i}")


def test_two_python_threads_at_once_get_their_serial_results():
    """GPT training in one Python thread, RWKV-7 training in another, and the fused ops in a third,
    all at once, with 2 OpenMP threads each: every result equals the one computed alone."""
    mg.set_num_threads(2)
    steps = 4
    serial = {}
    for kind in ("gpt", "rwkv7"):
        trainer = Trainer(kind, seed=1)
        serial[kind] = ([trainer.step(i) for i in range(steps)], trainer.params())
    ops = _fused_cases(np.float32)
    serial["ops"] = {name: fn() for name, fn in ops.items()}

    trainers = {kind: Trainer(kind, seed=1) for kind in ("gpt", "rwkv7")}   # built serially: global RNG
    results, errors = {}, []
    barrier = threading.Barrier(3)

    def train(kind):
        try:
            barrier.wait()
            t = trainers[kind]
            results[kind] = ([t.step(i) for i in range(steps)], t.params())
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def run_ops():
        try:
            barrier.wait()
            results["ops"] = {name: [fn() for _ in range(3)][-1] for name, fn in ops.items()}
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=train, args=(k,)) for k in ("gpt", "rwkv7")]
    threads.append(threading.Thread(target=run_ops))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for kind in ("gpt", "rwkv7"):
        assert results[kind][0] == serial[kind][0], kind
        for name, value in serial[kind][1].items():
            assert np.array_equal(results[kind][1][name], value), (kind, name)
    for name, arrays in serial["ops"].items():
        for i, (x, y) in enumerate(zip(arrays, results["ops"][name])):
            assert np.array_equal(x, y), (name, i)


def test_grad_mode_is_per_thread():
    entered, release = threading.Event(), threading.Event()

    def hold_no_grad():
        with mg.no_grad():
            entered.set()
            release.wait(5)

    t = threading.Thread(target=hold_no_grad)
    t.start()
    entered.wait(5)
    try:
        y = mg.ones(2, requires_grad=True) * 2
        assert y.requires_grad and y._node is not None
    finally:
        release.set()
        t.join()


def test_kernel_threads_overrides_and_restores():
    from minigrad import threads

    threads.set_num_threads(2)
    with threads.kernel_threads(1):
        threads.sync_thread()                     # what every op calls: must not undo the override
        assert _threads.get_threads() == 1
        with threads.kernel_threads(3):
            assert _threads.get_threads() == 3
        assert _threads.get_threads() == 1
        mg.tensor([1.0, 2.0]).exp()
        assert _threads.get_threads() == 1
    assert _threads.get_threads() == 2
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        with threads.kernel_threads(0):
            pass


def test_warns_when_imported_after_numpy_without_a_blas_timeout():
    """numpy's OpenBLAS reads OPENBLAS_THREAD_TIMEOUT when it loads: imported after numpy, minigrad
    can no longer set it, and says so (unless the user set a value, or numpy has another BLAS)."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")

    def stderr_of(code, **extra):
        return subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True,
                              text=True, timeout=120, check=True).stderr

    if "openblas" not in str(np.show_config(mode="dicts")["Build Dependencies"]["blas"]).lower():
        pytest.skip("numpy is not built with OpenBLAS")
    late = "import numpy; import minigrad"
    assert "imported after numpy" in stderr_of(late)
    assert "imported after numpy" not in stderr_of("import minigrad, numpy")
    assert "imported after numpy" not in stderr_of(late, OPENBLAS_THREAD_TIMEOUT="28")


def test_serial_blas_is_counted_across_threads():
    """Two overlapping serial_blas blocks (two threads' attention calls): BLAS stays at 1 thread
    until the last one leaves, then is back at the library setting, also one changed inside. The
    blocks are entered and left out of order from one thread: OpenBLAS applies a count set from
    another thread unevenly (0.3.31: one lowered by the main thread cannot be raised by another)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from minigrad.threads import serial_blas

    def blas():
        return {i["num_threads"] for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"}

    mg.set_num_threads(2)
    if blas() != {2}:
        pytest.skip(f"BLAS cannot use 2 threads here ({blas()})")
    first, second = serial_blas(), serial_blas()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert blas() == {1}                          # the second block is still running
    second.__exit__(None, None, None)
    assert blas() == {2}
    with serial_blas():
        mg.set_num_threads(1)
        assert blas() == {1}
        mg.set_num_threads(2)
        assert blas() == {1}                      # applied when the block ends
    assert blas() == {2}


def test_set_num_threads_inside_kernel_threads_keeps_the_block_size():
    from minigrad import threads

    threads.set_num_threads(2)
    with threads.kernel_threads(1):
        threads.set_num_threads(3)
        mg.tensor([1.0, 2.0]).exp()
        assert _threads.get_threads() == 1
    assert _threads.get_threads() == 3 and mg.get_num_threads() == 3


def test_decode_blas_is_serial_for_cached_weights_and_threaded_beyond_the_cache():
    """Decoding through weights that fit the last-level cache runs BLAS on one thread; through
    more than the cache holds (streamed from DRAM every token) on all of them."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from minigrad.threads import decode_blas, last_level_cache_bytes

    def blas():
        return {i["num_threads"] for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"}

    llc = last_level_cache_bytes()
    assert isinstance(llc, int) and llc >= 1 << 16
    mg.set_num_threads(2)
    if blas() != {2}:
        pytest.skip(f"BLAS cannot use 2 threads here ({blas()})")
    with decode_blas(llc // 2):
        assert blas() == {1}
    assert blas() == {2}
    with decode_blas(2 * llc):
        assert blas() == {2}
