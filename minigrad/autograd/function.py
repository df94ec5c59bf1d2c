"""`Function`: one op = forward + backward on numpy arrays, recorded on the tape by `apply`.

    class Square(Function):
        @staticmethod
        def forward(ctx, x):                 # arrays in, array(s) out
            ctx.save_for_backward(x)
            return x * x
        @staticmethod
        def backward(ctx, grad):             # one grad per output -> one grad per forward arg
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    y = Square.apply(t)                      # Tensors in, Tensor(s) out
"""
import itertools

import numpy as np

from minigrad.autograd import anomaly
from minigrad.autograd.grad_mode import is_grad_enabled
from minigrad.profiler import _hook as _profiler
from minigrad.threads import sync_thread

_FREED_MSG = ("Trying to backward through the graph a second time (or to read saved tensors after they "
              "were freed). Saved values are freed by .backward(); pass retain_graph=True to the first "
              "backward if you need to backward twice.")

_STALE_VIEW_MSG = ("{op}: an input of shape {shape} is a view (reshape, slice, split ...) whose base was "
                   "modified in place in the graph after the view was made; minigrad does not rebase a "
                   "view's autograd history. Take the view again after the in-place op.")

_STALE_COPY_MSG = ("{op}: an input of shape {shape} is a transpose, strided slice or split (a copy "
                   "standing for PyTorch's view) whose source was modified in place in the graph "
                   "after it was made; it still holds the old values. Take it again after the "
                   "in-place op.")

_sequence = itertools.count()
_DEFAULT_FLOAT = np.dtype(np.float32)       # what non-float inputs become (tensor.float32)

# what the ctx of an op that saved no arrays keeps once backward freed it: shapes, dims, flags,
# dtypes, slices (small metadata such ops need for a second backward, as PyTorch keeps sizes)
_METADATA = (bool, int, float, str, slice, type(None), type(Ellipsis), np.dtype, np.generic)


def _is_metadata(value):
    if type(value) is tuple:
        return all(_is_metadata(v) for v in value)
    return isinstance(value, _METADATA)


def _root(arr):
    """The array that owns `arr`'s memory (arr itself when it is not a view)."""
    base = arr.base
    while isinstance(base, np.ndarray):
        arr, base = base, base.base
    return arr


