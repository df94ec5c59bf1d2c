"""PyTorch checkpoint files (what `torch.save` writes since torch 1.6), read and written without torch.

The format: a zip archive whose members, all under one top folder `<name>/`, are stored uncompressed:
  data.pkl     the saved object, pickled (protocol 2). A tensor is the call
               torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)
               and its storage the persistent id ('storage', torch.<Type>Storage, key, location, numel)
  data/<key>   the raw elements of each storage, in the order the `byteorder` member names
  byteorder    b'little' or b'big';  version  b'3\\n'  (newer files add .format_version, ...)

`read_torch_file` never runs code named by a file: its unpickler resolves only the globals
`torch.load(weights_only=True)` allows for tensors and plain containers (the tensor rebuild
functions, storage types, dtypes, OrderedDict, set ...) to inert stand-ins, and refuses any other
global (`os.system`, `builtins.eval`, ...) with a CheckpointError naming it. Tensors become numpy
arrays (offset, sizes and strides honoured; C order), read straight from the file one at a time.
`write_torch_file` writes the same format that `torch.load(weights_only=True)` reads.
`save` / `load` are `minigrad.save` / `minigrad.load`.
"""
import collections
import contextlib
import io
import math
import os
import pickle
import pickletools
import struct
import zipfile
import zlib

import numpy as np

from minigrad.io import CheckpointError, atomic_output, bf16_to_float32
from minigrad.tensor import Tensor

# element types: storage class name or dtype name -> numpy dtype code ('bf16': raw 16 bits, widened)
_STORAGES = {"DoubleStorage": "<f8", "FloatStorage": "<f4", "HalfStorage": "<f2", "BFloat16Storage": "bf16",
             "LongStorage": "<i8", "IntStorage": "<i4", "ShortStorage": "<i2", "CharStorage": "i1",
             "ByteStorage": "u1", "BoolStorage": "?", "ComplexFloatStorage": "<c8",
             "ComplexDoubleStorage": "<c16"}
_DTYPES = {"float64": "<f8", "float32": "<f4", "float16": "<f2", "bfloat16": "bf16", "int64": "<i8",
           "int32": "<i4", "int16": "<i2", "int8": "i1", "uint8": "u1", "bool": "?", "uint16": "<u2",
           "uint32": "<u4", "uint64": "<u8", "complex64": "<c8", "complex128": "<c16"}
_WRITABLE = {np.dtype(code).str.lstrip("<|"): name for name, code in _STORAGES.items() if code != "bf16"}
_MAX_PICKLE = 256 * 1024 * 1024       # data.pkl of a real checkpoint is kilobytes to a few megabytes
_MAX_EXPANSION = 1 << 30              # bytes a stride-0 (expanded) tensor may grow to beyond 16x its data
_ALIGN = 64                           # storages start at multiples of this offset, as torch writes them
# pickle opcodes of plain data, containers, globals (through find_class) and storages: those of
# torch.load(weights_only=True), plus their protocol 3/4 forms. INST/OBJ/EXT* and buffers are refused.
_OPCODES = frozenset(
    "PROTO FRAME STOP MARK GLOBAL STACK_GLOBAL NEWOBJ REDUCE BUILD APPEND APPENDS SETITEM SETITEMS "
    "TUPLE TUPLE1 TUPLE2 TUPLE3 NONE NEWFALSE NEWTRUE EMPTY_TUPLE EMPTY_LIST EMPTY_DICT EMPTY_SET "
    "ADDITEMS FROZENSET BININT BININT1 BININT2 LONG1 LONG4 BINFLOAT BINUNICODE SHORT_BINUNICODE "
    "BINUNICODE8 SHORT_BINSTRING BINBYTES SHORT_BINBYTES BINBYTES8 BINPERSID BINGET LONG_BINGET "
    "BINPUT LONG_BINPUT MEMOIZE".split())
_LEGACY_MAGIC = (0x1950A86A20F9469CFC6C).to_bytes(10, "little")   # torch's pre-1.6 file header


# ----------------------------------------------------------------------------------------------
# what the unpickler hands out: inert objects that refuse pickle's BUILD (state setting)


class _Inert:
    __slots__ = ()

    def __setstate__(self, state):
        raise pickle.UnpicklingError(f"the pickle sets the state of {self!r}, which a checkpoint never does")


class _Callable(_Inert):
    """A function a checkpoint may call (pickle REDUCE), under the name the file uses."""
    __slots__ = ("fn", "name")

    def __init__(self, fn, name):
        self.fn, self.name = fn, name

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return self.name


