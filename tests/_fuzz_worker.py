"""Fuzz worker, run in a subprocess by tests/test_fuzz_*.py so that a segfault fails a test
instead of killing the suite.

    python tests/_fuzz_worker.py <group> [max_examples]

Prints `CASE <id>` (flushed) before each case, `FAIL <id> :: <why>` for each wrong outcome and
`DONE <cases> <failures>` at the end. A crash therefore leaves the offending case as the last
CASE line. Groups: "kernels" (raw minigrad.kernels.* entry points), "functional" (F.*).

Each case feeds one (or, in the hypothesis part, two) bad arguments into an otherwise valid call:
- must raise (TypeError/ValueError/IndexError/MemoryError/OverflowError/BufferError, with a message): wrong
  dtype, mixed float32/float64, int where float belongs, wrong rank, every dim off by one (incl.
  zero-size), non-contiguous or negative-stride arrays where C-contiguity is required, None,
  lists, read-only outputs, index values < 0 or >= the bound, invalid scalars;
- must give the same result as the contiguous call: strided views where strides are accepted;
- must not crash (any clean outcome is fine): NaN/inf values, odd but legal scalars.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CLEAN = (TypeError, ValueError, IndexError, MemoryError, OverflowError, BufferError)


# ---- array mutations ---------------------------------------------------------------------------


def _noncontig(x, axis):
    shape = list(x.shape)
    shape[axis] *= 2
    base = np.zeros(shape, x.dtype)
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(None, None, 2)
    view = base[tuple(idx)]
    view[...] = x
    return view


def _negstride(x):
    return np.ascontiguousarray(x[::-1])[::-1]


def _resized(x, axis, delta):
    shape = list(x.shape)
    shape[axis] += delta
    return np.resize(x, shape) if np.prod(shape) else np.zeros(shape, x.dtype)


def array_mutations(arg):
    """(name, kind, make) for an Arr: kind is 'raise', 'same' or 'nocrash'."""
    x = arg.value
    is_index = arg.high is not None
    muts = []
    other = np.float64 if x.dtype == np.float32 else np.float32
    if is_index:

        def poke(i, v):
            y = x.copy()
            y.reshape(-1)[i] = v
            return y

        muts += [
            ("float64", "raise", lambda: x.astype(np.float64)),
            ("int32", "raise", lambda: x.astype(np.int32)),
            # -2, not -1: a kernel's ignore_index may itself be mutated to -1, making -1 valid
            ("neg_index", "raise", lambda: poke(x.size // 2, -2)),
            ("index_eq_bound", "raise", lambda: poke(0, arg.high)),
            ("index_huge", "raise", lambda: poke(-1, 1 << 40)),
        ]
    else:
        muts += [
            ("int64", "raise", lambda: x.astype(np.int64)),
            ("float16", "raise", lambda: x.astype(np.float16)),
            ("other_float", "nocrash" if len(arg.free) == x.ndim else "raise", lambda: x.astype(other)),
            ("nan", "nocrash", lambda: np.full_like(x, np.nan)),
            (
                "inf",
                "nocrash",
                lambda: np.where(np.arange(x.size).reshape(x.shape) % 2, np.inf, -np.inf).astype(x.dtype),
            ),
        ]
    if x.size > 1 and not is_index:
        muts.append(
            (
                "overlapping_strides",
                "raise" if not arg.strided else "nocrash",
                lambda: np.lib.stride_tricks.as_strided(x, strides=(0,) * x.ndim),
            )
        )
    if x.ndim and x.size:
        kind = "same" if arg.strided else "raise"
        muts += [
            ("noncontig_last", kind if arg.strided else "raise", lambda: _noncontig(x, -1)),
            ("noncontig_first", kind, lambda: _noncontig(x, 0)),
            ("negstride", kind, lambda: _negstride(x)),
        ]
    muts += [
        ("rank_plus_1", "raise", lambda: x[None]),
        ("none", "raise", lambda: None),
        ("list", "raise", lambda: x.tolist()),
    ]
    if x.ndim:
        muts.append(("rank_minus_1", "raise", lambda: x.reshape(x.shape[1:]) if x.shape[0] == 1 else x[0]))
    for ax in range(x.ndim):
        kind = "nocrash" if ax in arg.free else "raise"
        muts.append((f"dim{ax}_plus_1", kind, lambda ax=ax: _resized(x, ax, 1)))
        if x.shape[ax] > 0:
            muts.append((f"dim{ax}_minus_1", kind, lambda ax=ax: _resized(x, ax, -1)))
            muts.append((f"dim{ax}_zero", kind, lambda ax=ax: _resized(x, ax, -x.shape[ax])))
    if arg.out:

        def readonly():
            y = x.copy()
            y.flags.writeable = False
            return y

        muts.append(("readonly", "raise", readonly))
    legal = set(arg.legal)
    if x.ndim and x.shape[0] == 1:
        legal |= {"noncontig_first", "negstride"}  # a length-1 axis: still C-contiguous
    return [
        (n, ("same" if n.startswith(("noncontig", "negstride")) else "nocrash") if n in legal else k, f)
        for n, k, f in muts
    ]


def num_mutations(arg):
    muts = [(f"bad={v!r}", "raise", lambda v=v: v) for v in arg.bad]
    muts += [(f"odd={v!r}", "nocrash", lambda v=v: v) for v in arg.odd]
    if not isinstance(arg.value, bool) and arg.value is not None:
        muts += [("none", "raise", lambda: None), ("str", "raise", lambda: "x")]
    return muts


# ---- running cases -----------------------------------------------------------------------------


class Runner:
    def __init__(self):
        self.cases = 0
        self.failures = []

    def start(self, cid):
        self.cases += 1
        print(f"CASE {cid}", flush=True)

    def fail(self, cid, why):
        self.failures.append(cid)
        print(f"FAIL {cid} :: {why}", flush=True)

    def check(self, cid, kind, thunk, reference=None, compare=None):
        """Run thunk() (returns the outputs to compare); judge the outcome by `kind`."""
        self.start(cid)
        try:
            out = thunk()
        except CLEAN as e:
            if kind == "raise" and not str(e).strip():
                self.fail(cid, f"raised {type(e).__name__} without a message")
            return
        except Exception as e:  # noqa: BLE001 - any other exception type is a finding
            self.fail(cid, f"unexpected {type(e).__name__}: {e}")
            return
        if kind == "raise":
            self.fail(cid, "accepted bad input without an error")
        elif kind == "same" and compare is not None and not compare(out, reference):
            self.fail(cid, "strided input gave a different result from the contiguous one")


def combined_kind(kinds, labels):
    """What two mutations at once must do: raise if any must, unless all the raising ones are
    shape changes (two consistent shape changes can make a valid call); two 'same' -> nocrash."""
    raising = [lab for k, lab in zip(kinds, labels) if k == "raise"]
    if not raising:
        return "nocrash"
    shape_only = all(lab.split()[-1].startswith(("dim", "rank")) for lab in raising)
    return "nocrash" if shape_only and len(kinds) > 1 else "raise"


def fresh(args):
    """A copy of a call's arguments: new argument objects, arrays copied (kernels write in place)."""
    out = []
    for a in args:
        b = type(a).__new__(type(a))
        b.__dict__.update(a.__dict__)
        if isinstance(b.value, np.ndarray):
            b.value = b.value.copy()
        out.append(b)
    return out


