"""detect_anomaly() names the op, and the line that called it, that first produced NaN/inf:
in forward (primitive and fused ops, inside a model) and in backward."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F

HERE = "test_anomaly.py"


def test_forward_nan_names_the_primitive_op_and_this_line():
    x = mg.tensor([1.0, -1.0], requires_grad=True)
    with mg.detect_anomaly(), np.errstate(invalid="ignore"):
        y = x * 2
        with pytest.raises(FloatingPointError, match=rf"Sqrt\w* produced NaN/inf .*{HERE}:\d+") as info:
            mg.sqrt(y - 1)     # the first op whose output has a NaN
    assert "already contained" not in str(info.value)


def test_forward_names_a_fused_kernel_op():
    logits = mg.randn(3, 5, requires_grad=True)
    with mg.detect_anomaly():   # every target ignored: the mean over 0 rows is NaN (as PyTorch)
        with pytest.raises(FloatingPointError, match=rf"CrossEntropy\w* produced NaN/inf.*{HERE}"):
            F.cross_entropy(logits, np.full(3, -100))


def test_the_first_op_to_overflow_is_the_one_named():
    x = mg.tensor(np.full((2, 4), 1e30, np.float32), requires_grad=True)
    with mg.detect_anomaly(), np.errstate(all="ignore"):
        with pytest.raises(FloatingPointError, match=r"^anomaly: Mul\w* produced NaN/inf"):
            F.rms_norm(x * 1e30, mg.ones(4))


def test_nan_that_came_from_outside_the_graph_says_so():
    w = mg.nn.Linear(3, 2)
    x = mg.tensor([[1.0, np.nan, 0.0]])
    with mg.detect_anomaly():
        with pytest.raises(FloatingPointError, match="input 0 already contained NaN/inf"):
            w(x)


def test_backward_nan_names_the_op_and_its_forward_call_site():
    x = mg.tensor([0.0, 4.0], requires_grad=True)
    with mg.detect_anomaly(), np.errstate(divide="ignore", invalid="ignore"):
        y = mg.sqrt(x)     # finite forward, infinite gradient at 0
        line = __import__("inspect").currentframe().f_lineno - 1
        with pytest.raises(FloatingPointError, match=rf"Sqrt\w*\.backward produced NaN/inf .*{HERE}:{line}"):
            y.sum().backward()


def test_model_forward_names_the_op_inside_the_model():
    from minigrad.models.gpt import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=16, d_model=8, n_layer=1, n_head=2, max_seq_len=8))
    model.layers[0].mlp.up_proj.weight.data[0, 0] = np.inf
    with mg.detect_anomaly(), np.errstate(all="ignore"):
        with pytest.raises(FloatingPointError, match=r"produced NaN/inf .*gpt\.py:\d+") as info:
            model(np.zeros((1, 4), np.int64))
    assert "already contained" in str(info.value)    # the inf came from a weight


def test_off_by_default_and_restored_after_the_block():
    from minigrad.autograd import anomaly

    assert not anomaly.is_enabled()
    with mg.detect_anomaly():
        assert anomaly.is_enabled()
    assert not anomaly.is_enabled()
    with np.errstate(invalid="ignore"):
        assert np.isnan(mg.sqrt(mg.tensor([-1.0])).data).all()   # no check outside the block
