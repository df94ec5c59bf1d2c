"""Aggregation of profile events: per-op rows, the text table and the Chrome trace."""
import dataclasses
import json
from typing import Optional

_SORT_KEYS = {"total": "total_ms", "self": "self_ms", "mean": "mean_ms", "calls": "calls"}


@dataclasses.dataclass(frozen=True)
class OpStats:
    """Summed wall time of the calls of one op in one phase. mean_ms = total_ms / calls; the
    percentages are of the profile's wall time (self_pct of all rows add up to at most 100)."""

    name: str
    phase: str
    calls: int
    total_ms: float
    self_ms: float
    mean_ms: float
    total_pct: float
    self_pct: float
    input_shapes: Optional[tuple] = None


class KeyAverages(list):
    """A list of `OpStats` that knows the profile's wall time, printable with `table()`."""

    def __init__(self, rows, wall_ms):
        super().__init__(rows)
        self.wall_ms = wall_ms

    def table(self, sort_by="total", row_limit=20):
        """The rows as a markdown table, largest `sort_by` first (name: alphabetical); row_limit
        None or negative: every row."""
        return _table(self, sort_by, row_limit, self.wall_ms)


def key_averages(events, wall_ms, by_shape):
    groups = {}
    for e in events:
        key = (e.name, e.phase, e.input_shapes if by_shape else None)
        g = groups.setdefault(key, [0, 0.0, 0.0])
        g[0] += 1
        g[1] += e.total_ms
        g[2] += e.self_ms
    pct = 100.0 / wall_ms if wall_ms > 0 else 0.0
    rows = [OpStats(name, phase, n, tot, slf, tot / n, tot * pct, slf * pct, shapes)
            for (name, phase, shapes), (n, tot, slf) in groups.items()]
    return KeyAverages(rows, wall_ms)


def _table(rows, sort_by, row_limit, wall_ms):
    if sort_by == "name":
        rows = sorted(rows, key=lambda r: (r.name, r.phase))
    elif sort_by in _SORT_KEYS:
        rows = sorted(rows, key=lambda r: getattr(r, _SORT_KEYS[sort_by]), reverse=True)
    else:
        raise ValueError(f"table: sort_by must be one of {sorted(_SORT_KEYS) + ['name']}, got {sort_by!r}")
    shown = rows if row_limit is None or row_limit < 0 else rows[:row_limit]     # torch's -1: all
    shapes = any(r.input_shapes is not None for r in rows)
    head = ["Name", "Phase", "Calls", "Self ms", "Self %", "Total ms", "Total %", "Mean ms"]
    body = [[r.name, r.phase, str(r.calls), f"{r.self_ms:.3f}", f"{r.self_pct:.1f}", f"{r.total_ms:.3f}",
             f"{r.total_pct:.1f}", f"{r.mean_ms:.4f}"] + ([_fmt_shapes(r.input_shapes)] if shapes else [])
            for r in shown]
    head += ["Input shapes"] if shapes else []
    widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head))]
    right = [False, False] + [True] * 6 + [False]

    def line(cells):
        padded = (c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right))
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 1) + (":" if r else "-") for w, r in zip(widths, right)) + "|"
    self_ms = sum(r.self_ms for r in rows)
    share = 100.0 * self_ms / wall_ms if wall_ms > 0 else 0.0
    foot = (f"{len(shown)} of {len(rows)} rows; wall time {wall_ms:.3f} ms, self time of all recorded "
            f"events {self_ms:.3f} ms ({share:.1f} %); the rest ran outside every recorded event")
    return "\n".join([line(head), rule] + [line(b) for b in body] + ["", foot])


def _fmt_shapes(shapes):
    if shapes is None:
        return ""
    return ", ".join("-" if s is None else "x".join(map(str, s)) or "scalar" for s in shapes)


def chrome_trace(events, pid, tid):
    """JSON text of a Chrome trace: one complete ("X") event per call, ts and dur in µs."""
    out = []
    for e in sorted(events, key=lambda e: (e.start_ms, -e.total_ms)):
        ev = {"name": e.name, "cat": e.phase, "ph": "X", "ts": round(e.start_ms * 1e3, 3),
              "dur": round(e.total_ms * 1e3, 3), "pid": pid, "tid": tid,
              "args": {"self_us": round(e.self_ms * 1e3, 3)}}
        if e.input_shapes is not None:
            ev["args"]["input_shapes"] = [None if s is None else list(s) for s in e.input_shapes]
        out.append(ev)
    return json.dumps({"traceEvents": out, "displayTimeUnit": "ms"})