class Context:
    """Per-call scratch space shared by `forward` and `backward` of one op application."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self._saved_versions = ()
        self._freed = False

    def save_for_backward(self, *arrays):
        """Keep `arrays` (numpy arrays or None) for backward; read back as `ctx.saved_tensors`."""
        self._saved = arrays

    @property
    def saved_tensors(self):
        if self._saved is None:
            raise RuntimeError(_FREED_MSG)
        for counter, version, shape, op_name in self._saved_versions:
            if counter.value != version:
                raise RuntimeError(
                    f"{op_name}: a tensor of shape {shape} saved for backward was modified in place "
                    f"(version {version} -> {counter.value}, through it or a view/detach() sharing its "
                    "memory); gradients would be wrong. Clone it before modifying it, or do the "
                    "in-place change outside the graph.")
        return self._saved

    def _free(self):
        """Drop the saved arrays and the other attributes; an op that saved no arrays keeps its
        metadata, so a second backward through it works (add, sum, reshape, split ...). Reading
        anything dropped raises the "second time" error."""
        if self._saved is None or any(s is not None for s in self._saved):
            self.__dict__.clear()      # its backward needs the saved arrays: nothing else matters
            self._saved = None
            self._freed = True
            return
        kept = {k: v for k, v in self.__dict__.items() if not k.startswith("_") and _is_metadata(v)}
        self.__dict__.clear()
        self.__dict__.update(kept)
        self._saved = ()
        self._saved_versions = ()
        self._freed = True

    def __getattr__(self, name):            # only reached for attributes that are not there
        if self.__dict__.get("_freed"):
            raise RuntimeError(_FREED_MSG)
        raise AttributeError(f"'Context' object has no attribute {name!r}")


class Node:
    """One recorded application of a Function: what backward needs to route gradients.

    inputs[i] is None (no grad needed), a leaf Tensor (grad accumulates in .grad), or a
    (parent_node, output_index) pair. hooks: None, or {output_index: TensorHooks} for outputs with
    hooks or retain_grad (autograd/hooks.py).
    """

    __slots__ = ("fn", "ctx", "inputs", "input_meta", "output_meta", "hooks", "seq", "callsite",
                 "__weakref__")

    def __init__(self, fn, ctx, args, outputs):
        self.fn = fn
        self.ctx = ctx
        self.seq = next(_sequence)
        self.inputs = []
        self.input_meta = []
        for a in args:
            if getattr(a, "_view", None) is not None and a._view[1] != a._vc.rewrites:
                # also for a view that does not require grad: its base may require it since
                raise RuntimeError(_STALE_VIEW_MSG.format(op=fn.__name__, shape=a.shape))
            wb = getattr(a, "_writeback", None)
            if wb is not None and wb.source._vc is not None and wb.source._vc.rewrites != wb.rewrites:
                raise RuntimeError(_STALE_COPY_MSG.format(op=fn.__name__, shape=a.shape))
            if getattr(a, "requires_grad", False):
                self.inputs.append(a if a._node is None else (a._node, a._out_index))
                self.input_meta.append((a.data.shape, a.data.dtype))
            else:
                self.inputs.append(None)
                self.input_meta.append(None)
        self.output_meta = [(o.data.shape, o.data.dtype) for o in outputs]
        self.hooks = None
        self.callsite = anomaly.callsite() if anomaly.is_enabled() else None

    @property
    def name(self):
        return self.fn.__name__

    def free(self):
        """Free what backward saved; the links to the inputs stay (as in PyTorch), so a second
        backward through ops that saved nothing works."""
        if self.ctx is not None:
            self.ctx._free()


def _as_output(arr, dtype):
    """Wrap a forward result as a C-contiguous array of the op's float dtype (0-d kept 0-d)."""
    arr = np.asarray(arr)
    if dtype is not None and arr.dtype.kind == "f" and arr.dtype != dtype:
        arr = arr.astype(dtype)
    if not (arr.flags.c_contiguous and arr.flags.writeable):   # read-only: a broadcast_to view
        arr = arr.copy(order="C")
    return arr


class WriteBack:
    """How a copy standing for a PyTorch view writes through to its source (`ops/inplace.py`).

    source: the Tensor it was taken from; view: a numpy view of source's memory laid out like the
    copy, None when elements repeat (expand), where writing in place raises as in PyTorch; version:
    source's version when the copy last agreed with it; rewrites: source's count of in-graph
    in-place writes then (after one, the copy's node is stale); rebuild(source_old, copy) ->
    source's new value as a Tensor, for a write recorded in the graph.
    """

    __slots__ = ("source", "view", "version", "rewrites", "rebuild")

    def __init__(self, source, view, rebuild):
        self.source, self.view, self.rebuild = source, view, rebuild
        self.version = source._version
        self.rewrites = 0 if source._vc is None else source._vc.rewrites   # in-graph writes

    def detached(self):
        """The same write-back for a detach()ed alias of the copy, through a detached alias of the
        source, so a carried `out[:, -1].detach()` holds no graph."""
        wb = WriteBack(self.source.detach(), self.view, self.rebuild)
        wb.version, wb.rewrites = self.version, self.rewrites
        return wb


def _keep_writebacks(cls, ctx, source, arrays, outputs):
    """Give each output that `_as_output` copied out of `source`'s memory its WriteBack."""
    owner = _owner(source.data)
    for i, (raw, out) in enumerate(zip(arrays, outputs)):
        if out.data is not raw and isinstance(raw, np.ndarray) and _owner(raw) is owner:
            view = raw if raw.flags.writeable else None
            out._writeback = WriteBack(source, view, cls.rebuild(ctx, i))


