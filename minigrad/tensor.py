"""`Tensor`: a C-contiguous numpy array plus what autograd needs to differentiate through it.

Float tensors are float32 by default or float64 on request; an op never mixes the two (it raises).
Integer and bool tensors (token ids, masks) never require grad. The arithmetic, reduction, shape and
indexing methods are attached by `minigrad.ops.tensor_methods`; this file is the core.
"""
import operator
import weakref

import numpy as np

from minigrad import random as _random
from minigrad.autograd import engine
from minigrad.autograd import hooks as autograd_hooks
from minigrad.kernels.validate import check_int, check_number

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int64 = np.dtype(np.int64)
int32 = np.dtype(np.int32)
int16 = np.dtype(np.int16)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
bool_ = np.dtype(np.bool_)
_FLOATS = (float32, float64)


def _as_array(data, dtype):
    if isinstance(data, Tensor):
        data = data.data
    if dtype is not None:
        dtype = np.dtype(dtype)
    if isinstance(data, np.ndarray):
        arr = data if dtype is None else data.astype(dtype, copy=False)
    else:
        arr = np.asarray(data, dtype=dtype)
        if dtype is None and _has_big_number(arr):
            arr = _checked_python_ints(data, arr)
        if dtype is None and arr.dtype.kind == "f":
            arr = arr.astype(float32)
    if arr.dtype.kind == "f" and arr.dtype not in _FLOATS:
        raise TypeError(f"tensor: unsupported float dtype {arr.dtype}; use float32 or float64")
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"tensor: unsupported dtype {arr.dtype}")
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    return arr


_INT64 = np.iinfo(np.int64)


def _has_big_number(arr):
    """Whether numpy may have turned Python ints outside int64 into uint64, float64 or objects."""
    return arr.dtype.kind in "uO" or (arr.dtype.kind == "f" and arr.size > 0
                                      and bool(np.max(np.abs(arr)) >= 2.0 ** 63))


def _checked_python_ints(data, arr):
    """Like PyTorch, Python ints (without floats beside them) are int64 and may not overflow it;
    with a float among them the result is float."""
    items = list(_scalars(data))
    if not all(isinstance(v, (int, float, np.number)) for v in items):
        return arr                # None, strings, objects: rejected as an object array below
    if any(isinstance(v, (float, np.floating)) for v in items):
        return arr if arr.dtype.kind == "f" else np.asarray(data, dtype=np.float64)
    for v in items:
        if type(v) is int and not _INT64.min <= v <= _INT64.max:
            raise OverflowError(f"tensor: {v} does not fit in int64")
    return arr


def _scalars(data):
    if isinstance(data, (list, tuple)):
        for item in data:
            yield from _scalars(item)
    else:
        yield data


def _is_device(arg):
    """A device spec: a string naming one ("cpu", "cuda:0"; not a dtype name) or a torch.device-like
    object."""
    if isinstance(arg, str):
        return arg.split(":")[0] in ("cpu", "cuda", "mps", "xpu", "meta", "hip", "xla")
    return type(arg).__name__ == "device"


def to_args(op, args, dtype=None, device=None):
    """The dtype asked for by torch's `to(...)` forms (`Tensor.to`, `Module.to`): `to(dtype)`,
    `to(device)`, `to(device, dtype)`, `to(other_tensor)` and the keywords; None when no dtype is
    given. The device must be the CPU (a no-op); any other is a ValueError."""
    for arg in args:
        if _is_device(arg):
            if device is not None:
                raise TypeError(f"{op}: two devices given")
            device = arg
            continue
        if dtype is not None:
            raise TypeError(f"{op}: expected a device and/or a dtype, got {args!r}")
        dtype = arg.dtype if isinstance(arg, Tensor) else arg
    if device is not None and str(device).split(":")[0] != "cpu":
        raise ValueError(f"{op}: minigrad runs on the CPU only, got device {str(device)!r}")
    return dtype


def scalar_value(v):
    """A 0-d (or one-element) Tensor as its Python number, for creation functions' arguments
    (`arange(t)`); anything else unchanged."""
    return v.item() if isinstance(v, Tensor) else v


