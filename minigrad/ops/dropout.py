"""Inverted dropout (F.dropout, and nn.Dropout's forward)."""
from minigrad import random as _random
from minigrad.kernels.validate import check_bool, check_number
from minigrad.ops.activations import float_input
from minigrad.tensor import Tensor


def dropout(input, p=0.5, training=True, inplace=False, *, generator=None):
    """Training: y = x * mask / (1 - p), mask ~ Bernoulli(1 - p) per element (p = 1: zeros); eval
    (training=False) or p == 0: `input` itself.

    The mask is drawn from `generator` (a numpy Generator; minigrad's extension of torch's
    signature, which nn.Dropout uses) or else minigrad's global generator (minigrad.manual_seed).
    """
    op = "dropout"
    p = check_number(op, "p", p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: p must be in [0, 1], got {p}")
    training = check_bool(op, "training", training)
    if inplace:
        raise ValueError(f"{op}: inplace=True is not supported (minigrad returns a new Tensor); use "
                         "inplace=False")
    x = float_input(op, "input", input)
    if not training or p == 0.0:
        return x
    if generator is not None and not hasattr(generator, "random"):
        raise TypeError(f"{op}: generator must be a numpy Generator or None, got {generator!r}")
    gen = generator if generator is not None else _random.default_generator()
    keep = gen.random(x.shape) >= p
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return x * Tensor(keep.astype(x.dtype) * x.dtype.type(scale))
