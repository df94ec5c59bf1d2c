"""Dropout: inverted dropout in training, identity in eval."""
from minigrad.nn.module import Module
from minigrad.ops.dropout import dropout


class Dropout(Module):
    """Training: y = x * mask / (1 - p), mask ~ Bernoulli(1 - p) per element; eval (or p == 0): y = x.

    Masks come from `generator` if given, else from minigrad's global generator (minigrad.manual_seed);
    the forward is F.dropout.
    """

    def __init__(self, p=0.5, generator=None, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        if generator is not None and not hasattr(generator, "random"):
            # torch's second positional argument is `inplace`: Dropout(0.1, False) lands here
            raise TypeError(f"Dropout: generator must be a numpy Generator or None, got {generator!r} "
                            "(torch's `inplace` is a keyword argument here)")
        if inplace:
            raise ValueError("Dropout: inplace=True is not supported (minigrad returns a new Tensor); "
                             "use inplace=False")
        self.p = float(p)
        self.generator = generator
        self.inplace = False

    def forward(self, x):
        return dropout(x, self.p, self.training, generator=self.generator)

    def extra_repr(self):
        return f"p={self.p}"