class _Version:
    """The in-place version counter of one block of memory, shared by every Tensor aliasing it.

    `value` counts in-place writes through any alias (a saved tensor whose value changed makes
    backward raise); `rewrites` counts in-place ops that gave an alias a new autograd node (a view
    made before such a rewrite has a stale history and may not enter the graph again).
    """

    __slots__ = ("value", "rewrites")

    def __init__(self):
        self.value = 0
        self.rewrites = 0


class Tensor:
    """A numpy array with autograd. `data` is the array; `grad` a Tensor filled by `backward()`.

    Aliases: a Tensor whose array is a view of another's memory (reshape/view, basic slicing,
    split/chunk, squeeze/unsqueeze/flatten, detach()) shares its version counter `_vc` (created on
    first need; None means "version 0, no alias yet"). Views made by an op also keep
    `_view = (base, rewrites at creation)`, `base` being the first non-view Tensor up the chain.
    A copy standing for what PyTorch makes a view (a transpose, a strided slice, a split along a
    later dim) keeps `_writeback` (see `autograd.function.WriteBack`), so writing it in place also
    writes its source, as writing the view would in PyTorch.
    """

    __slots__ = ("data", "_grad", "_requires_grad", "_node", "_out_index", "_vc", "_view", "_writeback",
                 "_hooks", "name", "__weakref__")
    __array_priority__ = 1000  # make `ndarray op Tensor` defer to Tensor's reflected operators

    def __init__(self, data, dtype=None, requires_grad=False):
        self.data = _as_array(data, dtype)
        self._grad = None
        self._requires_grad = False
        self._node = None
        self._out_index = 0
        self._vc = None
        self._view = None
        self._writeback = None
        self._hooks = None
        self.name = None
        if requires_grad:
            self.requires_grad_(True)

    @classmethod
    def _from_op(cls, arr):
        t = cls.__new__(cls)
        t.data = arr
        t._grad = None
        t._requires_grad = False
        t._node = None
        t._out_index = 0
        t._vc = None
        t._view = None
        t._writeback = None
        t._hooks = None
        t.name = None
        return t

    # ---- properties -------------------------------------------------------------------------
    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def is_leaf(self):
        return self._node is None

    @property
    def grad_fn(self):
        return self._node

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        """As in PyTorch, an assigned grad is None or a Tensor of this tensor's shape (another shape
        made the next backward fail, or broadcast into a wrong-shaped grad). A wrong dtype is
        caught by the optimizer's step."""
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None, got {type(value).__name__}")
            if value.shape != self.data.shape:
                raise RuntimeError(f"assigned grad of shape {value.shape} to a tensor of shape "
                                   f"{self.data.shape}")
        self._grad = value

    def size(self, dim=None):
        if dim is None:
            return self.data.shape
        n = self.data.ndim
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"size: dim must be an int, got {dim!r}")
        if n == 0:
            raise IndexError(f"size: a 0-d tensor has no dim {dim}")
        if not -n <= dim < n:
            raise IndexError(f"size: dim {dim} is out of range for a {n}-d tensor (expected [{-n}, {n - 1}])")
        return self.data.shape[dim]

    def dim(self):
        return self.data.ndim

    def numel(self):
        return int(self.data.size)

    def ndimension(self):
        """Alias of `dim()` (PyTorch's older name)."""
        return self.data.ndim

    def nelement(self):
        """Alias of `numel()`."""
        return int(self.data.size)

    def element_size(self):
        return self.data.itemsize

    def is_floating_point(self):
        return self.data.dtype.kind == "f"

    def is_contiguous(self, memory_format=None):
        """Always True: a Tensor's array is C-contiguous (PyTorch's non-contiguous views are copies)."""
        return True

    def stride(self, dim=None):
        """The C-order strides in elements (a tuple, or one dim's int), as PyTorch gives for a
        contiguous tensor (a size-0 dim counts as 1)."""
        strides, step = [], 1
        for s in reversed(self.data.shape):
            strides.append(step)
            step *= max(s, 1)
        strides = tuple(reversed(strides))
        if dim is None:
            return strides
        n, dim = self.data.ndim, operator.index(dim)
        if not -n <= dim < n:
            raise IndexError(f"stride: dimension {dim} out of range for a {n}-d tensor")
        return strides[dim]

    def storage_offset(self):
        """The offset in elements of this tensor's first element in the array owning its memory (a
        view made by slicing starts inside its base's memory; a copy standing for a view, such as a
        transpose, starts at 0)."""
        owner = self.data
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        if owner is self.data or self.data.size == 0:
            return 0
        return (self.data.ctypes.data - owner.ctypes.data) // self.data.itemsize

    def data_ptr(self):
        """The address of the first element."""
        return self.data.ctypes.data

    @property
    def nbytes(self):
        return self.data.nbytes

    @property
    def itemsize(self):
        return self.data.itemsize

    def is_signed(self):
        """Whether the dtype is signed (floats and intN; not uint8 or bool), as torch."""
        return self.data.dtype.kind in "fi"

    is_cpu = property(lambda self: True, doc="Always True (minigrad runs on the CPU).")
    is_cuda = property(lambda self: False, doc="Always False.")
    is_meta = property(lambda self: False, doc="Always False.")
    is_sparse = property(lambda self: False, doc="Always False (dense arrays only).")
    is_quantized = property(lambda self: False, doc="Always False.")

    @property
    def retains_grad(self):
        """Whether `retain_grad()` was called on this non-leaf (its `.grad` is kept by backward)."""
        node = self._node
        entry = node.hooks.get(self._out_index) if node is not None and node.hooks else None
        return entry is not None and entry.retain is not None and entry.retain() is self

    def __len__(self):
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.data.shape[0]

    def __iter__(self):
        if self.data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.data.shape[0]))

    # ---- conversion -------------------------------------------------------------------------
    def numpy(self):
        """The underlying array (shared, not copied)."""
        return self.data

    def item(self):
        if self.data.size != 1:
            raise ValueError(f"item: only one-element tensors convert to scalars, got shape {self.shape}")
        return self.data.reshape(()).item()

    def tolist(self):
        return self.data.tolist()

    def detach(self):
        """A new leaf sharing this tensor's array and version counter, cut from the graph: it may be
        modified in place (also when it is a view), and backward then raises if the old value was
        saved for it."""
        t = Tensor._from_op(self.data)
        t._vc = self._counter()
        t._writeback = None if self._writeback is None else self._writeback.detached()
        return t

    def detach_(self):
        """Cut this tensor from the graph in place: it becomes a leaf that does not require grad (a view
        cannot be detached in place, as in PyTorch)."""
        if self._view is not None and (self.requires_grad or self._view[0].requires_grad):
            raise RuntimeError("detach_: can't detach views in-place; use detach() instead")
        self._node, self._out_index, self._requires_grad = None, 0, False
        return self

    def clone(self):
        """A differentiable copy."""
        from minigrad.ops.cast import clone

        return clone(self)

    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        """`t.requires_grad = flag` is `requires_grad_(flag)`: only float leaves may turn it on."""
        self.requires_grad_(flag)

    def requires_grad_(self, flag=True):
        if flag and self.data.dtype.kind != "f":
            raise TypeError(f"requires_grad_: only float tensors can require grad, got {self.dtype}")
        if not flag and self._node is not None:
            raise RuntimeError("requires_grad_: cannot turn off grad on a non-leaf; use .detach()")
        self._requires_grad = bool(flag)
        return self

    def retain_grad(self):
        """Keep `.grad` for this non-leaf tensor after backward: its grad after all its hooks (as
        PyTorch, whatever the order of registration)."""
        if self._node is None:
            return self
        self._tensor_hooks().retain = weakref.ref(self)
        return self

    def register_hook(self, hook):
        """hook(grad) -> None or a Tensor (same shape and dtype) replacing grad, called with grad mode
        off once this tensor's grad in a backward is summed over its uses: for a non-leaf before it
        flows on (None if it got none), for a leaf before it is accumulated into `.grad`. Hooks run
        in registration order; the returned handle's `.remove()` unregisters this one."""
        return autograd_hooks.add(self._tensor_hooks().pre, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """hook(tensor), for a leaf, after a backward committed the new `.grad` (not in
        autograd.grad). Returns a handle with `.remove()`."""
        if self._requires_grad and self._node is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        return autograd_hooks.add(self._tensor_hooks().post, hook)

    def _tensor_hooks(self):
        """This tensor's TensorHooks, created on first need: a leaf's own, a non-leaf's on its node."""
        if not self._requires_grad:
            if autograd_hooks.is_discarding():          # a checkpointed function's no-grad forward
                return autograd_hooks.TensorHooks()
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        node = self._node
        if node is None:
            if self._hooks is None:
                self._hooks = autograd_hooks.TensorHooks()
                autograd_hooks.leaf_hooks_exist = True
            return self._hooks
        if node.hooks is None:
            node.hooks = {}
        entry = node.hooks.get(self._out_index)
        if entry is None:
            entry = node.hooks[self._out_index] = autograd_hooks.TensorHooks()
        return entry

    def to(self, *args, dtype=None, device=None, copy=False, non_blocking=False):
        """Cast to `dtype` (a differentiable op when the result is float), as torch's `to(dtype)`,
        `to(other_tensor)` (its dtype), `to(device)`, `to(device, dtype)`; the device must be the CPU.
        Returns `self` when nothing changes (unless `copy=True`)."""
        from minigrad.ops.cast import cast

        dtype = to_args("to", args, dtype, device)
        out = self if dtype is None else cast(self, dtype)
        return self.clone() if copy and out is self else out

    def cpu(self):
        return self

    def float(self):
        return self.to(float32)

    def double(self):
        return self.to(float64)

    def long(self):
        return self.to(int64)

    def int(self):
        return self.to(int32)

    def short(self):
        return self.to(int16)

    def char(self):
        return self.to(int8)

    def byte(self):
        return self.to(uint8)

    def bool(self):
        return self.to(bool_)

    def type_as(self, other):
        return self.to(other.dtype)

    def new_tensor(self, data, dtype=None, requires_grad=False):
        """A new tensor of `data` (copied), by default of this tensor's dtype."""
        return tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, requires_grad=False):
        return zeros(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, requires_grad=False):
        return ones(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, requires_grad=False):
        return full(size, fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, requires_grad=False):
        """torch's new_empty: a tensor of `size` and this dtype (zero-filled here)."""
        return zeros(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)

    @property
    def device(self):
        """Always "cpu" (minigrad has no other device; `.to("cpu")` is accepted)."""
        return "cpu"

    def backward(self, gradient=None, retain_graph=False):
        """Accumulate d(self)/d(leaf) (times `gradient` for non-scalars) into every leaf's `.grad`."""
        engine.backward([self], None if gradient is None else [gradient], retain_graph=retain_graph)

    def zero_grad_(self):
        self.grad = None

    @property
    def _version(self):
        """How many in-place writes this tensor's memory has seen (through any alias)."""
        return 0 if self._vc is None else self._vc.value

    def _counter(self):
        """The version counter, created on first need (most tensors are never aliased or saved)."""
        if self._vc is None:
            self._vc = _Version()
        return self._vc

    def _bump_version(self):
        self._counter().value += 1

    # ---- Python protocol --------------------------------------------------------------------
    __hash__ = object.__hash__

    def __bool__(self):
        if self.data.size != 1:
            raise RuntimeError(f"bool of a tensor with {self.data.size} elements is ambiguous")
        return bool(self.data.reshape(()))

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.data.dtype.kind not in "iu" or self.data.size != 1:
            raise TypeError("only integer tensors of one element can be converted to an index")
        return int(self.item())

    def __array__(self, dtype=None, copy=None):
        """`np.asarray(t)` shares the array; `np.array(t)` (copy=True) copies it, as for a torch tensor."""
        arr = self.data if dtype is None else self.data.astype(dtype, copy=False)
        if copy is False and arr is not self.data:
            raise ValueError(f"__array__: cannot convert {self.dtype} to {np.dtype(dtype)} without a copy")
        return arr.copy() if copy and arr is self.data else arr

    def __format__(self, spec):
        """A 0-d tensor formats as its value (`f"{loss:.4f}"`), as in PyTorch."""
        if self.data.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __getstate__(self):
        """Pickling and deepcopy keep the values, requires_grad, .grad and name; the copy is a new
        leaf (PyTorch's too), without the graph, the saved tensors or the aliasing of a view."""
        return {"data": self.data, "grad": self._grad, "requires_grad": self._requires_grad,
                "name": self.name}

    def __copy__(self):
        """copy.copy: a leaf sharing the array and its version counter, keeping requires_grad (PyTorch's
        shallow copy shares the storage too)."""
        t = type(self)._from_op(self.data)
        t._vc = self._counter()
        t._requires_grad = self._requires_grad
        t._writeback = None if self._writeback is None else self._writeback.detached()
        t.name = self.name
        return t

    def __setstate__(self, state):
        self.data = state["data"]
        self._grad = state["grad"]
        self._requires_grad = state["requires_grad"]
        self._node = None
        self._out_index = 0
        self._vc = None
        self._view = None
        self._writeback = None
        self._hooks = None
        self.name = state["name"]

    def __repr__(self):
        body = np.array2string(self.data, precision=4, separator=", ", threshold=64, edgeitems=3,
                               prefix="tensor(")
        extra = ""
        # PyTorch's suffixes: the size of an empty tensor that is not 1-d, and the dtype unless it
        # is a default one (float32; for a non-empty tensor also int64 and bool)
        if self.data.size == 0:
            if self.data.ndim != 1:
                extra += f", size={self.shape}"
            if self.data.dtype != float32:
                extra += f", dtype={self.data.dtype}"
        elif self.data.dtype not in (float32, int64, bool_):
            extra += f", dtype={self.data.dtype}"
        if self._node is not None:
            extra += f", grad_fn=<{self._node.name}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"


