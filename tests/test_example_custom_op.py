"""The documented custom-op example (examples/custom_op.py) compiles, is correct and trains."""
import importlib.util
import os
import shutil

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck

pytest.importorskip("Cython")
if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
    pytest.skip("no C compiler", allow_module_level=True)

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "custom_op.py")


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("custom_op_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)       # compiles the kernel on first use (cached in examples/build)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (2, 3, 7)])
def test_swish_kernel_gradcheck_and_reference(example, shape):
    rng = np.random.default_rng(0)
    x = mg.tensor(rng.standard_normal(shape), dtype=mg.float64, requires_grad=True)
    beta = mg.tensor(rng.uniform(0.5, 2.0, shape[-1]), dtype=mg.float64, requires_grad=True)
    assert gradcheck(example.swish, [x, beta])
    assert max(gradcheck.last_errors) < 1e-6
    np.testing.assert_allclose(example.swish(x, beta).data, (x * (x * beta).sigmoid()).data, rtol=1e-13)
    y32 = example.swish(x.detach().to(mg.float32), beta.detach().to(mg.float32))
    np.testing.assert_allclose(y32.data, example.swish(x, beta).data, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_swish_validates_before_the_kernel(example):
    with pytest.raises(ValueError, match=r"swish: beta has shape \(5,\), expected \(4,\)"):
        example.swish(mg.randn(3, 4), mg.ones(5))
    with pytest.raises(TypeError, match="mix float32 and float64"):
        example.swish(mg.randn(3, 4), mg.ones(4, dtype=mg.float64))


@pytest.mark.slow
def test_example_trains(example, capsys):
    assert example.main() < 0.02
    assert "gradcheck swish" in capsys.readouterr().out
