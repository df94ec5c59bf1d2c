"""The training loop and the command line: tiny models, a few steps each."""
import argparse
import csv
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad import io
from minigrad.__main__ import build_parser, main
from minigrad.train import TrainConfig, TrainingError, learning_rate, train

MODELS = ["gpt", "rwkv7"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A small text corpus (fast to load) with enough structure to learn from."""
    rng = np.random.default_rng(0)
    words = ["thou", "art", "the", "king", "of", "my", "heart", "and", "love", "doth", "sweet", "night"]
    lines = [" ".join(rng.choice(words, size=6)).capitalize() + "." for _ in range(1500)]
    path = tmp_path_factory.mktemp("corpus") / "verse.txt"
    path.write_text("\n".join(lines))
    return str(path)


def tiny(corpus, out, **kw):
    base = dict(model="gpt", size="tiny", corpus=corpus, steps=20, out=str(out), eval_every=5,
                eval_batches=2, sample_tokens=0, progress=False, plot=False, seed=3, threads=1)
    return TrainConfig(**{**base, **kw})


def params(model):
    return {k: v.copy() for k, v in model.state_dict().items()}


def quiet(*args, **kwargs):
    pass


@pytest.mark.parametrize("model", MODELS)
def test_resume_is_bit_for_bit(corpus, tmp_path, model):
    """20 steps straight == 10 steps + resume + 10 steps: every parameter exactly equal."""
    straight = train(tiny(corpus, tmp_path / "a", model=model, eval_every=7), log=quiet)
    train(tiny(corpus, tmp_path / "b", model=model, eval_every=7, stop_at=10), log=quiet)
    assert io.latest_checkpoint(str(tmp_path / "b")).endswith("ckpt_00000010.safetensors")
    resumed = train(tiny(corpus, tmp_path / "b", model=model, eval_every=7, resume=True), log=quiet)
    assert straight["step"] == resumed["step"] == 20
    a, b = params(straight["model"]), params(resumed["model"])
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k
    assert straight["train_loss"] == resumed["train_loss"]
    with open(tmp_path / "a" / "metrics.csv") as fa, open(tmp_path / "b" / "metrics.csv") as fb:
        rows_a, rows_b = list(csv.DictReader(fa)), list(csv.DictReader(fb))
    assert [r["train_loss"] for r in rows_a] == [r["train_loss"] for r in rows_b]


def test_cli_train_writes_everything_then_samples_and_resumes(corpus, tmp_path, capsys):
    out = str(tmp_path / "run")
    rc = main(["train", "--model", "gpt", "--config", "tiny", "--corpus", corpus, "--steps", "12",
               "--eval-every", "6", "--eval-batches", "2", "--out", out, "--sample-tokens", "40",
               "--prompt", "Thou", "--threads", "1", "--keep", "1"])
    assert rc == 0
    text = capsys.readouterr()
    assert "sample" in text.out and "val loss" in text.out and "Thou" in text.out
    files = set(os.listdir(out))
    assert {"metrics.csv", "metrics.jsonl", "loss.png", "ckpt_00000012.safetensors"} <= files
    assert len([f for f in files if f.startswith("ckpt_")]) == 1  # --keep 1
    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == list(range(1, 13))
    assert [r["step"] for r in rows if r["val_loss"]] == ["6", "12"]
    events = [json.loads(line)["event"] for line in open(os.path.join(out, "metrics.jsonl"))]
    assert events[0] == "start" and events[-1] == "end"

    assert main(["sample", "--ckpt", out, "--prompt", "The king", "--tokens", "30", "--seed", "1"]) == 0
    first = capsys.readouterr().out
    assert first.startswith("The king") and len(first.encode()) >= len("The king") + 30
    main(["sample", "--ckpt", out, "--prompt", "The king", "--tokens", "30", "--seed", "1"])
    assert capsys.readouterr().out == first  # seeded

    # resume for more steps: settings come from the checkpoint, only --steps is new
    assert main(["train", "--out", out, "--resume", "--steps", "15", "--sample-tokens", "0"]) == 0
    assert io.list_checkpoints(out)[-1][0] == 15


def test_wrong_model_type_on_resume_and_load(corpus, tmp_path):
    train(tiny(corpus, tmp_path, steps=2), log=quiet)
    with pytest.raises(io.CheckpointError, match="holds a 'gpt' model"):
        train(tiny(corpus, tmp_path, model="rwkv7", steps=4, resume=True), log=quiet)
    from minigrad.train import build_model
    rwkv = build_model("rwkv7", "tiny", 256, 32, seed=0)
    with pytest.raises(io.CheckpointError, match="holds a 'gpt' model, not a 'rwkv7'"):
        io.load_checkpoint(str(tmp_path), model=rwkv)


def test_mismatched_shapes_are_named(corpus, tmp_path):
    train(tiny(corpus, tmp_path, steps=2), log=quiet)
    from minigrad.models import GPT, GPTConfig
    other = GPT(GPTConfig(vocab_size=256, d_model=48, n_layer=2, n_head=2, ffn_hidden=64))
    with pytest.raises(io.CheckpointError, match=r"shape mismatches: .*\(256, 32\) vs model \(256, 48\)"):
        io.load_checkpoint(str(tmp_path), model=other)
    deeper = GPT(GPTConfig(vocab_size=256, d_model=32, n_layer=3, n_head=2, ffn_hidden=64))
    with pytest.raises(io.CheckpointError, match="missing keys.*layers.2"):
        io.load_checkpoint(str(tmp_path), model=deeper)


@pytest.mark.parametrize("model", MODELS)
def test_checkpoint_round_trip_rebuilds_the_same_model(corpus, tmp_path, model):
    res = train(tiny(corpus, tmp_path, model=model, steps=3), log=quiet)
    ckpt = io.load_checkpoint(str(tmp_path))
    assert ckpt.step == 3 and ckpt.model_type == model and ckpt.tokenizer.vocab_size == 256
    rebuilt = ckpt.build_model()
    x = mg.from_numpy(np.arange(24, dtype=np.int64).reshape(2, 12) % 256)
    with mg.no_grad():
        assert np.array_equal(res["model"](x).data, rebuilt(x).data)


def test_nan_loss_is_a_clear_error(corpus, tmp_path, monkeypatch):
    import minigrad.train as train_module
    real = train_module.lm_loss
    calls = {"n": 0}

    def poisoned(model, x, y):
        calls["n"] += 1
        loss = real(model, x, y)
        return loss * float("nan") if calls["n"] == 4 else loss

    monkeypatch.setattr(train_module, "lm_loss", poisoned)
    with pytest.raises(TrainingError, match=r"loss became nan at step 4.*lower --lr"):
        train(tiny(corpus, tmp_path, steps=10, eval_every=100), log=quiet)


def test_non_finite_parameters_are_never_saved_as_a_good_checkpoint(corpus, tmp_path):
    """With an absurd lr the loss of step 2 is still finite but its update makes the weights NaN;
    the checkpoint of step 2 used to be written (all NaN) and named "the newest good checkpoint"
    (found by the docs walkthrough). Now nothing non-finite is saved and the error names step 1's."""
    with pytest.raises(TrainingError, match=r"non-finite by step 2 .*newest good checkpoint is .*ckpt_0+1\."):
        train(tiny(corpus, tmp_path, steps=6, eval_every=1, lr=1e30, warmup=0), log=quiet)
    saved = io.list_checkpoints(str(tmp_path))
    assert [s for s, _ in saved] == [1]
    ckpt = io.load_checkpoint(str(tmp_path))
    assert all(np.isfinite(p.data).all() for p in ckpt.build_model().parameters())


def test_minutes_mode_stops_on_time(corpus, tmp_path):
    res = train(tiny(corpus, tmp_path, steps=None, minutes=0.05), log=quiet)
    assert res["step"] >= 1 and 2.5 <= res["elapsed_s"] < 30


def test_learning_rate_schedule():
    cfg = TrainConfig(steps=100, lr=1.0, warmup=10, min_lr_ratio=0.1).resolved()
    lrs = [learning_rate(cfg, s) for s in range(100)]
    assert lrs[0] < lrs[9] <= 1.0 and max(lrs) == pytest.approx(1.0, abs=0.02)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:])) and lrs[-1] == pytest.approx(0.1, abs=0.01)
    const = dataclasses.replace(cfg, schedule="constant")
    assert learning_rate(const, 50) == 1.0
    timed = TrainConfig(minutes=1.0, lr=1.0, warmup=10).resolved()
    assert learning_rate(timed, 100, 0.05) == pytest.approx(0.1 + 0.45 * (1 + np.cos(np.pi * 0.05)))
    assert learning_rate(timed, 100, 1.0) == pytest.approx(0.1)
    assert learning_rate(timed, 2, 0.5) == pytest.approx(3 / 11 * 0.55)  # warmup by steps ...
    assert learning_rate(timed, 100, 0.01) < 0.25  # ... or by time, whichever ends first


