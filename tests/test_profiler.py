"""minigrad.profiler: per-op forward/backward times of a tiny GPT step, self vs total time of nested
calls, record_function, the Chrome trace, the block's limits in time and threads, and that
profiling changes no result."""
import collections
import json
import threading
import time

import numpy as np
import pytest

import minigrad as mg
from minigrad import functional as F
from minigrad.autograd import engine
from minigrad.autograd.function import Function
from minigrad.models import GPT, GPTConfig
from minigrad.profiler import _hook, profile, record_function
from minigrad.utils.checkpoint import checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")

L = 2


def gpt_step(prof=None):
    """Loss and parameter grads of one tiny-GPT step; with `prof`, the backward graph's node names
    (collected before backward runs) go to prof["nodes"]."""
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, d_model=8, n_layer=L, n_head=2, ffn_hidden=16, max_seq_len=16))
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 11, (2, 5)), rng.integers(0, 11, (2, 5))
    loss = F.cross_entropy(model(x).reshape(-1, 11), y.reshape(-1))
    if prof is not None:
        prof["nodes"] = collections.Counter(n.name for n in engine._collect([loss]))
    loss.backward()
    return loss.data.copy(), [p.grad.data.copy() for p in model.parameters()]


def calls(prof, phase):
    return {r.name: r.calls for r in prof.key_averages() if r.phase == phase}


def check_self_times(events):
    """Each event's self time is its total less the totals of the events one level deeper that ran
    inside it."""
    for e in events:
        inner = [c.total_ms for c in events if c.depth == e.depth + 1
                 and e.start_ms <= c.start_ms and c.start_ms + c.total_ms <= e.start_ms + e.total_ms]
        assert e.self_ms == pytest.approx(e.total_ms - sum(inner), abs=1e-6)
        assert 0 <= e.self_ms <= e.total_ms


def test_gpt_step_lists_ops_of_both_phases():
    info = {}
    with profile(record_shapes=True) as prof:
        gpt_step(info)
    fwd, bwd = calls(prof, "forward"), calls(prof, "backward")
    expected = {"Embedding": 1, "Linear": 4 * L + 1, "SplitQKVRoPE": L, "CausalAttention": L,
                "SwiGLUPacked": L, "AddRMSNorm": 2 * L, "RMSNormFn": 1, "CrossEntropy": 1}
    assert {k: fwd.get(k) for k in expected} == expected
    assert bwd == dict(info["nodes"])
    assert {k: bwd.get(k) for k in expected} == expected
    assert {r.phase for r in prof.key_averages()} == {"forward", "backward"}
    shapes = {r.input_shapes for r in prof.key_averages(group_by_input_shape=True) if r.name == "Embedding"}
    assert ((11, 8), (2, 5), None) in shapes and ((2, 5, 8),) in shapes


def test_times_add_up():
    with profile() as prof:
        gpt_step()
    events, rows = prof.events, prof.key_averages()
    check_self_times(events)
    assert all(e.depth == 0 for e in events)
    assert sum(e.self_ms for e in events) <= prof.total_ms
    assert sum(r.self_ms for r in rows) == pytest.approx(sum(e.self_ms for e in events))
    assert sum(r.self_pct for r in rows) <= 100.0 + 1e-9
    for r in rows:
        assert 0 <= r.self_ms <= r.total_ms and r.mean_ms == pytest.approx(r.total_ms / r.calls)
        assert r.total_pct == pytest.approx(100.0 * r.total_ms / prof.total_ms)


def test_record_function_is_an_enclosing_event():
    with profile() as prof:
        with record_function("step"):
            gpt_step()
        with record_function("idle"):
            time.sleep(0.002)
    step = [e for e in prof.events if e.name == "step"]
    assert len(step) == 1 and step[0].phase == "region" and step[0].depth == 0
    assert all(e.depth == 1 for e in prof.events if e.phase != "region")
    check_self_times(prof.events)
    idle = next(r for r in prof.key_averages() if r.name == "idle")
    assert idle.calls == 1 and idle.self_ms == idle.total_ms >= 2.0
    lines = prof.table(sort_by="name", row_limit=None).splitlines()[2:-2]
    names = [line.split("|")[1].strip() for line in lines]
    assert names == sorted(names) and {"step", "idle", "Linear"} <= set(names)
    with record_function("no profile"):                 # outside a profile: nothing, no error
        pass


class Inner(Function):
    @staticmethod
    def forward(ctx, x):
        time.sleep(0.03)
        return x + 1

    @staticmethod
    def backward(ctx, g):
        return g


class Outer(Function):
    @staticmethod
    def forward(ctx, x):
        time.sleep(0.02)
        return Inner.apply(mg.tensor(x)).data * 2

    @staticmethod
    def backward(ctx, g):
        time.sleep(0.01)
        return Inner.apply(mg.tensor(g)).data * 2


