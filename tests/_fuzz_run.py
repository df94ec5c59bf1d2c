"""Run a fuzz worker group in a subprocess and turn its report into test failures."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_group(group, max_examples, timeout=120, env=None):
    """Returns (cases, failure lines); a crash or hang fails with the case that was running."""
    # passive OpenMP waiting: thousands of tiny kernel calls on a busy machine otherwise spend
    # most of their time spinning (see docs/robustness.md)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), HERE]),
        OMP_WAIT_POLICY="passive",
        PYTHONWARNINGS="ignore",
        **(env or {}),
    )
    try:
        proc = subprocess.run(
            [sys.executable, os.path.join(HERE, "_fuzz_worker.py"), group, str(max_examples)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        last = [ln for ln in out.splitlines() if ln.startswith("CASE ")][-1:]
        raise AssertionError(f"fuzz group {group!r} hung (> {timeout} s) in {last}") from None
    lines = proc.stdout.splitlines()
    cases = [ln for ln in lines if ln.startswith("CASE ")]
    if proc.returncode != 0 or not lines or not lines[-1].startswith("DONE"):
        raise AssertionError(
            f"fuzz worker {group!r} died (exit code {proc.returncode}) in "
            f"{cases[-1:]} after {len(cases)} cases\n{proc.stderr[-3000:]}"
        )
    failures = [ln for ln in lines if ln.startswith("FAIL ")]
    print(f"fuzz {group}: {len(cases)} cases, {len(failures)} failures")
    return len(cases), failures
