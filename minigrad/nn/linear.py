"""Linear and Identity."""
import math

import numpy as np

from minigrad.kernels.validate import check_int
from minigrad.nn import init
from minigrad.nn.module import Module
from minigrad.nn.parameter import Parameter
from minigrad.ops.linear import linear


class Linear(Module):
    """y = x @ weight.T + bias; weight (out_features, in_features), bias (out_features,).

    PyTorch's default init: weight ~ kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)),
    bias ~ U(-1/sqrt(in), 1/sqrt(in)).
    """

    def __init__(self, in_features, out_features, bias=True, dtype=np.float32, generator=None):
        super().__init__()
        self.in_features = check_int("Linear", "in_features", in_features, 0)
        self.out_features = check_int("Linear", "out_features", out_features, 0)
        self.weight = Parameter(np.empty((self.out_features, self.in_features), dtype=dtype))
        if bias:
            self.bias = Parameter(np.empty(self.out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters(generator)

    def reset_parameters(self, generator=None):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), generator=generator)
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound, generator)

    def forward(self, x):
        return linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Identity(Module):
    """Returns its input unchanged."""

    def forward(self, x):
        return x
