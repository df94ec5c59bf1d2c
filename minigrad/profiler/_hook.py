"""The recording hook `Function.apply` and the backward engine call when `enabled` is set.

`enabled` counts the profiles active in any thread; the hot paths check it and nothing else while
it is 0. Each profile records into a `Recorder` held by its own thread (a thread-local), so a
profile sees only the ops its thread runs.
"""
import threading
import time

enabled = 0
_lock = threading.Lock()
_local = threading.local()
_now = time.perf_counter_ns


class Recorder:
    """Events of one profile as tuples (name, phase, start_ns, dur_ns, self_ns, depth, shapes).

    An event's self time is its duration less the durations of the events recorded while it ran
    (its direct children); `_open` holds those sums for the events still running."""

    __slots__ = ("events", "record_shapes", "active", "_open")

    def __init__(self, record_shapes):
        self.events = []
        self.active = False
        self.record_shapes = record_shapes
        self._open = [0]

    def begin(self):
        self._open.append(0)
        return _now()

    def end(self, name, phase, start, shapes):
        dur = _now() - start
        children = self._open.pop()
        self._open[-1] += dur
        self.events.append((name, phase, start, dur, dur - children, len(self._open) - 1, shapes))

    def run(self, fn, name, phase, ctx, args, kwargs):
        shapes = _shapes(args) if self.record_shapes else None
        start = self.begin()
        try:
            return fn(ctx, *args, **kwargs)
        finally:
            self.end(name, phase, start, shapes)


def _shapes(args):
    return tuple(tuple(a.shape) if hasattr(a, "shape") else None for a in args)


def current():
    """The Recorder of the profile active in this thread, or None."""
    rec = getattr(_local, "recorder", None)
    return rec if rec is not None and rec.active else None


def call(fn, name, phase, ctx, args, kwargs):
    """fn(ctx, *args, **kwargs), timed when this thread has an active profile."""
    rec = getattr(_local, "recorder", None)
    if rec is None or not rec.active:
        return fn(ctx, *args, **kwargs)
    return rec.run(fn, name, phase, ctx, args, kwargs)


def start(recorder):
    global enabled
    if current() is not None:
        raise RuntimeError("profiler: a profile is already active in this thread")
    _local.recorder = recorder
    with _lock:
        recorder.active = True
        enabled += 1


def stop(recorder):
    global enabled
    if getattr(_local, "recorder", None) is recorder:
        _local.recorder = None
    with _lock:
        if recorder.active:
            recorder.active = False
            enabled -= 1