def test_bad_settings_are_clear():
    with pytest.raises(ValueError, match="unknown size"):
        TrainConfig(size="huge", steps=1).resolved()
    with pytest.raises(ValueError, match="steps or minutes, not both"):
        TrainConfig(steps=1, minutes=1).resolved()
    with pytest.raises(SystemExit):
        main(["train", "--steps", "1", "--minutes", "1"])


def test_help_explains_every_option(capsys):
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            assert action.help and len(action.help) > 10, (name, action.option_strings)
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    help_text = capsys.readouterr().out
    for option in ("--model", "--config", "--corpus", "--steps", "--minutes", "--out", "--resume", "--seed",
                   "--lr", "--batch-size", "--seq-len", "--threads"):
        assert option in help_text


def test_info_subprocess():
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "minigrad", "info"], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=60)
    assert out.returncode == 0 and "version" in out.stdout and "openmp" in out.stdout


@pytest.mark.parametrize("model", MODELS)
def test_generate_text_slides_a_window_past_the_trained_length(corpus, tmp_path, model):
    from minigrad.train import generate_ids, generate_text
    res = train(tiny(corpus, tmp_path, model=model, steps=2), log=quiet)
    prompt = res["tokenizer"].encode("Thou art")
    ids = generate_ids(res["model"], prompt, 70, seed=5, window=16)
    assert len(ids) == len(prompt) + 70 and np.array_equal(ids[:len(prompt)], prompt)
    assert np.array_equal(generate_ids(res["model"], prompt, 70, seed=5, window=16), ids)
    text = generate_text(res["model"], res["tokenizer"], "Thou art", tokens=70, seed=5, window=16)
    assert text == res["tokenizer"].decode(ids)


