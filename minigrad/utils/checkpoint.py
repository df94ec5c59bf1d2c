"""Activation checkpointing, as `torch.utils.checkpoint`: trade compute for memory.

    y = checkpoint(block, x, mask)        # block's activations are not kept; backward recomputes them

Forward runs `function` under no_grad, so none of its ops records a node or saves an array; the
call becomes one node of the tape (`_Checkpoint`) whose inputs are the call's Tensors and whose
outputs are the Tensors it returned, saving only the input arrays. Its backward re-runs `function`
with grad enabled on detached copies of those inputs (a sub-graph of its own, with the global RNG
set back to its state at the forward call: dropout draws the same masks) and runs the engine's walk
(`engine._run`) on it from the recomputed outputs with the incoming output grads. The grads of the
detached inputs are the node's input grads; every other leaf the sub-graph reached (the parameters
used inside, which are not inputs of the node) goes to the walk running the node through
`engine.add_leaf_grads`, so it is accumulated into `.grad` with the rest of that backward (nothing if
any op fails), or returned by `autograd.grad(out, [param])`, which keeps only its inputs.

Why a Function and not an engine hook: the engine stays one reverse walk over nodes; a nested walk
is an ordinary `_run` (it holds no lock or module state; see engine.py), and the only engine change
is the thread-local through which a nested walk's leaf grads reach the enclosing one.

Semantics (PyTorch's use_reentrant=False): parameters used inside get grads even when no argument
requires grad (the call is then recorded with a hidden 0-d input, so its outputs require grad
whenever grad is enabled); `autograd.grad` with inputs= works; outputs may be a Tensor or tuples,
lists and dicts of Tensors and other values, and Tensors are found at the top level of the
arguments and inside tuples, lists and dicts. `use_reentrant=True` is accepted and means the same
(PyTorch's reentrant variant gives a subset of these semantics). Differences: a Tensor with autograd
history that `function` reaches other than through its arguments (a closure, an attribute) raises at
backward (pass it as an argument); the Tensor arguments share one float dtype (as any op's inputs);
`function` must compute the same thing twice: parameters changed in place between forward and
backward give the grads at their new values (an argument changed in place raises, as for any saved
tensor); backwards running at once in several threads share the global RNG they rewind.
"""
import numpy as np

from minigrad import random as _random
from minigrad.autograd import engine, hooks
from minigrad.autograd import function as _function
from minigrad.autograd.function import Function
from minigrad.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad
from minigrad.tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential", "GradientCheckpointingMixin"]


def _tensors(obj, out):
    """Append every Tensor in `obj` (itself, or nested in tuples, lists and dict values) to `out`."""
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            _tensors(item, out)
    elif isinstance(obj, dict):
        for item in obj.values():
            _tensors(item, out)
    return out


def _replace(obj, new):
    """`obj` with its Tensors (in `_tensors`' order) replaced by the items of the iterator `new`."""
    if isinstance(obj, Tensor):
        return next(new)
    if isinstance(obj, (tuple, list)):
        items = [_replace(item, new) for item in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)   # namedtuple
    if isinstance(obj, dict):
        return {key: _replace(item, new) for key, item in obj.items()}
    return obj


class _Call:
    """One checkpointed call: what backward needs to run it again."""

    __slots__ = ("function", "args", "kwargs", "tensors", "rng_state", "out")

    def __init__(self, function, args, kwargs, tensors, rng_state):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.tensors, self.rng_state, self.out = tensors, rng_state, None


class _Checkpoint(Function):
    """The node of a checkpointed call: apply(call, *tensors) -> the Tensors `call.function` returned
    (`call.out` keeps its whole result for `checkpoint` to rebuild)."""

    changes_dtype = True        # outputs keep the dtypes the function gave them

    @staticmethod
    def forward(ctx, call, *arrays):
        with no_grad(), hooks.discarding():     # hooks registered inside fire on the recomputation
            call.out = call.function(*call.args, **call.kwargs)
        ctx.call = call
        ctx.save_for_backward(*arrays)
        given = {id(a) for a in arrays}
        # an argument returned as it is becomes a view, so the output shares its version counter
        return tuple(t.data.view() if id(t.data) in given else t.data for t in _tensors(call.out, []))

    @staticmethod
    def backward(ctx, *grads):
        call = ctx.call
        _ = ctx.saved_tensors               # raises if an argument was changed in place since
        detached = [t.detach().requires_grad_(t.requires_grad) for t in call.tensors]
        args, kwargs = _replace((call.args, call.kwargs), iter(detached))
        floor = next(_function._sequence)   # every node of the recomputation is numbered after it
        outs = _tensors(_recompute(call, args, kwargs), [])
        if len(outs) != len(grads) or any(o.shape != g.shape for o, g in zip(outs, grads)):
            raise RuntimeError(
                "checkpoint: the recomputation returned Tensors of shapes "
                f"{[tuple(o.shape) for o in outs]}, the forward {[tuple(g.shape) for g in grads]}; "
                "the checkpointed function must compute the same thing when run again")
        roots = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
        n_in = len(ctx.needs_input_grad) - 1
        if not roots:
            return (None,) * (n_in + 1)
        nodes = engine._collect([o for o, _ in roots])
        if nodes and nodes[-1].seq < floor:         # newest first: the last one is the oldest
            raise RuntimeError(
                f"checkpoint: the function uses a Tensor with autograd history (made by "
                f"{nodes[-1].name}) that it does not receive as an argument (a closure, an attribute); "
                "pass it as an argument (Tensors at the top level or in tuples, lists and dicts of the "
                "arguments are tracked)")
        buffered = engine._run([o for o, _ in roots], [g for _, g in roots], False, None)
        grads_in = [buffered.pop(id(d), (None, None))[1] for d in detached]
        engine.add_leaf_grads(buffered)
        return (None, *grads_in, *[None] * (n_in - len(detached)))