class _Marker(_Inert):
    """A torch object used only as an argument: a storage type or dtype (`code`: its elements) or
    the Tensor / Parameter class."""
    __slots__ = ("name", "code")

    def __init__(self, name, code=None):
        self.name, self.code = name, code

    def __repr__(self):
        return self.name


class _StorageRef(_Inert):
    """One `data/<key>` member: `code` its element type (None: untyped bytes), `nbytes` its size."""
    __slots__ = ("key", "code", "nbytes")

    def __init__(self, key, code, nbytes):
        self.key, self.code, self.nbytes = key, code, nbytes

    def __repr__(self):
        return f"a bare storage ({self.key!r})"


class _TensorRef(_Inert):
    """A tensor to read once unpickling is done: elements `offset + sum(i_d * stride_d)` of `storage`."""
    __slots__ = ("storage", "code", "offset", "size", "stride", "metadata")

    def __init__(self, storage, code, offset, size, stride, metadata):
        self.storage, self.code, self.offset = storage, code, offset
        self.size, self.stride, self.metadata = size, stride, metadata


def _fail(why):
    raise pickle.UnpicklingError(why)


def _short(value):
    """repr(value), cut to 80 characters (a hostile file may hold a huge value)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _counts(name, value, n=None):
    """`value` (a tuple or list of ints >= 0, of length `n`) as a tuple; UnpicklingError otherwise."""
    if not isinstance(value, (tuple, list)) or not all(type(v) is int and v >= 0 for v in value):
        _fail(f"tensor {name} {_short(value)} is not a tuple of integers >= 0")
    if n is not None and len(value) != n:
        _fail(f"tensor size and stride differ in length: {n} vs {len(value)}")
    if len(value) > 32:
        _fail(f"tensor has {len(value)} dimensions (numpy allows 32)")
    return tuple(value)


def _tensor_ref(storage, offset, size, stride, metadata=None, dtype=None):
    """A _TensorRef from the arguments of torch's tensor rebuild functions, every one checked: the
    layout must lie inside the storage, and may not expand it (stride 0) past _MAX_EXPANSION bytes."""
    if type(storage) is not _StorageRef:
        _fail(f"tensor storage {_short(storage)} is not a storage")
    if dtype is not None and (type(dtype) is not _Marker or dtype.name not in _DTYPE_NAMES):
        _fail(f"tensor dtype {_short(dtype)} is not a dtype")
    code = storage.code if dtype is None else dtype.code
    if code is None:
        _fail(f"tensor dtype {dtype or 'of an untyped storage'} has no numpy equivalent")
    if type(offset) is not int or offset < 0:
        _fail(f"tensor storage offset {_short(offset)} is not an integer >= 0")
    size = _counts("size", size)
    stride = _counts("stride", stride, len(size))
    if metadata is not None and (not isinstance(metadata, dict) or not set(metadata) <= {"neg", "conj"}):
        _fail(f"tensor metadata {_short(metadata)} is not understood (only the neg / conj bits are)")
    span, isz = _extent(size, stride), _itemsize(code)
    if (offset + span) * isz > storage.nbytes or offset * isz > storage.nbytes:
        _fail(f"tensor of size {size}, stride {stride}, offset {offset} needs {(offset + span) * isz} bytes "
              f"of storage {storage.key!r}, which holds {storage.nbytes}")
    if math.prod(n for n in size if n) * 16 > np.iinfo(np.intp).max:     # numpy: even when one size is 0
        _fail(f"tensor of size {_short(size)} has sizes too large for a numpy array")
    if math.prod(size) * isz > max(_MAX_EXPANSION, 16 * span * isz):
        _fail(f"tensor of size {size} would expand {span * isz} stored bytes to {math.prod(size) * isz}")
    return _TensorRef(storage, code, offset, size, stride, metadata or {})


def _rebuild_v1(storage, offset, size, stride):
    return _tensor_ref(storage, offset, size, stride)


def _rebuild_v2(storage, offset, size, stride, requires_grad, hooks, metadata=None):
    return _tensor_ref(storage, offset, size, stride, metadata)


def _rebuild_v3(storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
    return _tensor_ref(storage, offset, size, stride, metadata, dtype)


def _parameter(data, requires_grad=True, hooks=None, state=None):
    if type(data) is not _TensorRef:
        _fail(f"a Parameter holds {type(data).__name__}, not a tensor")
    return data


def _from_type(func, new_type, args, state=None):
    """torch._tensor._rebuild_from_type_v2 (a tensor with Python attributes; they are dropped)."""
    if new_type not in (_TENSOR, _PARAMETER) or type(func) is not _Callable or func.fn not in _REBUILDERS:
        _fail(f"a tensor of type {_short(new_type)} rebuilt by {_short(func)}: only plain tensors load")
    return func(*args)


def _encode(text, encoding="utf-8"):
    """_codecs.encode as protocol 2 pickles bytes: (latin-1 text, 'latin1')."""
    if type(text) is not str or encoding not in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
        _fail(f"_codecs.encode({type(text).__name__}, {encoding!r}) is not a bytes literal")
    return text.encode(encoding)


def _bytearray(text=b"", encoding=None):
    if isinstance(text, int):
        _fail("bytearray(<int>) would allocate memory the file does not hold")
    return bytearray(text) if encoding is None else bytearray(_encode(text, encoding))


def _device(kind, index=None):
    return kind if index is None else f"{kind}:{index}"


def _size(dims=()):
    return tuple(dims)


_REBUILDERS = (_rebuild_v1, _rebuild_v2, _rebuild_v3)
_TENSOR, _PARAMETER = _Marker("torch.Tensor"), _Marker("torch.nn.parameter.Parameter")
_DTYPE_NAMES = {f"torch.{name}" for name in _DTYPES} | {
    f"torch.{n}" for n in ("float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz",
                           "float8_e8m0fnu", "complex32", "qint8", "quint8", "qint32")}


def _allowed_globals():
    """(module, name) -> what the unpickler returns for that global."""
    # classes only where pickle may need a class (NEWOBJ): immutable builtin types, which BUILD
    # cannot change; collections.Counter is a Python class, so it is wrapped
    table = {("collections", "OrderedDict"): collections.OrderedDict,
             ("collections", "Counter"): _Callable(collections.Counter, "collections.Counter"),
             ("builtins", "set"): set, ("builtins", "frozenset"): frozenset, ("builtins", "complex"): complex,
             ("builtins", "bytearray"): _Callable(_bytearray, "builtins.bytearray"),
             ("_codecs", "encode"): _Callable(_encode, "_codecs.encode"),
             ("torch", "Size"): _Callable(_size, "torch.Size"),
             ("torch", "device"): _Callable(_device, "torch.device"),
             ("torch", "Tensor"): _TENSOR, ("torch.nn.parameter", "Parameter"): _PARAMETER,
             ("torch._tensor", "_rebuild_from_type_v2"): _Callable(_from_type, "_rebuild_from_type_v2")}
    for name, fn in (("_rebuild_tensor", _rebuild_v1), ("_rebuild_tensor_v2", _rebuild_v2),
                     ("_rebuild_tensor_v3", _rebuild_v3), ("_rebuild_parameter", _parameter),
                     ("_rebuild_parameter_with_state", _parameter)):
        table["torch._utils", name] = _Callable(fn, f"torch._utils.{name}")
    for name, code in _STORAGES.items():
        table["torch", name] = table["torch.cuda", name] = _Marker(f"torch.{name}", code)
    for module in ("torch", "torch.storage"):
        table[module, "UntypedStorage"] = _Marker("torch.UntypedStorage", None)
    for full in _DTYPE_NAMES:
        table["torch", full[6:]] = _Marker(full, _DTYPES.get(full[6:]))
    return table


_GLOBALS = _allowed_globals()


def _refusal(module, name):
    if module.startswith("torch"):
        return (f"it names {module}.{name}, which minigrad does not load: only dense tensors, numbers, "
                f"strings and plain containers do (no sparse, quantized, meta or nested tensors, tensor "
                f"subclasses or other objects)")
    return (f"it names the global {module}.{name}: a checkpoint may hold only tensors, numbers, strings and "
            f"plain containers, and minigrad never runs code a file names (it may be malicious)")


# ----------------------------------------------------------------------------------------------
# reading


def _itemsize(code):
    return 2 if code == "bf16" else np.dtype(code).itemsize


def _extent(size, stride):
    """Elements from the first to one past the last a layout touches (0 for an empty tensor)."""
    if 0 in size:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(size, stride))


def _c_contiguous(size, stride):
    expected = 1
    for n, s in zip(reversed(size), reversed(stride)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


class _Archive:
    """The members of a torch zip file (`f`, a seekable binary file named `name`), all stored
    uncompressed (as torch writes them): read straight from the file at their offset, each checked
    against its CRC-32."""

    def __init__(self, f, name):
        self.f, self.name, self.checked = f, name, set()
        self.length = f.seek(0, io.SEEK_END)
        f.seek(0)
        head = f.read(512)
        f.seek(0)
        try:
            self.zip = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, OverflowError,
                struct.error, NotImplementedError) as e:
            raise self._not_zip(head, e) from None
        names = self.zip.namelist()
        self.prefix = names[0].split("/", 1)[0] if names else ""
        if self.has("constants.pkl"):
            raise CheckpointError(f"{name} is a TorchScript archive (torch.jit.save), not a torch.save file; "
                                  f"save the model's state_dict() with torch.save instead")
        if not self.has("data.pkl"):
            raise self.bad(f"it has no {self.prefix or '<name>'}/data.pkl")

    def _not_zip(self, head, error):
        if head[:1] == b"\x80" and _LEGACY_MAGIC in head[:16] or head[257:262] == b"ustar":
            return CheckpointError(
                f"{self.name} is a legacy PyTorch file (written by torch < 1.6 or with "
                f"_use_new_zipfile_serialization=False), which minigrad does not read; re-save it with a "
                f"recent torch: torch.save(torch.load(path, weights_only=True), new_path)")
        return self.bad(f"not a zip archive: {error}")

    def bad(self, why):
        return CheckpointError(f"{self.name} is not a readable PyTorch checkpoint ({why}); it is truncated, "
                               f"corrupted or of another format")

    def has(self, member):
        return f"{self.prefix}/{member}" in self.zip.NameToInfo

    def info(self, member):
        info = self.zip.NameToInfo.get(f"{self.prefix}/{member}")
        if info is None:
            raise self.bad(f"it has no member {self.prefix}/{member}")
        if info.flag_bits & 1 or info.compress_type != zipfile.ZIP_STORED:
            raise self.bad(f"member {info.filename} is compressed or encrypted; torch.save stores members as "
                           f"they are")
        return info

    def read(self, member, start=0, size=None):
        """Bytes [start, start + size) of a member (default: to its end) as a uint8 array."""
        info = self.info(member)
        size = info.file_size - start if size is None else size
        begin = self._data_start(info)
        if start + size > info.file_size or begin + info.file_size > self.length:
            raise self.bad(f"member {info.filename} ({info.file_size} bytes at byte {begin}) does not hold "
                           f"bytes {start}..{start + size} inside the {self.length}-byte file")
        buf = np.empty(size, np.uint8)
        self._read_into(begin + start, buf, info)
        if size == info.file_size:
            self._check_crc(info, zlib.crc32(buf))
        return buf

    def _data_start(self, info):
        if not 0 <= info.header_offset <= self.length - 30:
            raise self.bad(f"member {info.filename} starts at byte {info.header_offset}, outside the file")
        self.f.seek(info.header_offset)
        head = self.f.read(30)
        if head[:4] != b"PK\x03\x04":
            raise self.bad(f"member {info.filename} has no valid local header")
        n_name, n_extra = struct.unpack_from("<HH", head, 26)
        return info.header_offset + 30 + n_name + n_extra

    def _read_into(self, pos, buf, info):
        self.f.seek(pos)
        view, got = memoryview(buf), 0
        while got < len(buf):
            n = self.f.readinto(view[got:])
            if not n:
                raise self.bad(f"member {info.filename} ends after {got} of {len(buf)} bytes")
            got += n

    def _check_crc(self, info, crc):
        if info.CRC and crc != info.CRC:      # 0: written with torch's CRC computation turned off
            raise self.bad(f"member {info.filename} fails its CRC-32 check")
        self.checked.add(info.filename)

    def check_crc(self, member):
        """Check a member not read whole, streaming it in 1 MiB pieces."""
        info = self.info(member)
        if info.filename in self.checked:
            return
        crc, pos, left = 0, self._data_start(info), info.file_size
        while left:
            buf = np.empty(min(left, 1 << 20), np.uint8)
            self._read_into(pos, buf, info)
            crc, pos, left = zlib.crc32(buf, crc), pos + len(buf), left - len(buf)
        self._check_crc(info, crc)


class _Unpickler(pickle.Unpickler):
    """Resolves only `_GLOBALS`; storages become `_StorageRef`s checked against their members."""

    def __init__(self, data, archive):
        super().__init__(io.BytesIO(data))
        self.archive = archive

    def find_class(self, module, name):
        found = _GLOBALS.get(("builtins" if module == "__builtin__" else module, name))
        if found is None:
            raise CheckpointError(f"{self.archive.name}: refused to load: {_refusal(module, name)}")
        return found

    def persistent_load(self, pid):
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] in ("storage", b"storage")):
            _fail(f"persistent id {_short(pid)} is not a storage reference")
        kind, key, _, numel = pid[1:]             # the location ('cpu', 'cuda:0' ...) does not matter
        if type(kind) is not _Marker or not kind.name.endswith("Storage"):
            _fail(f"storage type {_short(kind)} is not a storage type")
        if type(key) is not str or type(numel) is not int or numel < 0:
            _fail(f"storage key {_short(key)} / size {_short(numel)} is not a string / an integer >= 0")
        nbytes = numel * (1 if kind.code is None else _itemsize(kind.code))
        info = self.archive.info(f"data/{key}")
        if info.file_size != nbytes:
            _fail(f"storage {key!r} should hold {nbytes} bytes ({numel} x {kind.name}), its member holds "
                  f"{info.file_size}")
        return _StorageRef(key, kind.code, nbytes)


def _check_opcodes(data, archive):
    try:
        for op, _, pos in pickletools.genops(data):
            if op.name not in _OPCODES:
                raise archive.bad(f"data.pkl uses the pickle opcode {op.name} (at byte {pos}), which "
                                  f"checkpoints never contain")
    except CheckpointError:                             # a ValueError too: not to be wrapped again
        raise
    except (ValueError, EOFError, struct.error) as e:   # UnicodeDecodeError is a ValueError
        raise archive.bad(f"data.pkl is not a valid pickle: {e}") from None


def _unpickle(archive):
    if archive.info("data.pkl").file_size > _MAX_PICKLE:
        raise archive.bad(f"data.pkl is larger than {_MAX_PICKLE} bytes")
    data = archive.read("data.pkl").tobytes()
    _check_opcodes(data, archive)
    try:
        return _Unpickler(data, archive).load()
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the bytes make pickle raise, the file is bad
        raise archive.bad(f"data.pkl: {type(e).__name__}: {str(e)[:300]}") from None


def _raw_dtype(code, big):
    """How a storage's elements are read: bf16 as its 16 bits, bool as bytes (any nonzero is True)."""
    dtype = np.dtype({"bf16": "<u2", "?": "u1"}.get(code, code))
    return dtype.newbyteorder(">") if big else dtype


