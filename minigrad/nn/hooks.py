"""Module hooks, as torch's (torch/nn/modules/module.py `_call_impl`, torch/utils/hooks.py).

A Module keeps its hooks in ordered dicts keyed by handle id, under torch's names
(`_forward_pre_hooks`, `_forward_hooks`, `_backward_pre_hooks`, `_backward_hooks`, plus the
`_with_kwargs` / `_always_called` flag dicts), and every id also in `_hook_ids`: `Module.__call__`
tests that one dict (and `_global_hook_ids`) and calls `forward` directly when both are empty.
Register hooks through the `register_*` methods: a hook put into a dict by hand may not run.

Full backward hooks work as torch's `BackwardHook`: the module's Tensor inputs that require grad
and its Tensor outputs pass through identity Functions whose backward sees the gradients. The
outputs' node runs first (it stores grad_output, after the backward pre-hooks may replace it); the
inputs' node then calls the hooks with grad_input and returns what they return, so a replaced
grad_input is what flows on to the inputs (the module's own parameter grads were computed before,
from grad_output, and are not affected). No engine support is needed.
"""
import warnings
import weakref
from collections import OrderedDict

import numpy as np

from minigrad.autograd.function import Function
from minigrad.autograd.grad_mode import is_grad_enabled
from minigrad.autograd.hooks import RemovableHandle
from minigrad.tensor import Tensor

# set once any module hook was registered: until then Module.has_hooks() looks at no module
_state = {"hooks_seen": False}


def add_hook(hooks, hook, ids, *, prepend=False, flags=()):
    """Put `hook` into the ordered dict `hooks` (first when prepend, else last), its id into `ids`
    (the owner's dict of every hook id) and into each flag dict of `flags`; return its handle."""
    _state["hooks_seen"] = True
    handle = RemovableHandle(hooks, extra_dict=(ids, *flags))
    hooks[handle.id] = hook
    for d in (ids, *flags):
        d[handle.id] = True
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


# ---- global hooks (torch.nn.modules.module.register_module_*): run before every module's own ----
_global_hook_ids = OrderedDict()
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_with_kwargs = OrderedDict()
_global_forward_hooks_always_called = OrderedDict()
_global_backward_pre_hooks = OrderedDict()
_global_backward_hooks = OrderedDict()


def register_module_forward_pre_hook(hook):
    """A forward pre-hook (see Module.register_forward_pre_hook) of every module, run first."""
    return add_hook(_global_forward_pre_hooks, hook, _global_hook_ids)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """A forward hook (see Module.register_forward_hook) of every module, run first."""
    flags = [d for d, on in ((_global_forward_hooks_with_kwargs, with_kwargs),
                             (_global_forward_hooks_always_called, always_call)) if on]
    return add_hook(_global_forward_hooks, hook, _global_hook_ids, flags=flags)


def register_module_full_backward_pre_hook(hook):
    """A backward pre-hook (see Module.register_full_backward_pre_hook) of every module, run first."""
    return add_hook(_global_backward_pre_hooks, hook, _global_hook_ids)


def register_module_full_backward_hook(hook):
    """A full backward hook (see Module.register_full_backward_hook) of every module, run first."""
    return add_hook(_global_backward_hooks, hook, _global_hook_ids)


