"""`Parameter`: a Tensor that a Module registers as trainable. It always starts requiring grad."""
from minigrad.tensor import Tensor


class Parameter(Tensor):
    """A float Tensor registered by `Module.__setattr__`; shares `data`'s array (no copy) when it can.

    `Parameter(t)` for a Tensor `t` wraps `t.data` as a new leaf. Freeze one with `.requires_grad_(False)`.
    """

    __slots__ = ()

    def __init__(self, data, dtype=None):
        if isinstance(data, Tensor):
            data = data.data
        super().__init__(data, dtype=dtype)
        if self.data.dtype.kind != "f":
            raise TypeError(f"Parameter: only float tensors can be parameters, got dtype {self.data.dtype}")
        self.requires_grad = True

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
