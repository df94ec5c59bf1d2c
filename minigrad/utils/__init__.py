"""Utilities with PyTorch's names: `minigrad.utils.data` (datasets, samplers, DataLoader) and
`minigrad.utils.checkpoint` (activation checkpointing). Both load on first use, so
`mg.utils.data.DataLoader` works after a bare `import minigrad as mg`, as `torch.utils.data` does."""
import importlib

_SUBMODULES = ("data", "checkpoint")


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
