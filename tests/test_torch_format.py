"""PyTorch checkpoint files without torch (minigrad.torch_format, minigrad.save / minigrad.load).

Without torch: round trips, and hostile files (globals that would run code, BUILD on the loader's own
objects, truncation, corrupted bytes, bad layouts, missing members, structure errors) must raise
CheckpointError and run nothing. With torch: torch.save files of every dtype and layout read
bit-for-bit, minigrad's files read by torch.load(weights_only=True), real RWKV-7 and HF Llama
(pytorch_model.bin) checkpoints.
"""
import collections
import io
import json
import os
import pickle
import struct
import sys
import zipfile

import numpy as np
import pytest

import minigrad as mg
from minigrad.io import CheckpointError
from minigrad.torch_format import read_torch_file, read_torch_state_dict, write_torch_file

# ----------------------------------------------------------------------------------------------
# hand-made pickles and archives


def _s(text):
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _i(v):
    if -2 ** 31 <= v < 2 ** 31:
        return b"J" + struct.pack("<i", v)
    raw = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def _t(values):
    """A pickled tuple of ints (bytes items are inserted as they are)."""
    return b"(" + b"".join(v if isinstance(v, bytes) else _i(v) for v in values) + b"t"


def _g(module, name):
    return b"c" + f"{module}\n{name}\n".encode()


def _tensor(numel=6, offset=0, size=(2, 3), stride=(3, 1), storage="FloatStorage", key="0", pid=None):
    """The pickled torch._utils._rebuild_tensor_v2 call torch.save writes for one tensor."""
    pid = pid or b"(" + _s("storage") + _g("torch", storage) + _s(key) + _s("cpu") + _i(numel) + b"t"
    offset = offset if isinstance(offset, bytes) else _i(offset)
    return (_g("torch._utils", "_rebuild_tensor_v2") + b"(" + pid + b"Q" + offset + _t(size) + _t(stride)
            + b"\x89" + _g("collections", "OrderedDict") + b")R" + b"tR")


def _p2(body):
    return b"\x80\x02" + body + b"."


F32 = np.arange(6, dtype="<f4")


def _archive(pkl, storages=None, byteorder=b"little", extra=None, compress=zipfile.ZIP_STORED):
    """The bytes of a torch-style zip: archive/data.pkl, byteorder, data/<key>, version."""
    storages = {"0": F32.tobytes()} if storages is None else storages
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", pkl, compress_type=compress)
        if byteorder is not None:
            zf.writestr("archive/byteorder", byteorder)
        for key, raw in storages.items():
            zf.writestr(f"archive/data/{key}", raw)
        for name, raw in (extra or {}).items():
            zf.writestr(f"archive/{name}", raw)
        zf.writestr("archive/version", b"3\n")
    return buf.getvalue()