def _recompute(call, args, kwargs):
    """call.function(*args, **kwargs) with grad enabled and the global RNG as at the forward, then as
    before. The state is set in place (set_rng_state would replace the generator object, and whoever
    holds the old one, a DataLoader's epoch, would then draw the numbers the global one draws)."""
    if call.rng_state is None:
        with enable_grad():
            return call.function(*args, **kwargs)
    bits = _random.default_generator().bit_generator
    current, bits.state = bits.state, call.rng_state
    try:
        with enable_grad():
            return call.function(*args, **kwargs)
    finally:
        bits.state = current


def checkpoint(function, *args, use_reentrant=False, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), keeping none of its activations for backward, which recomputes
    them (see the module docstring). Under no_grad it just runs. preserve_rng_state: the
    recomputation draws the same random numbers from minigrad's global generator (dropout masks);
    a `generator=` passed to an op is the caller's to rewind. use_reentrant: True or False, same
    semantics (PyTorch's non-reentrant ones)."""
    if not isinstance(use_reentrant, (bool, type(None))):
        raise TypeError(f"checkpoint: use_reentrant must be a bool, got {use_reentrant!r}")
    if not is_grad_enabled():
        return function(*args, **kwargs)
    tensors = _tensors((args, kwargs), [])
    rng_state = _random.get_rng_state() if preserve_rng_state else None
    call = _Call(function, args, kwargs, tensors, rng_state)
    inputs = tensors
    if not any(t.requires_grad for t in tensors):
        # a hidden input requiring grad, so the call is recorded: parameters inside may need grads
        dtype = next((t.data.dtype for t in tensors if t.data.dtype.kind == "f"), np.float32)
        inputs = [*tensors, Tensor(np.zeros((), dtype), requires_grad=True)]
    outs = _Checkpoint.apply(call, *inputs)
    result, call.out = call.out, None
    return _replace(result, iter(outs if isinstance(outs, tuple) else (outs,)))


def checkpoint_sequential(functions, segments, input, use_reentrant=False, **kwargs):
    """torch.utils.checkpoint.checkpoint_sequential: run `functions` (an nn.Sequential or a list of
    callables) in order on `input`, in `segments` chunks of len // segments, each but the last
    checkpointed (the last one's activations are needed at once by backward). kwargs:
    preserve_rng_state."""
    preserve_rng_state = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise TypeError(f"checkpoint_sequential: unexpected keyword arguments {sorted(kwargs)}")
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)
    if isinstance(segments, bool) or not isinstance(segments, int) or not 1 <= segments <= len(functions):
        raise ValueError(f"checkpoint_sequential: segments must be an int in 1 .. {len(functions)} "
                         f"(the number of functions), got {segments!r}")
    size = len(functions) // segments
    last = size * (segments - 1)
    for start in range(0, last, size):
        input = checkpoint(_Segment(functions[start:start + size]), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve_rng_state)
    return _Segment(functions[last:])(input)


class _Segment:
    """Calls its functions in order."""

    def __init__(self, functions):
        self.functions = functions

    def __call__(self, x):
        for f in self.functions:
            x = f(x)
        return x


class GradientCheckpointingMixin:
    """Hugging Face's `gradient_checkpointing_enable()` / `gradient_checkpointing_disable()` for a
    model whose forward checkpoints each layer while grad is enabled (`_checkpoint_kwargs` is None
    when off: the forward tests it once)."""

    _checkpoint_kwargs = None

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        """Checkpoint every layer in forward while grad is enabled; gradient_checkpointing_kwargs:
        checkpoint's use_reentrant / preserve_rng_state."""
        kwargs = dict(gradient_checkpointing_kwargs or {})
        unknown = set(kwargs) - {"use_reentrant", "preserve_rng_state"}
        if unknown:
            raise TypeError(f"gradient_checkpointing_enable: unknown checkpoint arguments {sorted(unknown)}")
        self._checkpoint_kwargs = kwargs

    def gradient_checkpointing_disable(self):
        self._checkpoint_kwargs = None

    @property
    def is_gradient_checkpointing(self):
        return self._checkpoint_kwargs is not None