def _same(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        tol = 1e-5 if x.dtype == np.float32 else 1e-12
        if x.shape != y.shape or not np.allclose(x, y, rtol=tol, atol=tol, equal_nan=True):
            return False
    return True


def kernel_cases(runner, dtypes=(np.float32, np.float64)):
    from _fuzz_kernel_cases import Arr, Num, kernel_calls, output_arrays

    for dt in dtypes:
        calls = kernel_calls(dt)
        for name, call in calls.items():
            base_args = fresh(call.args)
            cid = f"{name}[{np.dtype(dt).name}] valid"
            runner.start(cid)
            try:
                call.run(base_args)
            except Exception as e:  # noqa: BLE001
                runner.fail(cid, f"the valid call raised {type(e).__name__}: {e}")
                continue
            reference = output_arrays(call, base_args)
            for i, arg in enumerate(call.args):
                muts = (
                    array_mutations(arg)
                    if isinstance(arg, Arr)
                    else (num_mutations(arg) if isinstance(arg, Num) else [])
                )
                for mname, kind, make in muts:
                    args = fresh(call.args)
                    args[i].value = make()

                    def thunk(args=args, call=call):
                        call.run(args)
                        return output_arrays(call, args)

                    runner.check(f"{name}[{np.dtype(dt).name}] arg{i} {mname}", kind, thunk, reference, _same)


def hypothesis_kernel_cases(runner, max_examples):
    """Two simultaneous mutations and random shapes/values, drawn by hypothesis."""
    from _fuzz_kernel_cases import Arr, kernel_calls, output_arrays
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    calls = {dt: kernel_calls(dt, seed=1) for dt in (np.float32, np.float64)}
    names = sorted(calls[np.float32])

    @settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def run(data):
        dt = data.draw(st.sampled_from([np.float32, np.float64]))
        name = data.draw(st.sampled_from(names))
        call = calls[dt][name]
        args = fresh(call.args)
        picked = data.draw(st.lists(st.integers(0, len(args) - 1), min_size=1, max_size=2, unique=True))
        kinds, labels = [], []
        for i in picked:
            arg = args[i]
            muts = array_mutations(arg) if isinstance(arg, Arr) else num_mutations(arg)
            if not muts:
                continue
            mname, kind, make = data.draw(st.sampled_from(muts))
            arg.value = make()
            kinds.append(kind)
            labels.append(f"arg{i} {mname}")
        if not kinds:
            return
        kind = combined_kind(kinds, labels)

        def thunk():
            call.run(args)
            return output_arrays(call, args)

        runner.check(f"hyp {name}[{np.dtype(dt).name}] " + " + ".join(labels), kind, thunk)

    run()


def main():
    group = sys.argv[1]
    max_examples = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    runner = Runner()
    if group == "kernels":
        kernel_cases(runner)
        if max_examples:
            hypothesis_kernel_cases(runner, max_examples)
    elif group == "functional":
        from _fuzz_functional_cases import functional_cases

        functional_cases(runner, max_examples)
    else:
        raise SystemExit(f"unknown group {group!r}")
    print(f"DONE {runner.cases} {len(runner.failures)}", flush=True)


if __name__ == "__main__":
    main()
