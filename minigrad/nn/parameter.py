"""`Parameter`: a Tensor that a Module registers as trainable. It always starts requiring grad."""
from minigrad.tensor import Tensor


class Parameter(Tensor):
    """A float Tensor registered by `Module.__setattr__`; shares `data`'s array (no copy) when it can.

    `Parameter(t)` for a Tensor `t` wraps `t.data` as a new leaf. `requires_grad=False` (or
    `.requires_grad_(False)` later) freezes it.
    """

    __slots__ = ()

    def __init__(self, data, requires_grad=True, dtype=None):
        if isinstance(data, Tensor):
            data = data.data
        super().__init__(data, dtype=dtype)
        if self.data.dtype.kind != "f":
            raise TypeError(f"Parameter: only float tensors can be parameters, got dtype {self.data.dtype}")
        self.requires_grad = bool(requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
