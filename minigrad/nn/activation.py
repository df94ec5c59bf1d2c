"""Activation modules: thin wrappers over the Tensor methods, for use in Sequential."""
from minigrad.nn.module import Module


class _Activation(Module):
    method = None

    def forward(self, x):
        return getattr(x, self.method)()


class ReLU(_Activation):
    method = "relu"


class GELU(_Activation):
    method = "gelu"


class SiLU(_Activation):
    method = "silu"


class Tanh(_Activation):
    method = "tanh"


class Sigmoid(_Activation):
    method = "sigmoid"