# ---- the call ----------------------------------------------------------------------------------
def call_with_hooks(module, args, kwargs):
    """`module(*args, **kwargs)` with its hooks: forward pre-hooks, forward, forward hooks, in
    registration order (global ones first). A forward hook registered with always_call also runs
    when forward or a hook raised (its own error is then only a warning) and the error propagates."""
    result = None
    called = set()                  # always_call hooks that already ran
    try:
        for hook_id, hook in (*_global_forward_pre_hooks.items(), *module._forward_pre_hooks.items()):
            if hook_id in module._forward_pre_hooks_with_kwargs:
                new = hook(module, args, kwargs)
                if new is not None:
                    if not (isinstance(new, tuple) and len(new) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {new}.")
                    args, kwargs = new
            else:
                new = hook(module, args)
                if new is not None:
                    args = new if isinstance(new, tuple) else (new,)
        backward_hook = BackwardHook.for_module(module)
        if backward_hook is not None:
            args = backward_hook.setup_input(args)
        result = module.forward(*args, **kwargs)
        for hook_id, hook in _forward_hooks(module):
            if _always_called(module, hook_id):
                called.add(hook_id)
            new = _run_forward_hook(module, hook_id, hook, args, kwargs, result)
            if new is not None:
                result = new
        if backward_hook is not None:
            result = backward_hook.setup_output(result)
        return result
    except Exception:
        for hook_id, hook in _forward_hooks(module):
            if _always_called(module, hook_id) and hook_id not in called:
                try:
                    new = _run_forward_hook(module, hook_id, hook, args, kwargs, result)
                    if new is not None:
                        result = new
                except Exception as e:  # noqa: BLE001 - forward's error is the one to raise
                    warnings.warn("module forward hook with ``always_call=True`` raised an exception that "
                                  f"was silenced as another error was raised in forward: {e}", stacklevel=2)
        raise


def _forward_hooks(module):
    return (*_global_forward_hooks.items(), *module._forward_hooks.items())


def _always_called(module, hook_id):
    return hook_id in module._forward_hooks_always_called or hook_id in _global_forward_hooks_always_called


def _run_forward_hook(module, hook_id, hook, args, kwargs, result):
    if hook_id in module._forward_hooks_with_kwargs or hook_id in _global_forward_hooks_with_kwargs:
        return hook(module, args, kwargs, result)
    return hook(module, args, result)


# ---- full backward hooks -----------------------------------------------------------------------
# ctx -> (the call's BackwardHook, index): kept beside ctx, whose attributes backward frees, so a
# later backward through the same call still reaches the hooks (as torch's, on the graph's nodes)
_calls = weakref.WeakKeyDictionary()


class _HookIdentity(Function):
    """Identity on some Tensors of one module call, whose BackwardHook `_calls[ctx]` names. The
    outputs are views: they share the inputs' version counters (an in-place change raises, as torch)."""

    @staticmethod
    def forward(ctx, *arrays, hook, index=None):
        _calls[ctx] = (hook, index)
        return tuple(a.view() for a in arrays)


class _HookInputs(_HookIdentity):
    """On the inputs that require grad: backward calls the full backward hooks."""

    @staticmethod
    def backward(ctx, *grads):
        return _calls[ctx][0].input_grads(grads)


class _HookOutputs(_HookIdentity):
    """On the outputs that require grad: backward runs the backward pre-hooks."""

    @staticmethod
    def backward(ctx, *grads):
        return _calls[ctx][0].output_grads(grads)


class _MarkOutput(_HookIdentity):
    """On one of several outputs (after _HookOutputs), noting that it got a gradient: the engine
    gives _HookOutputs zeros for an output that got none, where torch's hooks see None."""

    @staticmethod
    def backward(ctx, grad):
        hook, index = _calls[ctx]
        hook.reached.add(index)
        return grad


class BackwardHook:
    """The full backward (pre-)hooks of one module call and the gradients between its two nodes."""

    def __init__(self, module, hooks, pre_hooks):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.n_inputs = self.n_outputs = 0
        self.input_index = None           # positions of the inputs that require grad; None: none
        self.other_inputs = {}            # position -> (shape, dtype) of the other Tensor inputs
        self.output_index = None          # positions of the outputs that require grad
        self.reached = set()              # indices into output_index that got a gradient
        self.grad_output = None           # set by the outputs' node, used by the inputs' node

    @classmethod
    def for_module(cls, module):
        """A BackwardHook with the hooks registered now (global ones first), or None if none is."""
        hooks = [*_global_backward_hooks.values(), *module._backward_hooks.values()]
        pre_hooks = [*_global_backward_pre_hooks.values(), *module._backward_pre_hooks.values()]
        return cls(module, hooks, pre_hooks) if hooks or pre_hooks else None

    def setup_input(self, args):
        """args with each Tensor that requires grad passed through the inputs' node."""
        self.n_inputs = len(args)
        index = _requiring_grad(args)
        if not index:
            return args
        if len({args[i].dtype for i in index}) > 1:
            raise TypeError(f"{type(self.module).__name__}: full backward hooks need the inputs that "
                            "require grad to share one dtype (float32 or float64)")
        self.input_index = index
        self.other_inputs = {i: (a.data.shape, a.data.dtype) for i, a in enumerate(args)
                             if isinstance(a, Tensor) and i not in index}
        return _replace(args, index, _HookInputs.apply(*(args[i] for i in index), hook=self))

    def setup_output(self, result):
        """result (a Tensor or a tuple) with each Tensor that requires grad passed through the
        outputs' node (and, when there are several, each through a marker)."""
        if not isinstance(result, (Tensor, tuple)):
            warnings.warn("For backward hooks to be called, module output should be a Tensor or a "
                          f"tuple of Tensors but received {type(result)}", stacklevel=3)
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        self.n_outputs = len(outputs)
        index = _requiring_grad(outputs)
        if not index:
            return result
        self.output_index = index
        new = _HookOutputs.apply(*(outputs[i] for i in index), hook=self)
        if len(index) > 1:
            new = tuple(_MarkOutput.apply(t, hook=self, index=k)[0] for k, t in enumerate(new))
        outputs = _replace(outputs, index, new)
        return outputs[0] if single else outputs

    def output_grads(self, grads):
        """The outputs' node: grad_output through the pre-hooks; the grads to pass on."""
        reached, self.reached = self.reached, set()
        marked = len(grads) > 1             # else the one output got this gradient
        grad_output = [None] * self.n_outputs
        for k, (i, g) in enumerate(zip(self.output_index, grads)):
            if not marked or k in reached:
                grad_output[i] = Tensor._from_op(g)
        grad_output = tuple(grad_output)
        for hook in self.pre_hooks:
            new = hook(self.module, grad_output)
            if new is not None:
                grad_output = _checked(new, len(grad_output), "backward pre-hook", "grad_output")
        self.grad_output = grad_output
        if self.input_index is None and self.hooks:
            self._call_without_input_grads()
        return tuple(_grad_array(grad_output[i], g.shape, "grad_output", i)
                     for i, g in zip(self.output_index, grads))

    def _call_without_input_grads(self):
        """No input requires grad: the hooks run now, with grad_input all None (as torch)."""
        warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                      "outputs since no inputs require gradients.", stacklevel=2)
        grad_input = (None,) * self.n_inputs
        for hook in self.hooks:
            res = hook(self.module, grad_input, self.grad_output)
            if res is not None and not all(r is None for r in res):
                raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                   "always return None or None for all gradients.")
        self.grad_output = None

    def input_grads(self, grads):
        """The inputs' node: grad_input through the full backward hooks; the grads to pass on."""
        if self.grad_output is None:
            # the grads reached the inputs without passing through the outputs (forward kept an
            # input for later use): torch calls no hook then
            return grads
        grad_input = [None] * self.n_inputs
        for i, g in zip(self.input_index, grads):
            grad_input[i] = Tensor._from_op(g)
        for i, (shape, dtype) in self.other_inputs.items():
            grad_input[i] = Tensor._from_op(np.zeros(shape, dtype))      # torch's materialized zeros
        grad_input = tuple(grad_input)
        for hook in self.hooks:
            new = hook(self.module, grad_input, self.grad_output)
            if new is not None:
                grad_input = _checked(new, len(grad_input), "backward hook", "grad_input")
        self.grad_output = None
        return tuple(_grad_array(grad_input[i], g.shape, "grad_input", i)
                     for i, g in zip(self.input_index, grads))


def _requiring_grad(values):
    """Positions of the Tensors in `values` that require grad (empty outside grad mode)."""
    if not is_grad_enabled():
        return []
    return [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]


def _replace(values, index, new):
    """The tuple `values` (a namedtuple stays one) with values[index[k]] = new[k]."""
    items = list(values)
    for i, t in zip(index, new):
        items[i] = t
    return type(values)(*items) if hasattr(values, "_fields") else tuple(items)


def _checked(grads, n, kind, name):
    if not isinstance(grads, (tuple, list)):
        raise TypeError(f"{kind} must return None or a tuple of {name} (one per entry), "
                        f"got {type(grads).__name__}")
    if len(grads) != n:
        raise RuntimeError(f"{kind} returned an invalid number of {name}, got {len(grads)}, but expected {n}")
    return tuple(grads)


def _grad_array(grad, shape, name, i):
    """A hook's gradient (Tensor, array or None) as the array to pass on, of the original shape."""
    if grad is None:
        return None
    arr = grad.data if isinstance(grad, Tensor) else np.asarray(grad)
    if arr.shape != shape:
        raise RuntimeError(f"a module backward hook changed the shape of {name}[{i}] from {shape} to "
                           f"{arr.shape}")
    return arr