def _within(seconds, fn, *args, **kwargs):
    """fn(*args, **kwargs), or TimeoutError after `seconds`: a regression to a loop fails, not hangs."""
    import signal

    def expired(*_):
        raise TimeoutError(f"{fn.__name__} did not return within {seconds} s")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        return fn(*args, **kwargs)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("model", MODELS)
def test_generate_with_a_one_token_window_conditions_on_the_last_token(model):
    """Window 1 used to loop forever (out[-0:] kept the whole context and produced no token)."""
    from minigrad.models import GPT, RWKV7, GPTConfig, RWKV7Config
    from minigrad.train import generate_ids
    mg.manual_seed(0)
    net = (GPT(GPTConfig(vocab_size=13, d_model=16, n_layer=1, n_head=2, max_seq_len=8)) if model == "gpt"
           else RWKV7(RWKV7Config(vocab_size=13, d_model=16, n_layer=1, head_size=8)))
    prompt = np.array([5, 3, 2, 1, 7, 8, 9])
    ids = _within(60, generate_ids, net, prompt, 6, seed=1, window=1)
    assert len(ids) == 13 and np.array_equal(ids[:7], prompt)
    for bad in (-1, 2.5, True):
        with pytest.raises((TypeError, ValueError), match="tokens must be an int"):
            generate_ids(net, prompt, bad)
    with pytest.raises(ValueError, match="window must be >= 1"):
        generate_ids(net, prompt, 3, window=-2)


def test_generate_rejects_a_model_that_cannot_hold_two_tokens():
    from minigrad.models import GPT, GPTConfig
    from minigrad.train import generate_ids
    net = GPT(GPTConfig(vocab_size=13, d_model=16, n_layer=1, n_head=2, max_seq_len=1))
    with pytest.raises(ValueError, match="max_seq_len is 1"):
        generate_ids(net, np.array([5]), 3)
    assert np.array_equal(generate_ids(net, np.array([5]), 0), [5])