def _native(raw, code, big, float_dtype):
    """Elements as read (`code`, byte order `big`) as a native array: bf16 -> float32, bool 0/1,
    floats cast to `float_dtype` when given."""
    if code == "bf16":
        arr = bf16_to_float32(raw)
    elif code == "?":
        arr = raw != 0
    else:
        arr = raw.astype(raw.dtype.newbyteorder("="), copy=False) if big else raw
    if float_dtype is not None and arr.dtype.kind == "f":
        arr = arr.astype(float_dtype, copy=False)
    return arr


class _Resolver:
    """Replaces every _TensorRef of an unpickled object by its array (or `convert(array)`),
    building new containers; shared objects stay shared."""
    _CONTAINERS = (dict, collections.OrderedDict, collections.Counter, list, tuple, set, frozenset)
    _PLAIN = (type(None), bool, int, float, complex, str, bytes, bytearray)

    def __init__(self, archive, float_dtype, convert):
        self.archive, self.float_dtype, self.convert = archive, float_dtype, convert
        self.big = self._byteorder() == "big"
        self.memo, self.active, self.storages = {}, set(), set()
        # bytes the file's tensors may make in all: each tensor's own limit (_tensor_ref) does not stop
        # a small file from naming the same stored bytes many times (a tensor per pickled call)
        self.limit = self.budget = max(_MAX_EXPANSION, 16 * archive.length)

    def _byteorder(self):
        if not self.archive.has("byteorder"):
            return "little"                   # files of older torch, written little-endian
        order = self.archive.read("byteorder").tobytes()
        if order not in (b"little", b"big"):
            raise self.archive.bad(f"byteorder is {order[:20]!r}, not b'little' or b'big'")
        return order.decode()

    def resolve(self, obj):
        try:
            out = self._resolve(obj)
        except RecursionError:
            raise self.archive.bad("its containers are nested too deeply") from None
        for key in sorted(self.storages):     # storages no tensor read whole: their CRC still counts
            self.archive.check_crc(f"data/{key}")
        return out

    def _resolve(self, obj):
        if id(obj) in self.memo:
            return self.memo[id(obj)]
        kind = type(obj)
        if kind in self._PLAIN:
            return obj
        if kind is _TensorRef:
            out = self._tensor(obj)
        elif kind in self._CONTAINERS:
            out = self._container(obj, kind)
        elif kind is _Marker and obj.name in _DTYPE_NAMES:
            out = obj.name                    # a torch dtype stored as a value: its name, 'torch.float32'
        else:
            raise self.archive.bad(f"it holds {_short(obj)} ({kind.__name__}) outside a tensor")
        self.memo[id(obj)] = out
        return out

    def _container(self, obj, kind):
        if id(obj) in self.active:
            raise self.archive.bad("a container holds itself")
        self.active.add(id(obj))
        mapping = isinstance(obj, dict)
        items = [(self._resolve(k), self._resolve(v)) for k, v in obj.items()] if mapping else \
            [self._resolve(v) for v in obj]
        attrs = {k: self._resolve(v) for k, v in vars(obj).items()} if hasattr(obj, "__dict__") else {}
        self.active.discard(id(obj))
        try:
            out = kind(items)
        except TypeError as e:                # an array as a dict key or set member (unhashable)
            raise self.archive.bad(f"a tensor is used as a dict key or set member ({e})") from None
        if attrs:
            out.__dict__.update(attrs)        # attributes, e.g. a state dict's _metadata
        return out

    def _tensor(self, ref):
        """The array of one tensor: the bytes its layout spans, read from its storage member."""
        code, size, stride = ref.code, ref.size, ref.stride
        raw_dtype = _raw_dtype(code, self.big)
        isz, span = raw_dtype.itemsize, _extent(size, stride)
        self.budget -= math.prod(size) * isz
        if self.budget < 0:
            raise self.archive.bad(f"its tensors would take more than {self.limit} bytes of memory, the "
                                   f"same stored bytes named by many tensors")
        member = f"data/{ref.storage.key}"
        if span:
            buf = self.archive.read(member, ref.offset * isz, span * isz)
        else:
            buf = np.empty(0, np.uint8)
        if span * isz != ref.storage.nbytes:
            self.storages.add(ref.storage.key)
        raw = buf.view(raw_dtype)
        if span and not _c_contiguous(size, stride):
            strides = [s * isz if n > 1 else 0 for n, s in zip(size, stride)]
            raw = np.lib.stride_tricks.as_strided(raw, size, strides, writeable=False).copy()
        arr = _native(raw.reshape(size), code, self.big, self.float_dtype)
        if ref.metadata.get("neg") and arr.dtype.kind not in "fic":
            raise self.archive.bad(f"a {arr.dtype} tensor is marked negated")
        if ref.metadata.get("neg"):
            arr = np.negative(arr)
        if ref.metadata.get("conj"):
            arr = np.conj(arr)
        return arr if self.convert is None else self.convert(arr)


