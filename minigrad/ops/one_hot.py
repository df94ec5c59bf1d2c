"""F.one_hot: integer class indices -> an int64 one-hot encoding (no gradient)."""
import numpy as np

from minigrad.kernels.validate import check_int
from minigrad.ops._common import wrap
from minigrad.tensor import Tensor


def one_hot(tensor, num_classes=-1):
    """(*) int indices -> (*, num_classes) int64 with a 1 at each index. num_classes=-1 means
    max + 1 (an empty input then raises, as torch, also with num_classes=0). Indices < 0 or
    >= num_classes raise.

    Any integer dtype is taken (torch takes int64 only); float and bool inputs raise.
    """
    op = "one_hot"
    t = np.asarray(tensor.data if isinstance(tensor, Tensor) else tensor)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: tensor must hold integer class indices, got {t.dtype}")
    num_classes = check_int(op, "num_classes", num_classes, low=-1)
    if t.size and t.min() < 0:
        raise ValueError(f"{op}: class values must be non-negative, got {int(t.min())}")
    if not t.size and num_classes <= 0:
        raise ValueError(f"{op}: cannot infer the number of classes from an empty tensor; pass "
                         "num_classes >= 1")
    if num_classes == -1:
        num_classes = int(t.max()) + 1
    elif t.size and t.max() >= num_classes:
        raise ValueError(f"{op}: class values must be smaller than num_classes={num_classes}, got "
                         f"{int(t.max())}")
    out = np.zeros(t.shape + (num_classes,), np.int64)
    np.put_along_axis(out, t.astype(np.int64)[..., None], 1, axis=-1)
    return wrap(out)