def test_a_fresh_run_sets_the_previous_one_aside(corpus, tmp_path):
    train(tiny(corpus, tmp_path, steps=6), log=quiet)
    train(tiny(corpus, tmp_path, steps=3), log=quiet)
    assert [s for s, _ in io.list_checkpoints(str(tmp_path))] == [3]
    assert io.list_checkpoints(str(tmp_path / "previous"))[-1][0] == 6
    assert os.path.exists(tmp_path / "previous" / "metrics.csv")


def test_cli_errors_are_one_clear_line(corpus, tmp_path, capsys):
    out = str(tmp_path)
    assert main(["train", "--config", "tiny", "--corpus", corpus, "--steps", "2", "--out", out,
                 "--sample-tokens", "0", "--no-progress", "--no-plot"]) == 0
    capsys.readouterr()
    assert main(["train", "--model", "rwkv7", "--out", out, "--resume", "--steps", "4"]) == 1
    assert "holds a 'gpt' model" in capsys.readouterr().err
    assert main(["train", "--corpus", str(tmp_path / "missing.txt"), "--steps", "2", "--out", out]) == 1
    assert "no such file or directory" in capsys.readouterr().err
    assert io.list_checkpoints(out) and not os.path.exists(os.path.join(out, "previous"))  # untouched
    assert main(["sample", "--ckpt", str(tmp_path / "nowhere")]) == 1
    assert "no such checkpoint" in capsys.readouterr().err


# ---- found by an audit of the CLI / training paths (3 Dec) ---------------------------------------

@pytest.mark.parametrize("kw,match", [
    (dict(minutes=0.0, steps=None), "minutes must be"), (dict(steps=0), "steps must be"),
    (dict(steps=-3), "steps must be"), (dict(minutes=-1.0, steps=None), "minutes must be"),
    (dict(eval_every=0), "eval_every must be"), (dict(warmup=-1), "warmup must be"),
    (dict(grad_clip=-1.0), "grad_clip must be"), (dict(batch_size=0), "batch_size must be"),
    (dict(seq_len=0), "seq_len must be"), (dict(keep=-1), "keep must be"),
    (dict(min_lr_ratio=-1.0), "min_lr_ratio must be"), (dict(lr=float("nan")), "lr must be"),
    (dict(sample_tokens=-1), "sample_tokens must be"), (dict(temperature=-1.0), "temperature"),
    (dict(top_k=0), "top_k"), (dict(top_p=1.5), "top_p"),
    (dict(val_fraction=1.0), r"val_fraction must be >= 0 and < 1")])
def test_bad_settings_fail_before_anything_is_written(corpus, tmp_path, kw, match):
    # --minutes 0 trained forever, --steps 0 crashed, --grad-clip -1 trained uphill, the sampling
    # settings failed only after the whole run
    with pytest.raises(ValueError, match=match):
        train(tiny(corpus, tmp_path, **kw), log=quiet)
    assert os.listdir(tmp_path) == []


def test_clip_grad_norm_rejects_a_negative_limit():
    p = mg.nn.Parameter(np.ones(3, np.float32))
    p.grad = mg.ones(3)
    with pytest.raises(ValueError, match="max_norm must be >= 0"):
        mg.nn.utils.clip_grad_norm_([p], -1.0)
    assert np.array_equal(p.grad.data, np.ones(3))


def test_a_failed_run_never_costs_the_previous_runs_checkpoints(corpus, tmp_path):
    train(tiny(corpus, tmp_path, steps=6), log=quiet)
    before = io.list_checkpoints(str(tmp_path))
    with pytest.raises(ValueError):                 # data check fails: nothing is moved
        train(tiny(corpus, tmp_path, seq_len=10**7), log=quiet)
    assert io.list_checkpoints(str(tmp_path)) == before and before[-1][0] == 6
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"event": "st')                   # a line cut short by a crash: resume still works
    assert train(tiny(corpus, tmp_path, steps=8, resume=True), log=quiet)["step"] == 8
    train(tiny(corpus, tmp_path, steps=3), log=quiet)     # a fresh run sets the old one aside ...
    os.unlink(io.latest_checkpoint(str(tmp_path)))        # ... then leaves only logs behind
    train(tiny(corpus, tmp_path, steps=2), log=quiet)     # and the next run must not drop previous/
    assert io.list_checkpoints(str(tmp_path / "previous"))[-1][0] == 8