def _source_name(source):
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return "<bytes>"
    return str(getattr(source, "name", "<file>"))


@contextlib.contextmanager
def _binary_input(source):
    """A seekable binary file for a path, bytes or a file object (a non-seekable one is read into
    memory); a file this opened is closed afterwards."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield f
    elif isinstance(source, (bytes, bytearray, memoryview)):
        yield io.BytesIO(source)
    else:
        seekable = getattr(source, "seekable", lambda: False)()
        yield source if seekable and hasattr(source, "readinto") else io.BytesIO(source.read())


def read_torch_file(source, *, float_dtype=None, convert=None):
    """The object a torch.save file holds, its tensors as numpy arrays (C order; bf16 widened to
    float32; float16/32/64 kept, or every float cast to `float_dtype` when given), or as
    `convert(array)`. `source`: a path, bytes, or a binary file object. Refuses (CheckpointError)
    any global but tensors' and plain containers' (no code named by the file runs), and every
    truncated, corrupted, legacy (torch < 1.6) or inconsistent file."""
    float_dtype = None if float_dtype is None else np.dtype(float_dtype)
    with _binary_input(source) as f:
        archive = _Archive(f, _source_name(source))
        return _Resolver(archive, float_dtype, convert).resolve(_unpickle(archive))


def read_torch_state_dict(source, *, float_dtype=None):
    """name -> array of a torch.save file holding a flat state dict; CheckpointError naming the
    file and entry for another top level, a non-string key or a value that is not a tensor."""
    state = read_torch_file(source, float_dtype=float_dtype)
    name = _source_name(source)
    if not isinstance(state, dict):
        raise CheckpointError(f"{name} holds a {type(state).__name__}, not a state dict")
    for k, v in state.items():
        where = f"{name}: state dict entry {k!r}"
        if not isinstance(k, str):
            raise CheckpointError(f"{where}: its key is of type {type(k).__name__}, not a string")
        if not isinstance(v, np.ndarray):
            raise CheckpointError(f"{where} holds a value of type {type(v).__name__}, not a tensor (only "
                                  f"a flat name -> tensor state dict loads)")
    return dict(state)


# ----------------------------------------------------------------------------------------------
# writing


class _Pickler:
    """data.pkl for nested dicts / OrderedDicts / lists / tuples of None, bool, int, float, str,
    bytes and arrays (numpy or minigrad Tensors): protocol 2, each array a torch tensor whose
    storage (`self.storages`: [(key, little-endian C-order array)]) is written beside it. The
    same array object twice shares one storage."""

    def __init__(self):
        self.out, self.storages, self._seen, self._active = bytearray(), [], {}, set()

    def dump(self, obj):
        self.out += pickle.PROTO + b"\x02"
        self._save(obj, "obj")
        self.out += pickle.STOP
        return bytes(self.out)

    def _global(self, module, name):
        self.out += pickle.GLOBAL + f"{module}\n{name}\n".encode()

    def _save(self, obj, where):
        if isinstance(obj, (np.ndarray, np.generic, Tensor)):   # first: np.float64 is a float too
            self._tensor(obj, where)
        elif obj is None:
            self.out += pickle.NONE
        elif isinstance(obj, bool):
            self.out += pickle.NEWTRUE if obj else pickle.NEWFALSE
        elif isinstance(obj, int):
            self._int(obj, where)
        elif isinstance(obj, float):
            self.out += pickle.BINFLOAT + struct.pack(">d", obj)
        elif isinstance(obj, str):
            self._str(obj)
        elif isinstance(obj, bytes):           # as protocol 2 pickles bytes
            self._global("_codecs", "encode")
            self._str(obj.decode("latin1"))
            self._str("latin1")
            self.out += pickle.TUPLE2 + pickle.REDUCE
        elif isinstance(obj, (dict, list, tuple)):
            self._container(obj, where)
        else:
            hint = "; save its state_dict()" if hasattr(obj, "state_dict") else ""
            raise TypeError(f"minigrad.save: cannot store a {type(obj).__name__} at {where}{hint}")

    def _int(self, v, where):
        if 0 <= v < 256:
            self.out += pickle.BININT1 + bytes([v])
        elif 0 <= v < 65536:
            self.out += pickle.BININT2 + struct.pack("<H", v)
        elif -2 ** 31 <= v < 2 ** 31:
            self.out += pickle.BININT + struct.pack("<i", v)
        else:
            raw = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
            if len(raw) > 255:
                raise TypeError(f"minigrad.save: the int at {where} has more than 2000 bits")
            self.out += pickle.LONG1 + bytes([len(raw)]) + raw

    def _str(self, s):
        raw = s.encode("utf-8", "surrogatepass")
        self.out += pickle.BINUNICODE + struct.pack("<I", len(raw)) + raw

    def _seq(self, items, where):
        self.out += pickle.MARK
        for i, v in items:
            self._save(v, f"{where}[{i!r}]")

    def _container(self, obj, where):
        if id(obj) in self._active:
            raise ValueError(f"minigrad.save: {where} contains itself")
        self._active.add(id(obj))
        if isinstance(obj, tuple):
            self._seq(enumerate(obj), where)
            self.out += pickle.TUPLE
        elif isinstance(obj, list):
            self.out += pickle.EMPTY_LIST
            if obj:
                self._seq(enumerate(obj), where)
                self.out += pickle.APPENDS
        else:
            if isinstance(obj, collections.OrderedDict):
                self._global("collections", "OrderedDict")
                self.out += pickle.EMPTY_TUPLE + pickle.REDUCE
            else:
                self.out += pickle.EMPTY_DICT
            if obj:
                self.out += pickle.MARK
                for k, v in obj.items():
                    self._save(k, f"{where} (a key)")
                    self._save(v, f"{where}[{k!r}]")
                self.out += pickle.SETITEMS
        self._active.discard(id(obj))

    def _storage(self, obj, where):
        """(key, storage class name, array) of an array or Tensor, a new storage on first sight."""
        if id(obj) not in self._seen:
            arr = np.asarray(obj.data if isinstance(obj, Tensor) else obj)
            name = _WRITABLE.get(arr.dtype.str.lstrip("<>|="))
            if name is None:
                raise TypeError(f"minigrad.save: the array at {where} has dtype {arr.dtype}, which has no "
                                f"PyTorch storage type (supported: {', '.join(sorted(_WRITABLE))})")
            arr = arr.astype(arr.dtype.newbyteorder("<"), order="C", copy=False)   # 0-d stays 0-d
            key = str(len(self.storages))
            self.storages.append((key, arr))
            self._seen[id(obj)] = (key, name, arr, obj)   # obj kept alive: its id stays unique
        return self._seen[id(obj)][:3]

    def _tensor(self, obj, where):
        key, name, arr = self._storage(obj, where)
        strides = [math.prod(arr.shape[i + 1:]) for i in range(arr.ndim)]   # C order, in elements
        self._global("torch._utils", "_rebuild_tensor_v2")
        self.out += pickle.MARK + pickle.MARK
        self._str("storage")
        self._global("torch", name)
        self._str(key)
        self._str("cpu")
        self._int(arr.size, where)
        self.out += pickle.TUPLE + pickle.BINPERSID
        self._int(0, where)
        for dims in (arr.shape, strides):
            self._seq(enumerate(dims), where)
            self.out += pickle.TUPLE
        self.out += pickle.NEWFALSE
        self._global("collections", "OrderedDict")
        self.out += pickle.EMPTY_TUPLE + pickle.REDUCE + pickle.TUPLE + pickle.REDUCE


def _put(zf, f, name, data):
    """Add one stored member, its data starting at a multiple of _ALIGN bytes (the padding goes in
    an extra field, as torch's writer does)."""
    view = memoryview(data.reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) else data).cast("B")
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type, info.file_size = zipfile.ZIP_STORED, len(view)
    zip64 = len(view) * 1.05 > zipfile.ZIP64_LIMIT    # the rule zipfile applies when opening the member
    pad = -(f.tell() + 30 + len(name.encode()) + (20 if zip64 else 0)) % _ALIGN
    if pad:
        pad += _ALIGN if pad < 4 else 0
        info.extra = b"FB" + struct.pack("<H", pad - 4) + b"Z" * (pad - 4)
    with zf.open(info, "w", force_zip64=zip64) as member:
        member.write(view)


