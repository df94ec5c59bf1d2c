"""minigrad.blas: the GEMM behind Linear and RWKV-7's projections (MKL when installed and chosen,
else numpy) gives numpy's products for every layout, and falls back to numpy for what it does not
hand to MKL."""
import os
import subprocess
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad import blas


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-4), (np.float64, 1e-12)])
@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("M, K, N", [(1, 1, 1), (7, 5, 3), (64, 130, 33), (1, 300, 1000), (8, 384, 129)])
def test_gemm_equals_numpy(dtype, tol, trans_a, trans_b, M, K, N):
    rng = np.random.default_rng(M * K + N)
    a = rng.standard_normal((K, M) if trans_a else (M, K)).astype(dtype)
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype(dtype)
    want = (a.T if trans_a else a) @ (b.T if trans_b else b)
    got = blas.gemm(a, b, trans_a=trans_a, trans_b=trans_b)
    assert got.shape == (M, N) and got.dtype == dtype and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * K)
    out = np.full((M, N), np.nan, dtype)
    assert blas.gemm(a, b, trans_a=trans_a, trans_b=trans_b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol * K)


def test_gemm_falls_back_to_numpy_and_checks_shapes():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 8)).astype(np.float32)
    b = rng.standard_normal((4, 6)).astype(np.float32)
    np.testing.assert_allclose(blas.gemm(a[:, ::2], b[:, :4], trans_b=True), a[:, ::2] @ b[:, :4].T,
                               rtol=1e-5)                       # strided operands
    assert blas.gemm(np.zeros((0, 3), np.float32), np.ones((3, 2), np.float32)).shape == (0, 2)
    assert blas.gemm(np.zeros((2, 0)), np.ones((0, 3))).tolist() == [[0.0] * 3] * 2
    ints = blas.gemm(np.arange(6).reshape(2, 3), np.arange(3).reshape(3, 1))
    assert ints.tolist() == [[5], [14]]
    mixed = blas.gemm(a, b.astype(np.float64), trans_a=True, trans_b=True)
    assert mixed.dtype == np.float64
    with pytest.raises(ValueError, match="do not multiply"):
        blas.gemm(a, b)
    with pytest.raises(ValueError, match="out must be"):
        blas.gemm(a, b, trans_a=True, trans_b=True, out=np.empty((8, 5), np.float32))
    with pytest.raises(ValueError, match="out must be"):
        blas.gemm(a.T.copy(), b.T.copy(), out=np.empty((4, 8), np.float32).T)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_into_an_operand(dtype):
    """out= one of the operands (or a view overlapping it) gives the product, as np.matmul: MKL
    would overwrite b while still reading it."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 64)).astype(dtype)
    b = rng.standard_normal((64, 64)).astype(dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    for trans_b, target in ((False, "a"), (False, "b"), (True, "a"), (True, "b")):
        x, y = a.copy(), b.copy()
        want = x @ (y.T if trans_b else y)
        out = x if target == "a" else y
        assert blas.gemm(x, y, trans_b=trans_b, out=out) is out
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol * 64)
    buf = rng.standard_normal((65, 64)).astype(dtype)
    want = a @ buf[1:]
    np.testing.assert_allclose(blas.gemm(a, buf[1:], out=buf[:64]), want, rtol=tol, atol=tol * 64)


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-4), (np.float64, 1e-12)])
def test_gemm_batch_equals_numpy(dtype, tol):
    """Products of different shapes and layouts, some into given outs, one accumulating."""
    rng = np.random.default_rng(2)
    spec = [(5, 7, 3, False, False), (64, 130, 33, True, False), (2, 9, 11, False, True),
            (33, 1, 8, True, True), (64, 130, 33, True, False)]
    products, wants = [], []
    for i, (M, K, N, ta, tb) in enumerate(spec):
        a = rng.standard_normal((K, M) if ta else (M, K)).astype(dtype)
        b = rng.standard_normal((N, K) if tb else (K, N)).astype(dtype)
        want = (a.T if ta else a) @ (b.T if tb else b)
        if i == 1:      # into an out
            products.append((a, b, ta, tb, np.full((M, N), np.nan, dtype)))
        elif i == 4:    # added into an out
            base = rng.standard_normal((M, N)).astype(dtype)
            products.append((a, b, ta, tb, base.copy(), True))
            want = want + base
        else:
            products.append((a, b, ta, tb))
        wants.append(want)
    got = blas.gemm_batch(products)
    assert got[1] is products[1][4] and got[4] is products[4][4]
    for g, want in zip(got, wants):
        assert g.dtype == dtype and g.flags.c_contiguous
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol * 130)
    assert blas.gemm_batch([]) == []


def test_gemm_batch_falls_back_and_checks():
    """Anything MKL is not handed (strided, mixed dtypes, empty) and outs overlapping another
    array of the batch give numpy's products, in order; bad shapes and a missing out raise."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 8)).astype(np.float32)
    b = rng.standard_normal((8, 4)).astype(np.float32)
    strided = blas.gemm_batch([(a, b), (a[:, ::2], b[::2])])
    np.testing.assert_allclose(strided[0], a @ b, rtol=1e-5)
    np.testing.assert_allclose(strided[1], a[:, ::2] @ b[::2], rtol=1e-5)
    mixed = blas.gemm_batch([(a, b), (a.astype(np.float64), b)])
    assert [m.dtype for m in mixed] == [np.float32, np.float64]
    assert blas.gemm_batch([(a, b), (np.zeros((0, 8), np.float32), b)])[1].shape == (0, 4)
    # the second product writes where the first one reads: in order, as numpy would
    x = rng.standard_normal((8, 8)).astype(np.float32)
    y = rng.standard_normal((8, 8)).astype(np.float32)
    x0 = x.copy()
    first = np.empty((8, 8), np.float32)
    blas.gemm_batch([(x, y, False, False, first), (y, y, False, False, x)])
    np.testing.assert_allclose(first, x0 @ y, rtol=1e-5)
    np.testing.assert_allclose(x, y @ y, rtol=1e-5)
    with pytest.raises(ValueError, match="do not multiply"):
        blas.gemm_batch([(a, b), (b, b)])
    with pytest.raises(ValueError, match="accumulate=True needs out"):
        blas.gemm_batch([(a, b, False, False, None, True)])