# ---- constructors -----------------------------------------------------------------------------
def _shape(shape):
    """zeros(2, 3) and zeros((2, 3)) both mean (2, 3); sizes must be integers (2.5 raises)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    try:
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"size must be a tuple of ints, got {tuple(shape)}") from None


def tensor(data, dtype=None, requires_grad=False):
    """A new Tensor from a list, scalar or array (copied). Python floats become float32."""
    if isinstance(data, Tensor):
        data = data.data
    if isinstance(data, (np.ndarray, np.generic)):
        data = np.array(data, copy=True)
        return Tensor(data, dtype=dtype, requires_grad=requires_grad)
    t = Tensor(data, dtype=dtype, requires_grad=requires_grad)
    return t


def from_numpy(arr):
    """A Tensor sharing `arr`'s memory (when it is C-contiguous); keeps its dtype."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy array, got {type(arr).__name__}")
    return Tensor(arr)


def as_tensor(data, dtype=None):
    """Like torch.as_tensor: `data` itself when it is a Tensor of `dtype` (or a differentiable cast
    of it), a Tensor sharing a numpy array's memory when its dtype and layout allow (as `from_numpy`),
    else a new tensor as `tensor(data, dtype)` makes."""
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    if isinstance(data, np.ndarray):
        return Tensor(data, dtype=dtype)
    return tensor(data, dtype=dtype)


