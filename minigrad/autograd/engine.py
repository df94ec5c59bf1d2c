"""Reverse-mode traversal of the tape.

`backward(roots, grads)` collects every node reachable from the roots (iteratively: no recursion,
so a chain of 100 000 ops is fine), runs them in reverse creation order, sums the grads of tensors
used more than once, reduces broadcast grads to the input's shape here (ops never do it), and
accumulates into leaves' `.grad` once the whole walk succeeded (an error in any op's backward
leaves every `.grad` as it was), under a lock (backward may run in several threads). Without
`retain_graph` each node's saved values are freed once it has run (its links stay: a second
backward needing a freed value raises, others work).

Walks nest: a node's backward may run a walk of its own (`_run`: checkpoint's recomputation,
minigrad/utils/checkpoint.py). A walk holds no lock and no module state (the commit lock is taken
after the outermost walk ended); `add_leaf_grads` hands a nested walk's leaf grads to the walk
running that node (a thread-local), which commits them with its own, all or nothing.

Tensor hooks (autograd/hooks.py): a non-leaf's run on its summed grad when its node is reached,
before retain_grad takes it and before the node's backward; a leaf's run on its summed grad once
the outermost walk is over, before the commit (a hook raising commits nothing); post-accumulate
hooks after the commit. The walk checks one attribute per node (`node.hooks`) and none per leaf
until some leaf got a hook.
"""
import contextlib
import sys
import threading

import numpy as np

from minigrad.autograd import anomaly
from minigrad.autograd import hooks as _hooks
from minigrad.autograd.grad_mode import no_grad
from minigrad.profiler import _hook as _profiler
from minigrad.threads import sync_thread


def unbroadcast(grad, shape, op_name="?"):
    """Sum `grad` down to `shape` over the axes numpy broadcasting added or stretched."""
    if grad.shape == tuple(shape):
        return grad
    extra = grad.ndim - len(shape)
    if extra < 0:
        raise RuntimeError(f"{op_name}.backward: gradient of shape {grad.shape} is smaller than its "
                           f"input {tuple(shape)}")
    if extra:
        grad = sum_accurate(grad, tuple(range(extra)))
    axes = tuple(i for i, (g, s) in enumerate(zip(grad.shape, shape)) if s == 1 and g != 1)
    if axes:
        grad = sum_accurate(grad, axes, keepdims=True)
    if grad.shape != tuple(shape):
        raise RuntimeError(f"{op_name}.backward: gradient of shape {grad.shape} does not broadcast to "
                           f"its input {tuple(shape)}")
    return grad


def sum_accurate(x, axis=None, keepdims=False):
    """x.sum(axis) with float32 accumulated in float64 and cast back. numpy adds an axis that is not
    contiguous one slice at a time in the input dtype (float32: 2^24 + 1 = 2^24, so 2^24 + 2^22 ones
    sum to 2^24); over a trailing block of a C-contiguous array it sums pairwise, accurate already,
    and that (faster) path is kept. Other dtypes sum as numpy does."""
    if x.dtype != np.float32 or _contiguous_tail(x, axis):
        return x.sum(axis=axis, keepdims=keepdims)
    return np.add.reduce(x, axis=axis, dtype=np.float64, keepdims=keepdims).astype(np.float32)


def _contiguous_tail(x, axis):
    """Whether the reduced axes (None: all) are the last ones of a C-contiguous array."""
    if not x.flags.c_contiguous:
        return False
    if axis is None:
        return True
    axes = sorted(a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis))
    return axes == list(range(x.ndim - len(axes), x.ndim))


