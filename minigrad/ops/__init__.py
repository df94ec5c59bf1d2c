"""Python-level ops: one family a file, each op a `Function` with forward and backward.

Importing this package attaches the PyTorch-like methods and operators to `Tensor`.
"""
import importlib.util as _ilu

from minigrad.ops import cast  # noqa: F401

if _ilu.find_spec("minigrad.ops.tensor_methods") is not None:
    from minigrad.ops import tensor_methods  # noqa: F401