def empty(*shape, dtype=float32, requires_grad=False):
    """An uninitialized tensor (its values are whatever the memory held)."""
    return Tensor(np.empty(_shape(shape), dtype=dtype), requires_grad=requires_grad)


def zeros(*shape, dtype=float32, requires_grad=False):
    return Tensor(np.zeros(_shape(shape), dtype=dtype), requires_grad=requires_grad)


def ones(*shape, dtype=float32, requires_grad=False):
    return Tensor(np.ones(_shape(shape), dtype=dtype), requires_grad=requires_grad)


def full(shape, fill_value, dtype=float32, requires_grad=False):
    shape = (shape,) if np.isscalar(shape) else tuple(shape)
    return Tensor(np.full(shape, fill_value, dtype=dtype), requires_grad=requires_grad)


def randn(*shape, dtype=float32, requires_grad=False, generator=None):
    """Standard normal samples from `generator` (default: minigrad's global one, see manual_seed)."""
    gen = generator or _random.default_generator()
    return Tensor(gen.standard_normal(_shape(shape)).astype(_float_dtype("randn", dtype)),
                  requires_grad=requires_grad)


def rand(*shape, dtype=float32, requires_grad=False, generator=None):
    """Uniform [0, 1) samples from `generator` (default: minigrad's global one)."""
    gen = generator or _random.default_generator()
    return Tensor(gen.random(_shape(shape)).astype(_float_dtype("rand", dtype)), requires_grad=requires_grad)