def _refcounts_are_exact():
    """Whether sys.getrefcount counts every reference (CPython up to 3.13 with the GIL; 3.14 borrows
    references on the evaluation stack and can report fewer, free threading defers counts)."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 14):
        return False
    gil_enabled = getattr(sys, "_is_gil_enabled", None)
    return gil_enabled is None or gil_enabled()


EXACT_REFCOUNTS = _refcounts_are_exact()
# held while backward writes into .grad: several threads may backward into a shared leaf, and
# numpy releases the GIL inside +=
_grad_lock = threading.Lock()


def _buffer(buffered, leaf, grad, owned):
    """Add one contribution to `leaf` to this backward's buffer {id: [leaf, sum, owned]}. `owned`:
    no one else holds `grad` (then it may be kept as .grad or added into in place)."""
    entry = buffered.get(id(leaf))
    if entry is None:
        owned = (owned and grad.flags.owndata and grad.flags.writeable and grad.flags.c_contiguous
                 and grad.dtype == leaf.data.dtype)
        buffered[id(leaf)] = [leaf, grad, owned]
    elif entry[2]:
        entry[1] += grad
    else:
        entry[1], entry[2] = entry[1] + grad, True


# (buffered, wanted) of the walk running in this thread, for add_leaf_grads
_walks = threading.local()


@contextlib.contextmanager
def _current_walk(buffered, wanted):
    prev = getattr(_walks, "current", None)
    _walks.current = (buffered, wanted)
    try:
        yield
    finally:
        _walks.current = prev


def add_leaf_grads(buffered):
    """Add the leaf grads {id: [leaf, sum, owned]} of a walk a node's backward ran (as `_run`
    returns them) to the walk running that node in this thread, as if the leaves were inputs of the
    node: `.grad` gets them when that walk commits (nothing if it fails), and `grad(inputs=)` keeps
    those of its inputs."""
    walk = getattr(_walks, "current", None)
    if walk is None:
        raise RuntimeError("add_leaf_grads: no backward is running in this thread")
    outer, wanted = walk
    for leaf, g, owned in buffered.values():
        if wanted is None or id(leaf) in wanted:
            _buffer(outer, leaf, g, owned)


def _commit(buffered):
    """leaf.grad += sum for every buffered leaf, under the lock. A leaf without .grad keeps an owned
    sum (a model's weight grads come fresh from their GEMMs, so no copy per step), else a copy."""
    from minigrad.tensor import Tensor

    with _grad_lock:
        for leaf, grad, owned in buffered.values():
            if leaf.grad is None:
                if not owned:
                    grad = np.array(grad, dtype=leaf.data.dtype, order="C", copy=True)
                leaf.grad = Tensor._from_op(grad)
            else:
                leaf.grad.data += grad


def _collect(roots):
    seen, order, stack = set(), [], [r._node for r in roots if r._node is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        stack.extend(inp[0] for inp in node.inputs if isinstance(inp, tuple))
    order.sort(key=lambda n: n.seq, reverse=True)
    return order


def _node_hooks(node, slots, buffered):
    """Run the hooks of `node`'s outputs on their summed grads `slots` (replaced in place), then
    buffer the grads of its retain_grad outputs (unless `buffered` is None: in grad())."""
    for i, entry in list(node.hooks.items()):
        if entry.pre:
            shape, dtype = node.output_meta[i]
            slots[i] = _hooks.run_hooks(entry.pre, slots[i], shape, dtype)
        if entry.retain is not None and buffered is not None and slots[i] is not None:
            t = entry.retain()
            if t is not None:
                _buffer(buffered, t, slots[i], False)


def _leaf_hooks(buffered, post=False):
    """Run the leaves' grad hooks on their buffered sums (replaced; the leaf gets a copy, a hook may
    keep what it saw), or with post=True their post-accumulate hooks."""
    if not _hooks.leaf_hooks_exist:
        return
    with no_grad():
        for entry in list(buffered.values()):
            leaf = entry[0]
            h = leaf._hooks
            if h is None or leaf._node is not None:        # a retained non-leaf
                continue
            if post:
                for hook in tuple(h.post.values()):
                    hook(leaf)
            elif h.pre:
                entry[1] = _hooks.run_hooks(h.pre, entry[1], leaf.data.shape, leaf.data.dtype)
                entry[2] = False


def backward(tensors, grad_tensors=None, retain_graph=False):
    """Accumulate d(sum_i <grad_i, tensor_i>)/d(leaf) into every leaf's `.grad`."""
    buffered = _run(tensors, grad_tensors, retain_graph, None)
    _leaf_hooks(buffered)
    _commit(buffered)
    _leaf_hooks(buffered, post=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=False, create_graph=False, allow_unused=False):
    """torch.autograd.grad: the gradients of sum_i <grad_outputs_i, outputs_i> with respect to each
    of `inputs` (leaves or intermediate tensors), returned as a tuple of Tensors; no `.grad` is
    touched. An input the outputs do not depend on raises, or gives None with allow_unused=True.
    The inputs' hooks run on what is returned (no post-accumulate hook: nothing accumulates).
    create_graph (higher-order gradients) is not supported."""
    from minigrad.tensor import Tensor

    if create_graph:
        raise NotImplementedError("grad: create_graph=True (gradients of gradients) is not supported")
    single = isinstance(inputs, Tensor)
    inputs = [inputs] if single else list(inputs)
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise RuntimeError(f"grad: inputs[{i}] is not a Tensor that requires grad")
    buffered = _run(outputs, grad_outputs, retain_graph, inputs)
    _leaf_hooks(buffered)
    out = []
    for i, t in enumerate(inputs):
        entry = buffered.get(id(t))
        if entry is None and not allow_unused:
            raise RuntimeError(f"grad: inputs[{i}] (shape {t.shape}) was not used to compute the outputs; "
                               "pass allow_unused=True to get None for it")
        out.append(None if entry is None else Tensor._from_op(np.array(entry[1], dtype=t.data.dtype)))
    return tuple(out)


def _run(tensors, grad_tensors, retain_graph, inputs):
    """Walk the graph back from `tensors`; returns the buffered grads {id: [tensor, sum, owned]}: of
    every leaf (inputs None), or of just the tensors in `inputs`, leaves or not."""
    from minigrad.tensor import Tensor

    sync_thread()
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    if grad_tensors is None or isinstance(grad_tensors, (Tensor, np.ndarray)):
        grad_tensors = [grad_tensors] * len(tensors) if grad_tensors is None else [grad_tensors]
    if len(grad_tensors) != len(tensors):
        raise ValueError(f"backward: {len(tensors)} tensors but {len(grad_tensors)} gradients")

    pending, buffered = {}, {}
    wanted = None if inputs is None else {id(t) for t in inputs}
    # intermediate inputs: their grad is complete when their node runs (the walk is in reverse order)
    captured = {(id(t._node), t._out_index): t for t in inputs or () if t._node is not None}
    for t, g in zip(tensors, grad_tensors):
        if not t.requires_grad:
            raise RuntimeError("backward: tensor does not require grad and has no grad_fn "
                               "(was it computed under no_grad, or from inputs that don't require grad?)")
        if g is None:
            if t.data.size != 1:
                raise RuntimeError(f"backward: grad can be implicitly created only for scalar outputs, "
                                   f"got shape {t.shape}; pass gradient=")
            g = np.ones_like(t.data)
        else:
            g = g.data if isinstance(g, Tensor) else np.asarray(g)
            if g.shape != t.data.shape:
                raise ValueError(f"backward: gradient shape {g.shape} != tensor shape {t.shape}")
            g = g.astype(t.data.dtype, copy=False)
        if t._node is None:
            if wanted is None or id(t) in wanted:
                _buffer(buffered, t, g, False)
        else:
            slots = pending.setdefault(t._node, [None] * len(t._node.output_meta))
            i = t._out_index
            slots[i] = g if slots[i] is None else slots[i] + g

    nodes = _collect(tensors)
    check = anomaly.is_enabled()
    with no_grad(), _current_walk(buffered, wanted):
        for node in nodes:
            slots = pending.pop(node, None)
            if slots is None:
                if not retain_graph:
                    node.free()
                continue
            if node.hooks is not None:
                _node_hooks(node, slots, buffered if inputs is None else None)
            for i, g in enumerate(slots):
                t = captured.get((id(node), i)) if captured else None
                if t is not None and g is not None:
                    _buffer(buffered, t, g, False)
            grads_out = [s if s is not None else np.zeros(shape, dtype)
                         for s, (shape, dtype) in zip(slots, node.output_meta)]
            if _profiler.enabled:
                grads_in = _profiler.call(node.fn.backward, node.name, "backward", node.ctx, grads_out, {})
            else:
                grads_in = node.fn.backward(node.ctx, *grads_out)
            if not isinstance(grads_in, tuple):
                grads_in = (grads_in,)
            if len(grads_in) != len(node.inputs):
                raise RuntimeError(f"{node.name}.backward returned an incorrect number of gradients "
                                   f"(expected {len(node.inputs)}, got {len(grads_in)})")
            if check:
                anomaly.check_backward(node, grads_in)
            for j, inp in enumerate(node.inputs):
                g = grads_in[j]
                if inp is None or g is None:
                    continue
                shape, dtype = node.input_meta[j]
                g = np.asarray(g)
                g = unbroadcast(g, shape, node.name)
                if g.dtype != dtype:
                    g = g.astype(dtype)
                if isinstance(inp, tuple):
                    parent, idx = inp
                    slots_p = pending.setdefault(parent, [None] * len(parent.output_meta))
                    slots_p[idx] = g if slots_p[idx] is None else slots_p[idx] + g
                elif wanted is None or id(inp) in wanted:
                    # references to g: this frame, getrefcount's argument and, when g is the op's
                    # own array, grads_in; any other holder (ctx, a view of it, a second slot of
                    # grads_in) means it is shared, and the leaf gets a copy
                    owned = EXACT_REFCOUNTS and sys.getrefcount(g) <= (3 if g is grads_in[j] else 2)
                    _buffer(buffered, inp, g, owned)
            if not retain_graph:
                node.free()
    return buffered