def test_resume_with_another_size_or_tokenizer_is_an_error(corpus, tmp_path):
    train(tiny(corpus, tmp_path, steps=4), log=quiet)
    for kw in (dict(size="small"), dict(tokenizer="char")):
        with pytest.raises(io.CheckpointError, match="--resume"):
            train(tiny(corpus, tmp_path, steps=6, resume=True, **kw), log=quiet)


def test_default_prompt_falls_back_when_the_char_vocabulary_has_no_newline(tmp_path):
    path = tmp_path / "nonl.txt"
    path.write_text("abcdefgh" * 400)
    res = train(tiny(str(path), tmp_path / "run", tokenizer="char", seq_len=16, steps=2, sample_tokens=5),
                log=quiet)
    assert len(res["sample"]) == 6
    with pytest.raises(ValueError):
        train(tiny(str(path), tmp_path / "run2", tokenizer="char", seq_len=16, sample_tokens=5, prompt="Z"),
              log=quiet)


def test_cli_sample_and_train_errors_are_one_line(corpus, tmp_path, capsys):
    out = str(tmp_path / "run")
    assert main(["train", "--config", "tiny", "--corpus", corpus, "--steps", "2", "--out", out,
                 "--sample-tokens", "0", "--no-progress", "--no-plot"]) == 0
    capsys.readouterr()
    for extra in (["--tokens", "-1"], ["--temperature", "nan"], ["--top-p", "1.5"], ["--threads", "-1"],
                  ["--escapes", "--prompt", "a\\x"]):
        assert main(["sample", "--ckpt", out, *extra]) == 1
        err = capsys.readouterr().err
        assert err.startswith("minigrad sample: error:") and "Traceback" not in err, extra
    assert main(["sample", "--ckpt", out, "--tokens", "0", "--escapes", "--prompt", "café\\n"]) == 0
    assert capsys.readouterr().out.startswith("café\n")
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["train", "--config", "tiny", "--corpus", corpus, "--steps", "2", "--out", str(afile),
                 "--no-progress", "--no-plot"]) == 1
    assert capsys.readouterr().err.startswith("minigrad train: error:")


def test_a_model_or_optimizer_failure_never_costs_the_previous_run(corpus, tmp_path, monkeypatch):
    # regression: --beta2 1 passed the range check (<= 1), the previous run was set aside (emptying
    # previous/), then AdamW rejected beta2 = 1
    import minigrad.train as train_mod

    train(tiny(corpus, tmp_path, steps=2), log=quiet)
    train(tiny(corpus, tmp_path, steps=3), log=quiet)      # the first run goes to previous/
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.safetensors"))
    assert files == ["ckpt_00000003.safetensors", "previous/ckpt_00000002.safetensors"]
    with pytest.raises(ValueError, match="beta2 must be >= 0 and < 1"):
        train(tiny(corpus, tmp_path, steps=2, beta2=1.0), log=quiet)

    def failing_optimizer(model, cfg):
        raise ValueError("optimizer rejected a setting")
    monkeypatch.setattr(train_mod, "make_optimizer", failing_optimizer)
    with pytest.raises(ValueError, match="optimizer rejected"):
        train(tiny(corpus, tmp_path, steps=2), log=quiet)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.safetensors")) == files
    assert (tmp_path / "metrics.csv").exists()


def test_resume_with_a_seq_len_beyond_the_checkpoints_max_seq_len_fails_before_training(corpus, tmp_path):
    train(tiny(corpus, tmp_path, steps=2), log=quiet)       # a GPT with max_seq_len 1024
    metrics = (tmp_path / "metrics.csv").read_text()
    with pytest.raises(ValueError, match="seq_len 1100 exceeds the model's max_seq_len 1024"):
        train(tiny(corpus, tmp_path, steps=4, resume=True, seq_len=1100, batch_size=1, eval_batches=1),
              log=quiet)
    assert (tmp_path / "metrics.csv").read_text() == metrics