def _backend_in_subprocess(value):
    env = dict(os.environ, MINIGRAD_BLAS=value)
    return subprocess.run([sys.executable, "-c", "from minigrad import blas; print(blas.backend())"],
                          env=env, capture_output=True, text=True)


def test_backend_choice_from_the_environment():
    assert _backend_in_subprocess("numpy").stdout.strip() == "numpy"
    forced = _backend_in_subprocess("mkl").stdout.strip()
    assert forced == ("mkl" if blas._mkl_path() else "numpy")
    bad = _backend_in_subprocess("atlas")
    assert bad.returncode != 0 and "MINIGRAD_BLAS must be" in bad.stderr
    assert blas.backend() in ("mkl", "numpy") and mg.build_info()["gemm"] == blas.backend()


@pytest.mark.skipif(blas.backend() != "mkl", reason="MKL is not what minigrad.blas uses here")
def test_mkl_follows_set_num_threads():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = mg.get_num_threads()

    def mkl_threads():
        return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["internal_api"] == "mkl"]

    try:
        mg.set_num_threads(1)
        assert mkl_threads() == [1]
        from minigrad.threads import serial_blas
        mg.set_num_threads(2)
        with serial_blas():
            assert mkl_threads() == [1]
        assert mkl_threads() == [2]
    finally:
        mg.set_num_threads(before)


@pytest.mark.skipif(blas.backend() != "mkl", reason="both runs would use numpy: nothing to compare")
def test_linear_and_rwkv_layers_agree_across_backends():
    """The same Linear / RWKV-7 step in a process with MINIGRAD_BLAS=numpy gives this process's
    numbers (fp64: to rounding)."""
    code = ("import numpy as np, minigrad as mg\n"
            "from minigrad.models import RWKV7, RWKV7Config\n"
            "cfg = RWKV7Config(vocab_size=13, d_model=16, n_layer=2, head_size=8)\n"
            "m = RWKV7(cfg, dtype=np.float64, seed=1)\n"
            "ids = np.arange(10).reshape(2, 5) % 13\n"
            "out = m(ids); (out * out).sum().backward()\n"
            "grad = m.blocks[1].att.key.weight.grad.sum().item()\n"
            "print(repr(float(out.sum().item())), repr(float(grad)))\n")
    results = []
    for value in ("numpy", "auto"):
        env = dict(os.environ, MINIGRAD_BLAS=value)
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True)
        results.append([float(v) for v in run.stdout.split()])
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


@pytest.mark.skipif(blas.backend() != "mkl", reason="routing between numpy and MKL needs MKL in use")
def test_one_row_and_tiny_products_go_to_numpy_larger_few_row_ones_to_mkl(monkeypatch):
    """One row (a decode step's gemv) and products under SMALL_WORK multiply-adds stay with numpy;
    2-16 rows of a real layer (batched decoding) go to MKL, which does not pack the whole weight."""
    seen = []
    numpy_product = blas._numpy_product
    monkeypatch.setattr(blas, "_numpy_product",
                        lambda *args: seen.append(args[0].shape) or numpy_product(*args))
    rng = np.random.default_rng(0)
    w = rng.standard_normal((1152, 384)).astype(np.float32)
    for rows, to_numpy in ((1, True), (2, False), (8, False), (16, False)):
        seen.clear()
        x = rng.standard_normal((rows, 384)).astype(np.float32)
        np.testing.assert_allclose(blas.gemm(x, w, trans_b=True), x @ w.T, rtol=1e-4, atol=1e-3)
        assert (seen == [(rows, 384)]) == to_numpy, (rows, seen)
    seen.clear()
    blas.gemm(np.ones((4, 16), np.float32), np.ones((16, 16), np.float32))
    assert seen == [(4, 16)]