def _write_archive(f, obj):
    pickler = _Pickler()
    pickled = pickler.dump(obj)
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        _put(zf, f, "archive/data.pkl", pickled)
        _put(zf, f, "archive/byteorder", b"little")
        for key, arr in pickler.storages:
            _put(zf, f, f"archive/data/{key}", arr)
        _put(zf, f, "archive/version", b"3\n")


def write_torch_file(target, obj):
    """Write `obj` (nested dicts / OrderedDicts / lists / tuples of None, bool, int, float, str, bytes,
    numpy arrays and minigrad Tensors) as a torch.save file that `torch.load(weights_only=True)`
    reads: arrays become CPU tensors of the same dtype (float64/32/16, int64/32/16/8, uint8, bool,
    complex). `target`: a path (written atomically) or a binary file object."""
    if isinstance(target, (str, os.PathLike)):
        with atomic_output(os.fspath(target)) as f:
            _write_archive(f, obj)
    elif getattr(target, "seekable", lambda: False)():
        _write_archive(target, obj)
    else:                                     # a pipe or socket: zipfile needs to seek back
        buf = io.BytesIO()
        _write_archive(buf, obj)
        target.write(buf.getbuffer())


# ----------------------------------------------------------------------------------------------
# minigrad.save / minigrad.load