def test_cli_rejects_zero_threads_and_negative_seeds(corpus, tmp_path, capsys):
    # regression: `sample --threads 0` was silently ignored; a negative seed gave numpy's "expected
    # non-negative integer"
    out = str(tmp_path / "run")
    assert main(["train", "--config", "tiny", "--corpus", corpus, "--steps", "2", "--out", out,
                 "--sample-tokens", "0", "--no-progress", "--no-plot"]) == 0
    capsys.readouterr()
    for extra, match in ((["--threads", "0"], "n must be an int >= 1"),
                         (["--seed", "-1"], "seed must be an int >= 0")):
        assert main(["sample", "--ckpt", out, "--tokens", "2", *extra]) == 1
        assert match in capsys.readouterr().err
    assert main(["train", "--config", "tiny", "--corpus", corpus, "--steps", "2", "--out", out,
                 "--seed", "-1", "--no-progress", "--no-plot"]) == 1
    assert "seed must be an int >= 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="generate: seed must be an int >= 0"):
        mg.train.generate_ids(io.load_checkpoint(out).build_model(), np.array([1]), 2, seed=-1)


@pytest.fixture(scope="module")
def resumable(corpus, tmp_path_factory):
    """A 2-step tiny GPT run directory to copy and damage."""
    run = tmp_path_factory.mktemp("resumable")
    train(tiny(corpus, run, steps=2), log=quiet)
    return run


def _set(info, field, value):
    *parents, last = field.split(".")
    for key in parents:
        info = info[key]
    if value is KeyError:
        del info[last]
    else:
        info[last] = value


def _damaged_copy(resumable, tmp_path, field, value):
    """A copy of the `resumable` run whose latest checkpoint has `field` set to `value`; its path."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(resumable, run)
    path = io.latest_checkpoint(str(run))
    tensors, meta = io.load_safetensors(path)
    info = json.loads(meta["minigrad"])
    _set(info, field, value)
    io.save_safetensors(path, tensors, {**meta, "minigrad": json.dumps(info)})
    return run, path


@pytest.mark.parametrize("field, value, match", [
    ("rng", None, "rng.sampler must be"), ("rng.sampler", KeyError, "rng.sampler must be"),
    ("rng.sampler", [1], "rng.sampler must be"), ("rng.minigrad", KeyError, "rng.minigrad is not a numpy"),
    ("rng.minigrad", "abc", "rng.minigrad is not a numpy"),
    ("rng.sampler.bit_generator.state.state", 1.5, "rng.sampler.bit_generator is not a numpy"),
    ("rng.sampler.bit_generator.state.inc", -1, "rng.sampler.bit_generator is not a numpy"),
    ("rng.minigrad.bit_generator", "MT19937", "rng.minigrad is not a numpy"),
    ("rng.minigrad.uinteger", 2 ** 40, "rng.minigrad is not a numpy"),
    ("extra.elapsed_s", "12", "extra.elapsed_s must be"), ("extra.elapsed_s", -5.0, "elapsed_s must be"),
    ("extra.elapsed_s", float("nan"), "extra.elapsed_s must be"), ("extra.elapsed_s", True, "elapsed_s must"),
    ("extra.train", [1], "extra.train must be an object"),
    ("optimizer", None, "holds no optimizer state")])
def test_malformed_resume_records_fail_before_anything_changes(corpus, resumable, tmp_path, field, value,
                                                                match):
    # regression: a missing rng.sampler was a KeyError, a malformed generator state a TypeError /
    # OverflowError from numpy (a float state was truncated silently), elapsed_s "12" a TypeError in the
    # loop after metrics.csv was rewritten, -5 / nan resumed (nan never ends a --minutes run), a
    # list "train" a TypeError, and a checkpoint without optimizer state a TypeError
    import re

    run, path = _damaged_copy(resumable, tmp_path, field, value)
    files = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    rng = mg.get_rng_state()
    with pytest.raises(io.CheckpointError, match=re.escape(path) + ".*" + re.escape(match)):
        train(tiny(corpus, run, steps=4, resume=True), log=quiet)
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == files
    assert field == "optimizer" or mg.get_rng_state() == rng  # (building the model draws from it)


@pytest.mark.parametrize("value", [[1], "gpt"])
def test_cli_on_a_non_dict_train_record(resumable, tmp_path, capsys, value):
    # regression: `train --resume` raised a bare TypeError / dict() ValueError from the CLI's own
    # settings merge, `sample` an AttributeError traceback
    run, path = _damaged_copy(resumable, tmp_path, "extra.train", value)
    assert main(["train", "--out", str(run), "--resume", "--steps", "4", "--sample-tokens", "0"]) == 1
    assert f"{path}: extra.train must be an object" in capsys.readouterr().err
    # sampling needs only the weights and the tokenizer: the window hint is skipped
    assert main(["sample", "--ckpt", str(run), "--tokens", "3"]) == 0


def test_cli_sample_names_a_bad_seq_len(resumable, tmp_path, capsys):
    run, path = _damaged_copy(resumable, tmp_path, "extra.train.seq_len", "abc")
    assert main(["sample", "--ckpt", str(run), "--tokens", "3"]) == 1
    assert "extra.train.seq_len" in capsys.readouterr().err


def test_accumulated_gradient_is_the_mean_over_micro_batches():
    from minigrad.data import BatchSampler
    from minigrad.train import accumulate_gradients, build_model, lm_loss

    ids = np.random.default_rng(0).integers(0, 256, 5000)
    grads = []
    for batch, micro in ((4, 1), (2, 2)):
        model = build_model("gpt", "tiny", 256, 32, seed=1)
        loss = accumulate_gradients(model, BatchSampler(ids, batch, 32, seed=5), micro)
        grads.append((loss, {k: p.grad.data.copy() for k, p in model.named_parameters()}))
    x4, _ = BatchSampler(ids, 4, 32, seed=5).next()     # the two micro-batches are the batch's halves
    halves = BatchSampler(ids, 2, 32, seed=5)
    np.testing.assert_array_equal(np.concatenate([halves.next()[0], halves.next()[0]]), x4)
    (whole_loss, whole), (accum_loss, accum) = grads
    assert abs(accum_loss - whole_loss) < 1e-5 * abs(whole_loss)
    for key in whole:
        np.testing.assert_allclose(accum[key], whole[key], rtol=1e-4, atol=1e-7, err_msg=key)
    model = build_model("gpt", "tiny", 256, 32, seed=1)
    x, y = BatchSampler(ids, 4, 32, seed=5).next()
    lm_loss(model, x, y).backward()
    np.testing.assert_array_equal(model.norm.weight.grad.data, whole["norm.weight"])


def test_grad_accum_and_checkpointing_in_a_run(tmp_path):
    """--grad-accum 2 with batch 2 takes the steps batch 4 takes (fp32 rounding apart), and
    --gradient-checkpointing gives the same parameters bit for bit."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 200)
    runs = {}
    for name, kw in {"whole": dict(batch_size=4), "accum": dict(batch_size=2, grad_accum=2),
                     "ckpt": dict(batch_size=4, gradient_checkpointing=True)}.items():
        result = train(tiny(str(corpus), tmp_path / name, steps=3, grad_clip=0.0, **kw), log=quiet)
        runs[name] = params(result["model"])
    for key, value in runs["whole"].items():
        np.testing.assert_allclose(runs["accum"][key], value, rtol=2e-4, atol=2e-6, err_msg=key)
        np.testing.assert_array_equal(runs["ckpt"][key], value, err_msg=key)
    with pytest.raises(ValueError, match="grad_accum must be an int >= 1"):
        train(tiny(str(corpus), tmp_path / "bad", grad_accum=0), log=quiet)


