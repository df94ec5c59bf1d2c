"""`profile` and `record_function`: what a block records and how to read it back."""
import contextlib
import os
import threading
from typing import NamedTuple, Optional

from minigrad.profiler import _hook, _report


class Event(NamedTuple):
    """One timed call, times in ms from the start of the profile. self_ms: total_ms less the
    time of the events nested in it; depth: how many recorded events enclose it."""

    name: str
    phase: str
    start_ms: float
    total_ms: float
    self_ms: float
    depth: int
    input_shapes: Optional[tuple]


class profile:
    """Records the wall time of every Function forward and backward (the op's `forward` /
    `backward` call, not the tape's bookkeeping around it) and every `record_function` region run
    by this thread inside the block, including the backward of `loss.backward()`. Other threads'
    ops are not recorded. record_shapes: keep the shapes of the arrays each call received (forward:
    the op's inputs; backward: the gradients of its outputs)."""

    def __init__(self, record_shapes=False):
        self.record_shapes = record_shapes
        self._rec, self._tid = None, 0
        self._t0 = self._t1 = None

    def __enter__(self):
        rec = _hook.Recorder(self.record_shapes)
        _hook.start(rec)
        self._rec, self._tid = rec, threading.get_native_id()
        self._t0, self._t1 = _hook._now(), None
        return self

    def __exit__(self, *exc):
        self._t1 = _hook._now()
        _hook.stop(self._rec)
        return False

    def _wall_ns(self):
        if self._t0 is None:
            return 0
        return (self._t1 if self._t1 is not None else _hook._now()) - self._t0

    @property
    def total_ms(self):
        """Wall time of the block (so far, inside it)."""
        return self._wall_ns() / 1e6

    @property
    def events(self):
        """The recorded calls, as `Event`s in order of completion."""
        if self._rec is None:
            return []
        t0 = self._t0
        return [Event(n, ph, (s - t0) / 1e6, d / 1e6, sf / 1e6, depth, shp)
                for n, ph, s, d, sf, depth, shp in self._rec.events]

    def key_averages(self, group_by_input_shape=False):
        """One `OpStats` row per (name, phase), or per (name, phase, input shapes)."""
        return _report.key_averages(self.events, self.total_ms, group_by_input_shape)

    def table(self, sort_by="total", row_limit=20, group_by_input_shape=False):
        """`key_averages()` as a markdown table, sorted by "total", "self", "mean", "calls" or
        "name", with a footer comparing the summed self time to the block's wall time. row_limit
        None or negative (torch's -1): every row."""
        return self.key_averages(group_by_input_shape).table(sort_by, row_limit)

    def export_chrome_trace(self, path):
        """Write the events as a Chrome trace (JSON, ph "X", ts/dur in µs from the block's start),
        atomically."""
        from minigrad.io import atomic_write_bytes

        trace = _report.chrome_trace(self.events, os.getpid(), self._tid)
        atomic_write_bytes(path, trace.encode("utf-8"))


class record_function(contextlib.ContextDecorator):
    """Times the block as an event `name` of phase "region" in this thread's active profile;
    nothing without one. Ops run inside it are its nested events."""

    def __init__(self, name):
        self.name = str(name)
        self._local = threading.local()     # per thread: one instance may be entered by several

    def _recreate_cm(self):
        return record_function(self.name)

    def _open(self):
        """This thread's stack of (recorder, start) of the blocks entered and not yet left."""
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def __enter__(self):
        rec = _hook.current()
        self._open().append((rec, rec.begin() if rec is not None else None))
        return self

    def __exit__(self, *exc):
        rec, start = self._open().pop()
        if rec is not None and _hook.current() is rec:
            rec.end(self.name, "region", start, None)
        return False
