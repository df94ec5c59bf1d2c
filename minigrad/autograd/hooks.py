"""Tensor hooks (`Tensor.register_hook`, `register_post_accumulate_grad_hook`, `retain_grad`).

A leaf keeps its `TensorHooks` in `Tensor._hooks`; a non-leaf's live on its node
(`Node.hooks = {output_index: TensorHooks}`), so they fire even when the Tensor object is gone and
stay with the version they were registered on when the tensor is later modified in place (as in
PyTorch). The engine calls `run_hooks` on a grad that is complete: a non-leaf's when its node is
reached, a leaf's once the walk is over, before the commit into `.grad`.
"""
import contextlib
import itertools
import threading
import weakref

_ids = itertools.count()
# set once any leaf got a hook: until then backward() skips looking for leaf hooks
leaf_hooks_exist = False


_discard = threading.local()


@contextlib.contextmanager
def discarding():
    """Inside: a hook registered on a tensor that does not require grad is dropped instead of
    raising (activation checkpointing's no-grad forward; the recomputation registers it again on
    the tensor that does require grad, where it fires, as in torch's non-reentrant checkpoint)."""
    before = getattr(_discard, "on", False)
    _discard.on = True
    try:
        yield
    finally:
        _discard.on = before


def is_discarding():
    return getattr(_discard, "on", False)


class HookDict(dict):
    """{handle id: hook}, in registration order (a dict subclass, so handles can hold a weakref)."""

    __slots__ = ("__weakref__",)


class RemovableHandle:
    """What every `register_*hook` returns (tensor and module hooks), as
    torch.utils.hooks.RemovableHandle: `.remove()` takes the hook's id out of `hooks_dict` and of each
    `extra_dict` (flag dicts naming it; all weakly referenced); a second call is a no-op. A context
    manager too, removing it on exit."""

    def __init__(self, hooks_dict, *, extra_dict=()):
        self.id = next(_ids)
        extra = (extra_dict,) if isinstance(extra_dict, dict) else tuple(extra_dict)
        self._refs = tuple(weakref.ref(d) for d in (hooks_dict, *extra))

    def remove(self):
        for ref in self._refs:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class TensorHooks:
    """The hooks of one tensor: `pre` (grad -> None or a replacement), `post` (after accumulation,
    leaves) and `retain` (a weakref to the non-leaf whose .grad gets the grad after `pre`)."""

    __slots__ = ("pre", "post", "retain")

    def __init__(self):
        self.pre, self.post, self.retain = HookDict(), HookDict(), None


def add(hooks, hook):
    """Register `hook` in the HookDict `hooks`; returns its handle."""
    if not callable(hook):
        raise TypeError(f"hook must be callable, got {type(hook).__name__}")
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def run_hooks(hooks, grad, shape, dtype):
    """Pass the array `grad` (None: the tensor got no grad, as PyTorch passes None) through the
    hooks in registration order, each seeing the previous one's result; returns the array that
    flows on. A returned Tensor must keep the shape and dtype."""
    from minigrad.tensor import Tensor

    value = None if grad is None else Tensor._from_op(grad)
    for hook in tuple(hooks.values()):      # a hook may remove hooks: this walk still runs them
        out = hook(value)
        if out is None:
            continue
        name = getattr(hook, "__name__", type(hook).__name__)
        if not isinstance(out, Tensor):
            raise TypeError(f"expected Tensor, but hook {name!r} returned {type(out).__name__!r}")
        if out.data.shape != tuple(shape):
            raise RuntimeError(f"hook {name!r} has changed the size of value (was {tuple(shape)} got "
                               f"{out.data.shape})")
        if out.data.dtype != dtype:
            raise RuntimeError(f"hook {name!r} has changed the type of value (was {dtype} got "
                               f"{out.data.dtype})")
        value = out
    return None if value is None else value.data
