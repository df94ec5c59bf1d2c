"""Per-op wall time of forward and backward, as `torch.profiler` (docs/profiling.md).

    with minigrad.profiler.profile(record_shapes=True) as prof:
        with minigrad.profiler.record_function("step"):
            loss = model(x).sum()
            loss.backward()
    print(prof.table(sort_by="self", row_limit=10))
    prof.export_chrome_trace("trace.json")          # chrome://tracing or ui.perfetto.dev

`Function.apply` and the engine import only `_hook` (stdlib only); the rest loads on first use.
"""
import importlib

_EXPORTS = {"profile": "_profile", "record_function": "_profile", "Event": "_profile",
            "OpStats": "_report", "KeyAverages": "_report"}

__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
