"""Python-level ops: one family a file, each op a `Function` with forward and backward.

Importing this package attaches the PyTorch-like methods and operators to `Tensor`.
"""
from minigrad.ops import cast, tensor_methods  # noqa: F401