def _same(a, b):
    """Equal dtype, shape and bytes (NaN-safe, -0.0 distinct)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ----------------------------------------------------------------------------------------------
# round trips (no torch)

ALL_DTYPES = ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool",
              "complex64"]


def _sample(dtype, shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-100, 100, shape).astype(dtype)
    return (rng.standard_normal(shape) * 50).astype(dtype)


def test_round_trip_every_dtype_and_container(tmp_path):
    arrays = {d: _sample(d) for d in ALL_DTYPES}
    odd = {"T": _sample("float32", (4, 5)).T, "step": _sample("float64", (6, 6))[1::2, ::3],
           "big_endian": np.arange(5, dtype=">i4"), "0d": np.float64(2.5),
           "empty": np.zeros((0, 3), np.int16), "scalar0d": np.array(7, np.int64)}
    obj = {"arrays": arrays, "odd": odd,
           "nested": collections.OrderedDict(a=[1, -2, 2 ** 40, -2 ** 70, 1.5, float("inf"), None, True],
                                             b=("x", b"\x00\xffbytes", "ünï"),
                                             c={3: "int key", (1, 2): [[]]}),
           "t": mg.tensor([[1.0, 2.0]])}
    path = tmp_path / "x.pt"
    write_torch_file(path, obj)
    back = read_torch_file(path)
    assert all(_same(back["arrays"][d], arrays[d]) for d in ALL_DTYPES)
    for k, v in odd.items():
        assert _same(back["odd"][k], np.asarray(v).astype(np.asarray(v).dtype.newbyteorder("=")))
    assert type(back["nested"]) is collections.OrderedDict and back["nested"] == obj["nested"]
    assert _same(back["t"], np.array([[1.0, 2.0]], np.float32))
    assert isinstance(back["odd"]["0d"], np.ndarray)                   # numpy scalars: 0-d tensors
    assert read_torch_file(path.read_bytes())["nested"]["c"][(1, 2)] == [[]]     # bytes source
    with open(path, "rb") as f:
        assert _same(read_torch_file(f)["arrays"]["int8"], arrays["int8"])       # file object source


def test_float_dtype_casts_every_float_only(tmp_path):
    write_torch_file(tmp_path / "x.pth", {"h": np.ones(2, np.float16), "i": np.arange(2)})
    back = read_torch_file(tmp_path / "x.pth", float_dtype=np.float64)
    assert back["h"].dtype == np.float64 and back["i"].dtype == np.int64


def test_mg_save_and_load(tmp_path):
    model = mg.nn.Linear(3, 2)
    path = str(tmp_path / "m.pt")
    mg.save({"model": model.state_dict(), "half": np.ones(2, np.float16), "epoch": 3}, path)
    back = mg.load(path, map_location="cpu")
    state = back["model"]
    assert all(isinstance(v, mg.Tensor) and not v.requires_grad for v in state.values())
    assert back["epoch"] == 3 and back["half"].dtype == np.float32
    other = mg.nn.Linear(3, 2)
    other.load_state_dict(state)
    assert all(np.array_equal(other.state_dict()[k], v) for k, v in model.state_dict().items())
    opt = mg.optim.AdamW(model.parameters(), lr=0.1)                    # an optimizer's state
    model(mg.randn(4, 3)).sum().backward()
    opt.step()
    mg.save(opt.state_dict(), path)
    again = mg.optim.AdamW(other.parameters(), lr=0.1)
    again.load_state_dict(mg.load(path))
    assert again.state_dict()["param_groups"] == opt.state_dict()["param_groups"]
    assert all(_same(again.state_dict()["state"][i][k], v) for i, s in opt.state_dict()["state"].items()
               for k, v in s.items() if k != "step")
    buf = io.BytesIO()                                                    # file objects
    mg.save([mg.ones(2)], buf)
    buf.seek(0)
    assert np.array_equal(mg.load(buf)[0].data, np.ones(2, np.float32))


def test_mg_save_and_load_reject_what_they_cannot_do(tmp_path):
    path = str(tmp_path / "m.pt")
    with pytest.raises(TypeError, match="Linear.*save its state_dict"):
        mg.save({"m": mg.nn.Linear(2, 2)}, path)
    with pytest.raises(TypeError, match="uint16, which has no PyTorch storage type"):
        mg.save(np.zeros(2, np.uint16), path)
    loop = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match="contains itself"):
        mg.save(loop, path)
    assert not os.path.exists(path)                                   # nothing half-written
    mg.save({"x": np.zeros(2)}, path)
    with pytest.raises(TypeError):
        mg.save({"x": np.zeros(2), "y": object()}, path)
    assert list(mg.load(path)) == ["x"] and os.listdir(tmp_path) == ["m.pt"]   # the old file, no temp
    with pytest.raises(ValueError, match="CPU only"):
        mg.load(path, map_location="cuda:0")
    with pytest.raises(ValueError, match="weights_only=False"):
        mg.load(path, weights_only=False)
    mg.save({"c": np.ones(2, np.complex64)}, path)
    with pytest.raises(CheckpointError, match="complex"):
        mg.load(path)


# ----------------------------------------------------------------------------------------------
# hostile files (no torch)


def _evil_pickles(cmd):
    """name -> (data.pkl that would run `cmd`, what the error names)."""
    class Evil:
        def __reduce__(self):
            return os.system, (cmd,)

    call = b"(" + _s(cmd) + b"tR"
    return {
        "os.system": (_p2(_g("os", "system") + call), "os.system"),
        "pickled os.system": (pickle.dumps(Evil(), protocol=2), r"(posix|nt)\.system"),
        "__builtin__.eval": (_p2(_g("__builtin__", "eval") + b"(" + _s(f"__import__('os').system({cmd!r})")
                                 + b"tR"), "__builtin__.eval"),
        "builtins.exec": (_p2(_g("builtins", "exec") + b"(" + _s(f"import os; os.system({cmd!r})") + b"tR"),
                          "builtins.exec"),
        "STACK_GLOBAL": (b"\x80\x04" + _s("os") + _s("system") + b"\x93" + call + b".", "os.system"),
        "inside a state dict": (_p2(b"}(" + _s("w") + _tensor() + _s("x") + _g("subprocess", "call") + b"(("
                                    + _s("sh") + _s("-c") + _s(cmd) + b"ttR" + b"u"), "subprocess.call"),
        "INST": (_p2(b"(" + _s(cmd) + b"ios\nsystem\n"), "opcode INST"),
        "EXT1": (_p2(b"\x82\x01"), "opcode EXT1"),
    }


@pytest.mark.parametrize("case", list(_evil_pickles("x")))
def test_code_in_a_checkpoint_never_runs(tmp_path, case):
    from minigrad.models import RWKV7

    marker = tmp_path / "ran"
    path = tmp_path / "evil.pth"
    pkl, names = _evil_pickles(f"touch {marker}")[case]
    path.write_bytes(_archive(pkl))
    for load in (read_torch_file, mg.load, RWKV7.from_pretrained):
        with pytest.raises(CheckpointError, match=f"evil.pth.*{names}"):
            load(str(path))
    assert not marker.exists()


@pytest.mark.parametrize("target", [_g("torch._utils", "_rebuild_tensor_v2"), _g("builtins", "set"),
                                    _g("collections", "OrderedDict"), _g("collections", "Counter")])
def test_build_cannot_change_the_loaders_objects(tmp_path, target):
    """BUILD (set state / attributes) on an allowed global: refused, and nothing changes for later loads."""
    state = b"N}" + _s("x") + _i(1) + b"s\x86"            # (None, {'x': 1}): setattr(target, 'x', 1)
    with pytest.raises(CheckpointError, match="not a readable"):
        read_torch_file(_archive(_p2(target + state + b"b")))
    assert not hasattr(collections.OrderedDict, "x") and not hasattr(collections.Counter, "x")
    assert _same(read_torch_file(_archive(_p2(_tensor()))), F32.reshape(2, 3))


def test_truncated_and_corrupted_files(tmp_path):
    path = tmp_path / "ok.pth"
    write_torch_file(path, {"a": np.arange(100, dtype=np.float32), "b": [np.ones((3, 3))]})
    good = path.read_bytes()
    cut = tmp_path / "cut.pth"
    for k in (0, 1, 10, 100, len(good) // 3, len(good) // 2, len(good) - 22, len(good) - 1):
        cut.write_bytes(good[:k])
        with pytest.raises(CheckpointError, match="cut.pth"):
            read_torch_file(cut)
    members = {i.filename: i for i in zipfile.ZipFile(io.BytesIO(good)).infolist()}
    for member in ("archive/data/0", "archive/data.pkl"):
        info = members[member]
        at = info.header_offset + 30 + len(member) + len(info.extra) + 10   # inside the data
        bad = bytearray(good)
        bad[at] ^= 0x40
        cut.write_bytes(bytes(bad))
        with pytest.raises(CheckpointError, match=f"{member} fails its CRC-32 check"):
            read_torch_file(cut)


def test_every_flipped_byte_is_caught_or_harmless(tmp_path):
    """A bit flipped anywhere: a CheckpointError, or (in padding, timestamps ...) the same values."""
    path = tmp_path / "f.pth"
    write_torch_file(path, {"a": F32.reshape(2, 3), "b": [np.ones(3, np.int64), "s"]})
    good = path.read_bytes()
    want = read_torch_file(good)
    for at in range(len(good)):
        bad = bytearray(good)
        bad[at] ^= 0x10 if at % 2 else 0x81
        try:
            got = read_torch_file(bytes(bad))
        except CheckpointError:
            continue
        assert _same(got["a"], want["a"]) and _same(got["b"][0], want["b"][0]) and got["b"][1] == "s", at


@pytest.mark.parametrize("pkl, match", [
    (_tensor(offset=-1), "offset -1 is not an integer >= 0"),
    (_tensor(offset=b"G" + struct.pack(">d", 1.0)), "offset 1.0 is not an integer"),
    (_tensor(stride=(3, -1)), r"stride \(3, -1\) is not a tuple of integers >= 0"),
    (_tensor(size=(2, -3)), r"size \(2, -3\) is not"),
    (_tensor(size=(2, b"\x88")), r"size \(2, True\) is not"),
    (_tensor(size=(2, 3), stride=(1,)), "size and stride differ in length"),
    (_tensor(offset=1), r"needs 28 bytes of storage '0', which holds 24"),
    (_tensor(size=(3, 3)), r"needs 36 bytes"),
    (_tensor(size=(2 ** 62,), stride=(1,)), "needs 18446744073709551616 bytes"),
    (_tensor(size=(2 ** 62, 2 ** 62), stride=(2 ** 63, 2 ** 63)), "needs"),
    (_tensor(size=(2 ** 20, 2 ** 20), stride=(0, 0)), "would expand 4 stored bytes"),
    (_tensor(size=(1,) * 33, stride=(1,) * 33), "33 dimensions"),
    (_tensor(size=(0, 2 ** 62), stride=(1, 1)), "too large for a numpy array"),       # empty, yet numpy
    (_tensor(size=(2 ** 40, 2 ** 40, 0), stride=(1, 1, 1)), "too large for a numpy array"),   # refuses
    (_tensor(numel=7), "should hold 28 bytes .* its member holds 24"),
    (_tensor(key="7"), "no member archive/data/7"),
    (_tensor(storage="QInt8Storage"), "names torch.QInt8Storage, which minigrad does not load"),
    (_tensor(storage="UntypedStorage", numel=24), "untyped storage has no numpy equivalent"),
    (_tensor(pid=_i(3)), "persistent id 3 is not a storage reference"),
    (_g("torch._utils", "_rebuild_tensor_v2") + b"(" + _i(0) + _i(0) + _t((1,)) + _t((1,)) + b"\x89}tR",
     "storage 0 is not a storage"),
    (b"}" + _tensor() + _i(1) + b"s", "used as a dict key"),
    (b"]q\x00h\x00a", "a container holds itself"),
    (b"]" * 3000 + b"a" * 2999, "nested too deeply"),
    (_g("torch._utils", "_rebuild_tensor_v2"), r"holds torch._utils._rebuild_tensor_v2 \(_Callable\)"),
    (_g("torch._utils", "_rebuild_sparse_tensor"), "no sparse, quantized"),
    (_g("torch", "FloatStorage") + b"(tR", "not a readable"),           # calling a storage type
])
def test_bad_tensors_and_pickles_are_named(pkl, match):
    with pytest.raises(CheckpointError, match=match):
        read_torch_file(_archive(_p2(pkl)))


def test_a_refused_opcode_is_named_once():
    with pytest.raises(CheckpointError) as info:
        read_torch_file(_archive(_p2(b"(l")))                    # LIST: protocol 0, never in torch files
    assert "opcode LIST" in str(info.value) and "not a valid pickle" not in str(info.value)
    assert str(info.value).count("not a readable PyTorch checkpoint") == 1


def test_many_tensors_on_the_same_bytes_cannot_exhaust_memory():
    """Each stride-0 view of one 4-byte storage is 512 MiB, under the per-tensor limit; a few hundred
    bytes of pickle naming it four times would take 2 GiB: refused before any is read."""
    body = b"](" + _tensor(size=(2 ** 27,), stride=(0,)) * 4 + b"e"
    with pytest.raises(CheckpointError, match="would take more than 1073741824 bytes of memory"):
        read_torch_file(_archive(_p2(body)))
    two = read_torch_file(_archive(_p2(b"](" + _tensor(size=(4, 3), stride=(0, 1)) * 2 + b"e")))
    assert [a.shape for a in two] == [(4, 3), (4, 3)]


def test_hand_made_layouts_read_correctly():
    """Views as torch saves them: a transpose, an offset slice, stride 0, two views of one storage."""
    x = F32.reshape(2, 3)
    body = (b"}(" + _s("t") + _tensor(size=(3, 2), stride=(1, 3)) + _s("s") + _tensor(offset=4, size=(2,),
            stride=(1,)) + _s("e") + _tensor(size=(4, 3), stride=(0, 1)) + _s("z") + _tensor(size=(0, 5),
            stride=(99, 99)) + _s("d") + _tensor(size=(), stride=()) + b"u")
    back = read_torch_file(_archive(_p2(body)))
    assert _same(back["t"], x.T) and _same(back["s"], F32[4:])
    assert _same(back["e"], np.broadcast_to(x[0], (4, 3))) and back["z"].shape == (0, 5)
    assert _same(back["d"], np.float32(0))


def test_big_endian_files():
    bf16_bits = np.array([1.5, -2.0], np.float32).view(np.uint32) >> 16
    raw = {"0": np.arange(6, dtype=">f4").tobytes(), "1": bf16_bits.astype(">u2").tobytes()}
    body = b"}(" + _s("f") + _tensor() + _s("b") + _tensor(numel=2, size=(2,), stride=(1,),
                                                           storage="BFloat16Storage", key="1") + b"u"
    back = read_torch_file(_archive(_p2(body), raw, byteorder=b"big"))
    assert _same(back["f"], F32.reshape(2, 3)) and _same(back["b"], np.array([1.5, -2.0], np.float32))


@pytest.mark.parametrize("data, match", [
    (b"", "not a zip archive"),
    (b"junk" * 100, "not a zip archive"),
    (pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2), "legacy PyTorch"),
    (_archive(b"\xff\xfe"), "data.pkl is not a valid pickle"),
    (_archive(_p2(_tensor()), compress=zipfile.ZIP_DEFLATED), "compressed or encrypted"),
    (_archive(_p2(_tensor()), byteorder=b"middle"), "byteorder is b'middle'"),
    (_archive(_p2(_tensor()), extra={"constants.pkl": b""}), "TorchScript archive"),
])
def test_structure_errors_are_clear(data, match):
    with pytest.raises(CheckpointError, match=match):
        read_torch_file(data)


def test_zip_without_data_pkl():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data/0", F32.tobytes())
    with pytest.raises(CheckpointError, match="it has no archive/data.pkl"):
        read_torch_file(buf.getvalue())


@pytest.mark.parametrize("obj, match", [
    ([np.zeros(2)], "holds a list, not a state dict"),
    ({1: np.zeros(2)}, "entry 1: its key is of type int"),
    ({"w": {"x": np.zeros(2)}}, "entry 'w' holds a value of type dict, not a tensor"),
])
def test_state_dict_shape_is_checked(tmp_path, obj, match):
    write_torch_file(tmp_path / "s.pth", obj)
    with pytest.raises(CheckpointError, match=f"s.pth.*{match}"):
        read_torch_state_dict(str(tmp_path / "s.pth"))


# ----------------------------------------------------------------------------------------------
# RWKV-7 without torch


def _rwkv7(seed=0):
    from minigrad.models.rwkv7 import RWKV7, RWKV7Config
    from minigrad.models.rwkv7_init import official_init
    cfg = RWKV7Config(vocab_size=50, d_model=64, n_layer=2, head_size=32)
    rng = np.random.default_rng(seed)
    state = {k: (v + 0.1 * rng.standard_normal(v.shape)).astype(np.float32)
             for k, v in official_init(cfg, seed=seed, dtype=np.float64).items()}
    return RWKV7.from_state_dict(state)


def _no_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)     # `import torch` raises ImportError


def test_rwkv7_pth_round_trip_without_torch(tmp_path, monkeypatch):
    from minigrad.models.rwkv7 import RWKV7
    _no_torch(monkeypatch)
    model = _rwkv7()
    path = model.save_pretrained(str(tmp_path / "rwkv.pth"))
    back = RWKV7.from_pretrained(path)
    assert all(_same(v, back.state_dict()[k]) for k, v in model.state_dict().items())


# ----------------------------------------------------------------------------------------------
# against torch


TORCH_DTYPES = ALL_DTYPES + ["bfloat16"]


def _torch_sample(torch, dtype):
    if dtype == "bfloat16":
        return torch.from_numpy(_sample("float32")).to(torch.bfloat16)
    return torch.from_numpy(_sample(dtype))


def _as_numpy(t):
    """What minigrad should read for a torch tensor: its values, bf16 widened to float32."""
    t = t.detach().resolve_neg().resolve_conj()
    return (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy()


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_reads_torch_save_of_every_dtype_bit_for_bit(tmp_path, dtype):
    torch = pytest.importorskip("torch")
    t = _torch_sample(torch, dtype)
    want = {"t": t, "T": t.t(), "slice": t[1:, 2:], "0d": t[1, 1], "empty": t[:0]}
    torch.save({**want, "0d": t[1, 1].clone()}, tmp_path / "t.pt")
    back = read_torch_file(tmp_path / "t.pt")
    for k, v in want.items():
        assert _same(back[k], _as_numpy(v)), k


def test_reads_torch_views_modules_and_containers(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    x = torch.randn(4, 6, 5)
    net = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4), torch.nn.Embedding(7, 3))
    attr = torch.ones(2)
    attr.note = "python attribute"
    obj = {"views": {"x": x, "perm": x.permute(2, 0, 1), "step": x[::2, 1::3], "row": x[1],
                     "diag": x[0].diagonal(), "expand": x[0, 0].expand(3, 5), "neg": torch._neg_view(x[0]),
                     "conj": torch.tensor([1 + 2j, 3 - 1j]).conj()},
           "sd": net.state_dict(), "param": torch.nn.Parameter(torch.ones(3)), "attr": attr,
           "u16": torch.tensor([1, 60000]).to(torch.uint16),
           "meta": [("tuple", 1, 2.5, None, True), collections.OrderedDict(b=b"bytes"), {7, 8}],
           "torch_values": {"size": torch.Size([2, 3]), "dtype": torch.float16,
                            "device": torch.device("cpu")}}
    torch.save(obj, tmp_path / "v.pt")
    back = read_torch_file(tmp_path / "v.pt")
    for k, v in obj["views"].items():
        assert _same(back["views"][k], _as_numpy(v)), k
    assert type(back["sd"]) is collections.OrderedDict and list(back["sd"]) == list(obj["sd"])
    assert all(_same(back["sd"][k], v.numpy()) for k, v in obj["sd"].items())
    assert back["sd"]["1.num_batches_tracked"].shape == () and back["sd"]._metadata == obj["sd"]._metadata
    assert _same(back["param"], np.ones(3, np.float32)) and _same(back["attr"], np.ones(2, np.float32))
    assert _same(back["u16"], np.array([1, 60000], np.uint16))
    assert back["meta"] == obj["meta"]
    assert back["torch_values"] == {"size": (2, 3), "dtype": "torch.float16", "device": "cpu"}


def test_legacy_and_gpu_style_files(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.ones(2)}, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError, match="legacy PyTorch file .* re-save it"):
        read_torch_file(tmp_path / "old.pt")
    buf = io.BytesIO()                                # storages saved on a GPU name 'cuda:0': read anyway
    torch.save({"w": torch.ones(2)}, buf)
    fixed = io.BytesIO()
    with zipfile.ZipFile(buf) as src, zipfile.ZipFile(fixed, "w") as dst:
        for info in src.infolist():
            raw = src.read(info)
            if info.filename.endswith("data.pkl"):
                raw = raw.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
            dst.writestr(info.filename, raw)
    assert _same(read_torch_file(fixed.getvalue())["w"], np.ones(2, np.float32))


def test_torch_reads_minigrad_files(tmp_path):
    torch = pytest.importorskip("torch")
    arrays = {d: _sample(d) for d in ALL_DTYPES}
    shared = np.arange(4.0)
    obj = {"arrays": arrays, "T": _sample("float32", (3, 5)).T, "0d": np.int64(-3), "empty": np.zeros((2, 0)),
           "tensor": mg.tensor([1.0, 2.0]), "same": [shared, shared],
           "nested": collections.OrderedDict(a=[1, "s", None, (2.5, b"b")], b={4: True})}
    path = tmp_path / "m.pt"
    mg.save(obj, str(path))
    for mmap in (False, True):
        back = torch.load(path, weights_only=True, mmap=mmap)
        for d in ALL_DTYPES:
            assert _same(back["arrays"][d].numpy(), arrays[d]), d
        assert _same(back["T"].numpy(), obj["T"]) and back["0d"].shape == () and int(back["0d"]) == -3
        assert back["empty"].shape == (2, 0) and _same(back["tensor"].numpy(), np.array([1, 2], np.float32))
        assert back["same"][0].data_ptr() == back["same"][1].data_ptr()
        assert type(back["nested"]) is collections.OrderedDict and back["nested"] == obj["nested"]


def test_rwkv7_pth_files_load_in_torch_and_back(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from minigrad.models.rwkv7 import RWKV7
    from minigrad.models.rwkv7_io import official_state
    model = _rwkv7(seed=1)
    state = official_state(model)
    path = model.save_pretrained(str(tmp_path / "ours.pth"))
    theirs = torch.load(path, weights_only=True)
    assert theirs.keys() == state.keys() and all(_same(theirs[k].numpy(), v) for k, v in state.items())
    torch.save({k: torch.from_numpy(v).to(torch.bfloat16) for k, v in state.items()}, tmp_path / "bf16.pth")
    _no_torch(monkeypatch)
    back = RWKV7.from_pretrained(str(tmp_path / "bf16.pth"))
    want = {k: v.to(torch.bfloat16).float().numpy() for k, v in theirs.items()}
    assert all(_same(v, want[k]) for k, v in back.state_dict().items())


# ----------------------------------------------------------------------------------------------
# HF Llama pytorch_model.bin


def _tf_llama(torch, transformers, tied):
    torch.manual_seed(3)
    cfg = transformers.LlamaConfig(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                   rope_theta=5000.0, rms_norm_eps=1e-5, tie_word_embeddings=tied,
                                   initializer_range=0.1)
    return transformers.LlamaForCausalLM(cfg).eval()


def _write_bin_dir(torch, ref, path, shards=1):
    """What transformers 4's save_pretrained(safe_serialization=False) wrote: config.json and
    pytorch_model.bin, or pytorch_model-0000i-of-0000n.bin shards with pytorch_model.bin.index.json."""
    os.makedirs(path)
    ref.config.to_json_file(os.path.join(path, "config.json"))
    state = ref.state_dict()
    if shards == 1:
        torch.save(state, os.path.join(path, "pytorch_model.bin"))
        return
    names, weight_map = list(state), {}
    for i in range(shards):
        file = f"pytorch_model-{i + 1:05d}-of-{shards:05d}.bin"
        part = {k: state[k] for k in names[i::shards]}
        torch.save(part, os.path.join(path, file))
        weight_map.update(dict.fromkeys(part, file))
    with open(os.path.join(path, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)


IDS = np.array([[3, 17, 60, 42, 0, 5, 7, 23]])


def _logits(model):
    with mg.no_grad():
        out = model(IDS)
    return np.asarray((out[0] if isinstance(out, tuple) else out).data)


@pytest.mark.parametrize("tied", [True, False])
def test_hf_pytorch_model_bin_matches_safetensors(tmp_path, tied, monkeypatch):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from minigrad.models import GPT
    ref = _tf_llama(torch, transformers, tied)
    ref.save_pretrained(str(tmp_path / "st"))
    _write_bin_dir(torch, ref, str(tmp_path / "bin"))
    _write_bin_dir(torch, ref, str(tmp_path / "sharded"), shards=3)
    if not tied:   # transformers itself reads the .bin directory: it is a real HF layout
        again = transformers.LlamaForCausalLM.from_pretrained(str(tmp_path / "bin")).eval()
        with torch.no_grad():
            want = again(torch.from_numpy(IDS)).logits.numpy()
    st = GPT.from_hf(str(tmp_path / "st"))
    _no_torch(monkeypatch)
    for name in ("bin", "sharded"):
        ours = GPT.from_hf(str(tmp_path / name))
        assert all(_same(v, st.state_dict()[k]) for k, v in ours.state_dict().items())
        np.testing.assert_array_equal(_logits(ours), _logits(st))
    if not tied:
        np.testing.assert_allclose(_logits(st), want, atol=1e-4, rtol=0)


def test_hf_prefers_safetensors_and_checks_bin_shards(tmp_path):
    from minigrad.models import GPT, GPTConfig
    from minigrad.models.hf_llama import read_safetensors_file, weight_files
    model = GPT(GPTConfig(vocab_size=20, d_model=16, n_layer=1, n_head=2, ffn_hidden=24, max_seq_len=16))
    model.save_hf(str(tmp_path))
    state = read_safetensors_file(str(tmp_path / "model.safetensors"))      # HF names
    write_torch_file(tmp_path / "pytorch_model.bin", {k: np.zeros_like(v) for k, v in state.items()})
    assert weight_files(str(tmp_path)) == [str(tmp_path / "model.safetensors")]
    assert _same(GPT.from_hf(str(tmp_path)).state_dict()["norm.weight"], state["model.norm.weight"])
    os.unlink(tmp_path / "model.safetensors")
    assert not GPT.from_hf(str(tmp_path)).state_dict()["norm.weight"].any()   # the .bin now
    index = tmp_path / "pytorch_model.bin.index.json"
    index.write_text(json.dumps({"weight_map": dict.fromkeys(state, "../elsewhere.bin")}))
    with pytest.raises(ValueError, match="points outside"):
        GPT.from_hf(str(tmp_path))
    write_torch_file(tmp_path / "part.bin", {k: v for k, v in list(state.items())[1:]})
    index.write_text(json.dumps({"weight_map": dict.fromkeys(state, "part.bin")}))
    with pytest.raises(ValueError, match="part.bin: holds tensors .* and lacks"):
        GPT.from_hf(str(tmp_path))