def _as_tensor(arr):
    if arr.dtype.kind == "c":
        raise CheckpointError("minigrad.load: the file holds a complex tensor, which a minigrad Tensor "
                              "cannot hold; minigrad.torch_format.read_torch_file reads it as a numpy array")
    return Tensor(arr.astype(np.float32) if arr.dtype == np.float16 else arr)


def save(obj, f):
    """Like torch.save: write `obj` (nested containers of Tensors, numpy arrays, numbers, strings) as
    a PyTorch file that torch.load reads; `f` a path (written atomically) or a binary file object."""
    write_torch_file(f, obj)


def load(f, map_location=None, weights_only=True):
    """Like torch.load(f, weights_only=True): the object a torch.save / minigrad.save file holds,
    every tensor a minigrad Tensor (requires_grad False; float16 and bfloat16 become float32).
    `map_location` may only name the CPU (None, 'cpu', torch.device('cpu')): minigrad has no other
    device, and tensors saved from a GPU load on the CPU anyway."""
    if map_location is not None and str(map_location) != "cpu":
        raise ValueError(f"minigrad.load: map_location={map_location!r}: minigrad runs on the CPU only "
                         f"(pass None or 'cpu'; tensors saved on a GPU load on the CPU anyway)")
    if weights_only is False:
        raise ValueError("minigrad.load: weights_only=False (unpickling arbitrary objects, which runs code "
                         "named by the file) is not supported; only tensors and plain containers load")
    return read_torch_file(f, convert=_as_tensor)