def test_nested_calls_count_once_in_self_time():
    x = mg.ones(3, requires_grad=True)
    with profile() as prof:
        Outer.apply(x).sum().backward()
    order = [(e.name, e.phase, e.depth) for e in prof.events]
    assert order == [("Inner", "forward", 1), ("Outer", "forward", 0), ("Sum", "forward", 0),
                     ("Sum", "backward", 0), ("Inner", "forward", 1), ("Outer", "backward", 0)]
    inner, outer, _, _, inner_b, outer_b = prof.events
    assert outer.self_ms == pytest.approx(outer.total_ms - inner.total_ms, abs=1e-6)
    assert inner.self_ms == inner.total_ms >= 30.0
    assert 20.0 <= outer.self_ms < outer.total_ms - 29.0
    assert outer_b.self_ms == pytest.approx(outer_b.total_ms - inner_b.total_ms, abs=1e-6)
    assert 10.0 <= outer_b.self_ms < outer_b.total_ms - 29.0
    check_self_times(prof.events)
    assert sum(e.self_ms for e in prof.events) <= prof.total_ms
    np.testing.assert_array_equal(x.grad.data, [4.0, 4.0, 4.0])


def test_checkpoint_nests_recomputation():
    x = mg.randn(3, 4, requires_grad=True)
    with profile() as prof:
        checkpoint(lambda t: (t * t).sum(), x).backward()
    by = collections.defaultdict(list)
    for e in prof.events:
        by[e.name, e.phase].append(e.depth)
    assert by["_Checkpoint", "forward"] == [0] and by["_Checkpoint", "backward"] == [0]
    assert by["Mul", "forward"] == [1, 1] and by["Mul", "backward"] == [1] and by["Sum", "backward"] == [1]
    check_self_times(prof.events)


def test_chrome_trace(tmp_path):
    with profile(record_shapes=True) as prof:
        with record_function("step"):
            gpt_step()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert len(events) == len(prof.events)
    for e in events:
        assert {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["ph"] == "X" and e["cat"] in ("forward", "backward", "region")
        assert e["ts"] >= 0 and 0 <= e["args"]["self_us"] <= e["dur"]
    step = next(e for e in events if e["name"] == "step")
    assert step["dur"] == pytest.approx(prof.events[-1].total_ms * 1e3, abs=1e-3)
    end = step["ts"] + step["dur"] + 1e-3
    assert all(step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= end for e in events)
    assert any("input_shapes" in e["args"] for e in events)


def test_nothing_recorded_outside_the_block():
    a = mg.ones(4, requires_grad=True)
    (a * 2).sum().backward()
    with profile() as prof:
        (a + 1).sum().backward()
    names = {(e.name, e.phase) for e in prof.events}
    assert names == {("Add", "forward"), ("Sum", "forward"), ("Sum", "backward"), ("Add", "backward")}
    n, wall = len(prof.events), prof.total_ms
    (a * 3).sum().backward()
    assert len(prof.events) == n and prof.total_ms == wall and _hook.enabled == 0
    with profile() as again:
        pass
    assert again.events == [] and again.key_averages() == [] and "0 of 0 rows" in again.table()


def test_profiling_changes_no_result():
    loss, grads = gpt_step()
    with profile(record_shapes=True):
        loss_p, grads_p = gpt_step()
    np.testing.assert_array_equal(loss_p, loss)
    for g, gp in zip(grads, grads_p):
        np.testing.assert_array_equal(gp, g)


def test_errors_leave_the_profile_usable():
    class Boom(Function):
        @staticmethod
        def forward(ctx, x):
            raise ValueError("boom")

    with profile() as prof:
        with pytest.raises(RuntimeError, match="already active"):
            with profile():
                pass
        with pytest.raises(ValueError):
            Boom.apply(mg.ones(2))
        mg.ones(2) + 1
    assert [(e.name, e.depth) for e in prof.events] == [("Boom", 0), ("Add", 0)]
    with pytest.raises(ValueError, match="sort_by"):
        prof.table(sort_by="cpu_time")
    assert _hook.enabled == 0


def _own_ops(op_name, go, results):
    cls = type(op_name, (Function,), {"forward": staticmethod(lambda ctx, x: x + 1),
                                      "backward": staticmethod(lambda ctx, g: g)})
    with profile() as prof:
        go.wait()
        for _ in range(50):
            cls.apply(mg.ones(2, requires_grad=True)).sum().backward()
    results[op_name] = {e.name for e in prof.events}


def test_threads_record_only_their_own_ops():
    go, results = threading.Barrier(2), {}
    threads = [threading.Thread(target=_own_ops, args=(name, go, results)) for name in ("OpA", "OpB")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"OpA": {"OpA", "Sum"}, "OpB": {"OpB", "Sum"}}


def test_exit_in_another_thread_still_ends_the_profile():
    prof = profile().__enter__()
    worker = threading.Thread(target=prof.__exit__, args=(None, None, None))
    worker.start()
    worker.join()
    mg.ones(2) + 1
    assert prof.events == [] and _hook.enabled == 0
    with profile() as again:
        mg.ones(2) + 1
    assert [e.name for e in again.events] == ["Add"]
