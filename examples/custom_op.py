"""Adding your own op with a Cython kernel, end to end (see docs/adding_an_op.md).

    python examples/custom_op.py

1. compiles examples/custom_op_kernel.pyx at run time (cached in examples/build/; OpenMP when the
   compiler has it, serial otherwise),
2. wraps its forward/backward in a `Function` that validates every array first,
3. gradchecks it in float64 and compares it with the same maths composed from built-in ops,
4. trains a tiny MLP that uses it, learning the op's per-channel slope `beta` along the way.
"""
import importlib  # noqa: I001 (minigrad is imported before numpy on purpose)
import importlib.util
import os
import sys
import time

import minigrad as mg  # before numpy: it sets OPENBLAS_THREAD_TIMEOUT, read when OpenBLAS loads
import numpy as np
from minigrad import nn, optim
from minigrad.autograd import Function, gradcheck
from minigrad.kernels.validate import check_float

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.path.join(HERE, "build")


# ---- 1. build the kernel ---------------------------------------------------------------------------
def build_kernel(name="custom_op_kernel"):
    """Compile examples/<name>.pyx into BUILD_DIR (once; rebuilt when the .pyx changes) and import it."""
    try:
        from Cython.Build import cythonize
    except ImportError:
        sys.exit("This example compiles a Cython kernel: it needs Cython >= 3 and a C compiler\n"
                 "(pip install 'cython>=3'; on Debian/Ubuntu apt install build-essential).\n"
                 "minigrad itself is already built; only this example needs them at run time.")
    from setuptools import Distribution, Extension

    pyx = os.path.join(HERE, f"{name}.pyx")
    os.makedirs(BUILD_DIR, exist_ok=True)
    sys.path.insert(0, BUILD_DIR)
    stamp = os.path.join(BUILD_DIR, f"{name}.stamp")
    fresh = (os.path.exists(stamp) and os.path.getmtime(stamp) >= os.path.getmtime(pyx)
             and importlib.util.find_spec(name) is not None)
    if not fresh:
        errors = []
        for flags in (["-O3", "-fopenmp"], ["-O3"]):   # OpenMP when available, else a serial build
            ext = Extension(name, [pyx], include_dirs=[np.get_include()], extra_compile_args=flags,
                            extra_link_args=[f for f in flags if f == "-fopenmp"],
                            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])
            dist = Distribution({"ext_modules": cythonize([ext], build_dir=BUILD_DIR, quiet=True)})
            cmd = dist.get_command_obj("build_ext")
            cmd.build_lib, cmd.build_temp = BUILD_DIR, os.path.join(BUILD_DIR, "tmp")
            try:
                dist.run_command("build_ext")
            except Exception as e:  # noqa: BLE001 - compiler errors come in several types
                errors.append(f"{' '.join(flags)}: {e}")
                continue
            if "-fopenmp" not in flags:
                print("note: built without OpenMP (the compiler lacks it): the kernel runs serially")
            open(stamp, "w").close()
            break
        else:
            sys.exit("could not compile the example kernel:\n  " + "\n  ".join(errors))
    return importlib.import_module(name)


# ---- 2. wrap it in a Function -------------------------------------------------------------------
class Swish(Function):
    """y = x * sigmoid(beta * x); x (..., C), beta (C,). Backward: see custom_op_kernel.pyx."""

    @staticmethod
    def forward(ctx, x, beta):
        op = "swish"
        check_float(op, "x", x)
        if x.ndim < 1:
            raise ValueError("swish: x must have at least 1 dim (..., C)")
        check_float(op, "beta", beta, shape=(x.shape[-1],), dtype=x.dtype)
        x2 = x.reshape(-1, x.shape[-1])           # the kernel works on rows: (N, C)
        y = np.empty_like(x2)
        kernel.swish_forward(x2, beta, y)
        ctx.save_for_backward(x, beta)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, gy):
        x, beta = ctx.saved_tensors
        x2 = x.reshape(-1, x.shape[-1])
        gx, gbeta = np.empty_like(x2), np.empty_like(x2)
        kernel.swish_backward(np.ascontiguousarray(gy).reshape(x2.shape), x2, beta, gx, gbeta)
        # gbeta is per element, (N, C): the engine sums it back to beta's shape (C,).
        return gx.reshape(x.shape), (gbeta if ctx.needs_input_grad[1] else None)


def swish(x, beta):
    return Swish.apply(x, beta)


class SwishMLP(nn.Module):
    """Linear -> Swish(learnable beta per hidden unit) -> Linear."""

    def __init__(self, d_in, hidden, d_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.beta = nn.Parameter(np.ones(hidden, dtype=np.float32))
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(swish(self.fc1(x), self.beta))


def main():
    t0 = time.perf_counter()
    mg.manual_seed(0)
    rng = np.random.default_rng(0)

    # ---- 3. check it -------------------------------------------------------------------------
    for shape in [(4, 3), (1, 5), (2, 3, 7)]:
        x = mg.tensor(rng.standard_normal(shape), dtype=mg.float64, requires_grad=True)
        beta = mg.tensor(rng.uniform(0.5, 2.0, shape[-1]), dtype=mg.float64, requires_grad=True)
        gradcheck(swish, [x, beta])
        composed = x * (x * beta).sigmoid()        # the same maths from built-in ops
        np.testing.assert_allclose(swish(x, beta).data, composed.data, rtol=1e-13, atol=1e-15)
        errors = ", ".join(f"{e:.1e}" for e in gradcheck.last_errors)
        print(f"gradcheck swish {shape}: ok (max|g - fd| / max|fd| per input: {errors})")
    try:
        swish(mg.randn(3, 4), mg.ones(5))
    except ValueError as e:
        print(f"bad shapes are caught before the kernel runs: {e}")

    # ---- 4. use it ---------------------------------------------------------------------------
    x = mg.tensor(rng.uniform(-2, 2, (256, 2)), dtype=mg.float32)
    y = mg.tensor(np.sin(2 * x.data[:, :1]) * x.data[:, 1:], dtype=mg.float32)
    model = SwishMLP(2, 32, 1)
    opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    for step in range(301):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"step {step:3d}  mse {loss.item():.4f}")
    print(f"learned beta: mean {model.beta.data.mean():.3f}, range [{model.beta.data.min():.3f}, "
          f"{model.beta.data.max():.3f}]  ({time.perf_counter() - t0:.1f} s in all)")
    return loss.item()


if __name__ == "__main__":   # no options: --help prints the docstring above before anything compiles
    import argparse
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()

kernel = build_kernel()

if __name__ == "__main__":
    main()