class Function:
    """Base class of every op. Subclasses define static `forward(ctx, ...)` and `backward(ctx, ...)`.

    Float outputs are cast to the inputs' float dtype (float32, the default dtype, when no Tensor
    input is float: `int_tensor / 2`, `int_tensor.exp()`, as in PyTorch) unless the class sets
    `changes_dtype = True`.
    """

    changes_dtype = False
    # True for ops whose outputs PyTorch makes views of the first input (transpose, slicing, split,
    # expand). Their forward returns numpy views; an output that must be copied to C order keeps a
    # `WriteBack`, and the class defines `rebuild(ctx, i)` (see WriteBack).
    returns_views = False

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        from minigrad.tensor import Tensor

        sync_thread()
        dtype = None
        for a in args:
            if isinstance(a, Tensor) and a.data.dtype.kind == "f":
                if dtype is None:
                    dtype = a.data.dtype
                elif a.data.dtype != dtype:
                    shapes = ", ".join(f"{tuple(t.shape)}:{t.dtype}" for t in args if isinstance(t, Tensor))
                    raise TypeError(f"{cls.__name__}: inputs mix float32 and float64 ({shapes}); "
                                    "convert one with .to(dtype) first")
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        record = any(needs) and is_grad_enabled()
        ctx = Context(needs)
        raw = [a.data if isinstance(a, Tensor) else a for a in args]
        if _profiler.enabled:
            result = _profiler.call(cls.forward, cls.__name__, "forward", ctx, raw, kwargs)
        else:
            result = cls.forward(ctx, *raw, **kwargs)
        is_tuple = isinstance(result, tuple)
        arrays = result if is_tuple else (result,)
        out_dtype = None if cls.changes_dtype else (_DEFAULT_FLOAT if dtype is None else dtype)
        outputs = tuple(Tensor._from_op(_as_output(r, out_dtype)) for r in arrays)
        for out in outputs:
            if out.data.base is not None:        # cheap pre-test: a fresh array has no base
                _alias_input(out, args, Tensor)
        if cls.returns_views:
            _keep_writebacks(cls, ctx, args[0], arrays, outputs)
        if anomaly.is_enabled():
            anomaly.check_forward(cls.__name__, outputs, raw)
        if record:
            node = Node(cls, ctx, args, outputs)
            for i, out in enumerate(outputs):
                if out.data.dtype.kind == "f":
                    out._requires_grad = True
                    out._node = node
                    out._out_index = i
            if ctx._saved:
                _record_versions(ctx, args, outputs, cls.__name__)
        return outputs if is_tuple else outputs[0]


def _owner(arr):
    """The object owning `arr`'s memory (the end of its `.base` chain)."""
    while isinstance(arr, np.ndarray) and arr.base is not None:
        arr = arr.base
    return arr


def _alias_input(out, args, tensor_cls):
    """If `out`'s array is a view into the memory of an input Tensor (same owner), make `out` an
    alias of it: share its version counter and remember the base and its rewrite count."""
    owner = _owner(out.data)
    for a in args:
        if isinstance(a, tensor_cls) and _owner(a.data) is owner:
            out._vc = a._counter()
            out._view = (a if a._view is None else a._view[0], out._vc.rewrites)
            return


def _record_versions(ctx, args, outputs, op_name):
    """Remember the version counter and current version of every input/output tensor whose memory a
    saved array shares: the tensor's own array, or a view of it or into it (a reduction saves its
    keepdim result and returns a reshape of it). The counter, not the tensor: an alias may write to
    it after the tensor dies."""
    from minigrad.tensor import Tensor

    saved = [s for s in ctx._saved if isinstance(s, np.ndarray)]
    saved_ids = {id(s) for s in saved}
    tensors = [t for t in itertools.chain(args, outputs) if isinstance(t, Tensor)]
    hit = [id(t.data) in saved_ids for t in tensors]
    # a saved array that is no input's or output's own array (a reduction's keepdim result, whose
    # reshape it returns) may still share one's memory: the exact test, only within one root array
    own = {id(t.data) for t in tensors}
    others = [s for s in saved if id(s) not in own]
    if others:
        roots = {}
        for s in others:
            roots.setdefault(id(_root(s)), []).append(s)
        for i, t in enumerate(tensors):
            same_root = roots.get(id(_root(t.data)))
            if not hit[i] and same_root:
                hit[i] = any(np.may_share_memory(s, t.data) for s in same_root)
    versions = []
    for t, h in zip(tensors, hit):
        if h:
            counter = t._counter()
            versions.append((counter, counter.value, t.shape, op_name))
    ctx._saved_versions = tuple(versions)