def _float_dtype(op, dtype):
    """Random samples exist in float32 / float64 only (an int dtype would truncate them to 0)."""
    if np.dtype(dtype) not in _FLOATS:
        raise TypeError(f"{op}: dtype must be float32 or float64, got {np.dtype(dtype)}")
    return dtype


def arange(start, end=None, step=1, dtype=None, requires_grad=False):
    """Like torch.arange: int64 when every argument is an int, else float32."""
    if end is None:
        start, end = 0, start
    start, end, step = (scalar_value(v) for v in (start, end, step))
    if dtype is None:
        ints = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        dtype = int64 if ints else float32
    if np.dtype(dtype).kind == "f":   # start + i * step in float64, as PyTorch: numpy's float32
        arr = np.arange(start, end, step, dtype=float64).astype(dtype)    # arange drifts by ulps
    else:
        arr = np.arange(start, end, step, dtype=dtype)
    return Tensor(arr, requires_grad=requires_grad)


def linspace(start, end, steps, dtype=float32, requires_grad=False):
    """`steps` evenly spaced values from `start` to `end` (both included), as torch.linspace: the
    first half start + i * step, the second half end - (steps - 1 - i) * step, with step =
    (end - start) / (steps - 1) in the result dtype. float32 is rounded as PyTorch's CPU kernel
    does (a fused multiply-add: the product exact in float64, one rounding); float64 within 1 ulp."""
    steps = check_int("linspace", "steps", scalar_value(steps), low=0)
    start, end = (check_number("linspace", name, scalar_value(v))
                  for name, v in (("start", start), ("end", end)))
    dtype = np.dtype(dtype)
    if dtype not in _FLOATS:
        raise TypeError(f"linspace: dtype must be float32 or float64, got {dtype}")
    start, end = dtype.type(start), dtype.type(end)
    if steps <= 1:
        return Tensor(np.full(steps, start, dtype=dtype), requires_grad=requires_grad)
    step = (end - start) / dtype.type(steps - 1)
    i = np.arange(steps)
    n = np.minimum(i, steps - 1 - i).astype(dtype)        # multiples of step from the nearer end
    # the products of two float32 are exact in float64, so this rounds once, as a float32 fma does
    exact = n.astype(float64) * float64.type(step)
    arr = np.where(i < steps // 2, float64.type(start) + exact, float64.type(end) - exact).astype(dtype)
    return Tensor(arr, requires_grad=requires_grad)


def eye(n, m=None, dtype=float32, requires_grad=False):
    """The n x m (default n x n) identity matrix."""
    n = check_int("eye", "n", n, low=0)
    m = n if m is None else check_int("eye", "m", m, low=0)
    return Tensor(np.eye(n, m, dtype=dtype), requires_grad=requires_grad)


def randint(low, high=None, size=None, *, dtype=int64, requires_grad=False, generator=None):
    """Integers uniform in [low, high) of shape `size` from `generator` (default: minigrad's global
    one, see manual_seed); `randint(high, size)` draws from [0, high), as torch.randint."""
    if size is None and isinstance(high, (tuple, list)):
        high, size = None, high                             # randint(high, size)
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint: missing the size argument, e.g. randint(0, 10, (3,))")
    low, high = (check_int("randint", name, scalar_value(v))
                 for name, v in (("low", low), ("high", high)))
    if low >= high:
        raise ValueError(f"randint: expected low < high, got low={low}, high={high}")
    size = _shape((size,) if isinstance(size, (int, np.integer)) else tuple(size))
    gen = generator or _random.default_generator()
    arr = gen.integers(low, high, size=size, dtype=np.int64)
    return Tensor(arr if np.dtype(dtype) == int64 else arr.astype(dtype), requires_grad=requires_grad)


def _like(fn):
    def make(t, dtype=None, requires_grad=False, **kw):
        return fn(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad, **kw)
    make.__name__ = fn.__name__ + "_like"
    make.__doc__ = f"`{fn.__name__}` with the shape (and by default dtype) of `t`."
    return make


zeros_like = _like(zeros)
ones_like = _like(ones)
randn_like = _like(randn)
rand_like = _like(rand)


def full_like(t, fill_value, dtype=None, requires_grad=False):
    return full(t.shape, fill_value, dtype=dtype or t.dtype, requires_grad=requires_grad)
