"""Activation modules: thin wrappers over the Tensor methods, for use in Sequential.

They take torch's constructor arguments: `GELU(approximate='none' | 'tanh')`, `ReLU(inplace=False)`,
`SiLU(inplace=False)`. minigrad has no in-place activations, so `inplace=True` raises (rather than
silently leaving the input unchanged where torch would overwrite it).
"""
from minigrad.nn.module import Module


def _check_inplace(name, inplace):
    if inplace:
        raise ValueError(f"{name}: inplace=True is not supported (minigrad activations return a new "
                         "Tensor); use inplace=False")


class _Activation(Module):
    method = None

    def forward(self, x):
        return getattr(x, self.method)()


class _InplaceActivation(_Activation):
    def __init__(self, inplace=False):
        super().__init__()
        _check_inplace(type(self).__name__, inplace)
        self.inplace = False


class ReLU(_InplaceActivation):
    method = "relu"


class GELU(_Activation):
    """GELU; approximate='none' (default, as torch) is the exact erf form, 'tanh' the tanh one."""

    method = "gelu"

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return x.gelu(approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(_InplaceActivation):
    method = "silu"


class Tanh(_Activation):
    method = "tanh"


class Sigmoid(_Activation):
    method = "sigmoid"
