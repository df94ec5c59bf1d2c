"""Checkpoints: safetensors format, atomic writes, damaged files, model mismatch, keep-last-k."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from minigrad import io
from minigrad.io import CheckpointError

HERE = os.path.dirname(os.path.abspath(__file__))


def arrays():
    rng = np.random.default_rng(0)
    return {"w": rng.standard_normal((3, 5)).astype(np.float32), "n": np.arange(4, dtype=np.int64),
            "s": np.float64(2.5), "e": np.zeros((0, 3), np.float32), "m": np.array([True, False])}


def test_safetensors_round_trip_exact(tmp_path):
    path = str(tmp_path / "a.safetensors")
    io.save_safetensors(path, arrays(), {"hello": "world"})
    loaded, meta = io.load_safetensors(path)
    assert meta["hello"] == "world"
    for k, v in arrays().items():
        assert loaded[k].dtype == np.asarray(v).dtype and loaded[k].shape == np.shape(v)
        assert np.array_equal(loaded[k], v)


def test_compatible_with_the_safetensors_package(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    ours, theirs = str(tmp_path / "ours.safetensors"), str(tmp_path / "theirs.safetensors")
    io.save_safetensors(ours, arrays())
    for k, v in st.load_file(ours).items():
        assert np.array_equal(v, arrays()[k]) and v.shape == np.shape(arrays()[k])
    st.save_file({k: np.asarray(v) for k, v in arrays().items()}, theirs, metadata={"a": "b"})
    loaded, meta = io.load_safetensors(theirs)
    assert meta == {"a": "b"} and all(np.array_equal(loaded[k], v) for k, v in arrays().items())


def test_bf16_is_widened_to_float32():
    x = np.array([1.5, -2.0, 3.140625], np.float32)
    raw = (x.view(np.uint32) >> 16).astype("<u2").tobytes()
    header = json.dumps({"x": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}}).encode()
    buf = len(header).to_bytes(8, "little") + header + raw
    loaded, _ = io.decode_safetensors(buf)
    assert loaded["x"].dtype == np.float32 and np.array_equal(loaded["x"], x)


@pytest.mark.parametrize("damage", ["empty", "short_header", "truncated", "flipped_bit", "garbage"])
def test_damaged_files_give_a_clear_error(tmp_path, damage):
    path = str(tmp_path / "d.safetensors")
    io.save_safetensors(path, arrays())
    buf = bytearray(open(path, "rb").read())
    buf = {"empty": b"", "short_header": buf[:20], "truncated": buf[:-5],
           "flipped_bit": buf[:-10] + bytes([buf[-10] ^ 4]) + buf[-9:],
           "garbage": b"\xff" * 64}[damage]
    with open(path, "wb") as f:
        f.write(bytes(buf))
    with pytest.raises(CheckpointError, match="truncated or corrupted"):
        io.load_safetensors(path)


def test_optimizer_like_state_survives_flattening():
    state = {"state": {0: {"step": 3, "exp_avg": np.ones(3, np.float32)}, 1: {"step": np.int64(4)}},
             "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.95), "eps": 1e-8, "params": [0, 1]}]}
    arrays_out = {}
    skeleton = json.loads(json.dumps(io.flatten_state(state, "optim", arrays_out)))
    back = io.unflatten_state(skeleton, arrays_out)
    assert back["state"][0]["step"] == 3 and back["param_groups"][0]["betas"] == (0.9, 0.95)
    assert np.array_equal(back["state"][0]["exp_avg"], state["state"][0]["exp_avg"])
    assert back["state"][1]["step"].dtype == np.int64


def check_intact(ckpt):
    """Every weight of checkpoint k equals k; the model rebuilds and the optimizer state loads."""
    from _ckpt_saver import make_model_and_optimizer
    assert ckpt.model_type == "gpt" and ckpt.rng["x"] == ckpt.extra["n"] == ckpt.step
    assert all(np.all(v == ckpt.step) for v in ckpt.model_state.values())
    model = ckpt.build_model()
    assert all(np.all(p.data == ckpt.step) for p in model.parameters())
    _, opt = make_model_and_optimizer()
    opt.load_state_dict(ckpt.optimizer_state)
    assert ckpt.tokenizer.decode(ckpt.tokenizer.encode("ok")) == "ok"


def test_keep_last_k_and_latest(tmp_path):
    from _ckpt_saver import make_model_and_optimizer, save
    run = str(tmp_path)
    model, opt = make_model_and_optimizer()
    for step in (5, 10, 15, 20):
        save(run, step, model, opt, keep=2)
    assert [s for s, _ in io.list_checkpoints(run)] == [15, 20]
    assert io.latest_checkpoint(run).endswith("ckpt_00000020.safetensors")
    ckpt = io.load_checkpoint(run)
    assert ckpt.step == 20
    check_intact(ckpt)
    assert not [f for f in os.listdir(run) if f.startswith(".tmp")]


def test_keep_never_deletes_a_higher_step_of_another_run_and_warns(tmp_path):
    # regression: pruning by highest step let an older run's ckpt_300 push out every save of a new run
    from _ckpt_saver import make_model_and_optimizer, save
    run = str(tmp_path)
    model, opt = make_model_and_optimizer()
    for step in (100, 200, 300):
        save(run, step, model, opt, keep=2)
    for step in (10, 20, 30):
        with pytest.warns(RuntimeWarning, match=r"holds .*ckpt_00000300\.safetensors, a higher step than the "
                                                f"{step} just saved"):
            save(run, step, model, opt, keep=2)
    assert [s for s, _ in io.list_checkpoints(run)] == [20, 30, 200, 300]   # keep=2 up to each new step
    assert io.load_checkpoint(io.checkpoint_path(run, 30)).step == 30


def test_saved_files_get_the_mode_open_would_give_or_keep_the_replaced_files(tmp_path):
    # regression: tempfile.mkstemp made every checkpoint and HF export 0600 (os.replace keeps the mode)
    from _ckpt_saver import make_model_and_optimizer
    model, _ = make_model_and_optimizer()
    old = os.umask(0o022)
    try:
        path = io.save_checkpoint(str(tmp_path), 1, model)
        model.save_hf(str(tmp_path / "hf"))
        for f in (path, tmp_path / "hf" / "config.json", tmp_path / "hf" / "model.safetensors"):
            assert os.stat(f).st_mode & 0o777 == 0o644, f
        os.chmod(path, 0o640)                       # overwriting keeps the file's own mode
        io.save_checkpoint(str(tmp_path), 1, model)
        assert os.stat(path).st_mode & 0o777 == 0o640
        os.umask(0o077)
        assert os.stat(io.save_checkpoint(str(tmp_path), 2, model)).st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_damaged_latest_is_skipped_in_a_directory_but_named_when_loaded_directly(tmp_path):
    from _ckpt_saver import make_model_and_optimizer, save
    run = str(tmp_path)
    model, opt = make_model_and_optimizer()
    save(run, 1, model, opt)
    path = save(run, 2, model, opt)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    with pytest.warns(UserWarning, match="skipping damaged checkpoint"):
        assert io.load_checkpoint(run).step == 1
    with pytest.raises(CheckpointError, match="ckpt_00000002.*truncated or corrupted"):
        io.load_checkpoint(path)


def test_not_a_checkpoint(tmp_path):
    path = str(tmp_path / "plain.safetensors")
    io.save_safetensors(path, arrays())
    with pytest.raises(CheckpointError, match="not a minigrad checkpoint"):
        io.load_checkpoint(path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no checkpoints"):
        io.load_checkpoint(str(tmp_path / "empty"))


def test_sigkill_during_saves_never_breaks_the_latest_checkpoint(tmp_path):
    """Kill a process saving a tiny GPT + AdamW at random moments, many times: the newest checkpoint
    always loads intact (every weight equal to its step), and steps only move forward."""
    run = str(tmp_path)
    rng = random.Random(1234)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.path.dirname(HERE)]))
    last_step, kills, mid_save = 0, 0, 0
    deadline = time.monotonic() + 60
    # Keep killing until enough kills landed inside a save (a fast machine needs more tries).
    while (kills < 20 or mid_save < 3) and time.monotonic() < deadline:
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "_ckpt_saver.py"), run,
                                 str(last_step + 1)], env=env, stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()  # at least one save finished: the process is in its save loop
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        kills += 1
        mid_save += any(f.startswith(".tmp_") for f in os.listdir(run))
        ckpt = io.load_checkpoint(io.latest_checkpoint(run))  # the newest must load, not be skipped
        assert ckpt.step > last_step
        check_intact(ckpt)
        assert len(io.list_checkpoints(run)) <= 3  # keep=2 (+1 if killed between replace and prune)
        last_step = ckpt.step
    print(f"{kills} kills, {mid_save} inside a save")
    assert kills >= 20 and mid_save >= 1, (kills, mid_save)  # some kills did land inside a save