def test_sample_into_a_pipe_closed_early_stops_quietly(corpus, tmp_path):
    """`python -m minigrad sample ... | head -c 5`: no error message, no traceback once head leaves."""
    train(tiny(corpus, tmp_path / "run", steps=2), log=quiet)
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "minigrad", "sample", "--ckpt", str(tmp_path / "run"),
                             "--tokens", "3000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=ROOT)
    assert len(proc.stdout.read(5)) == 5
    proc.stdout.close()                      # the reader leaves, as head does
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert proc.returncode == 1 and err == "", err


@pytest.mark.parametrize("command", [["info"], ["eval", "--max-tokens", "200"], ["export", "--hf", "{out}"]])
def test_commands_printing_at_the_end_into_a_closed_pipe_stop_quietly(corpus, tmp_path, command):
    """`python -m minigrad info|eval|export ... | true`: their one print comes after the work (outside
    the command's error handling): no traceback when the reader has already left, exit status 1."""
    train(tiny(corpus, tmp_path / "run", steps=2), log=quiet)
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    args = [a.format(out=tmp_path / "hf") for a in command]
    proc = subprocess.Popen([sys.executable, "-m", "minigrad", args[0], "--ckpt", str(tmp_path / "run"),
                             *args[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    proc.stdout.close()                      # the reader left before anything was printed
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in err and err == "", err
