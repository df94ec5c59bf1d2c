"""Fuzz every raw kernel entry point (minigrad.kernels.<family>.<fn>) with bad input, in a
subprocess so that a segfault fails this test instead of killing the suite.

See tests/_fuzz_worker.py for the mutations and what each must do (raise a clear error, give the
contiguous result, or at least not crash). The worker prints each case before running it, so a
crash names the case.
"""

from _fuzz_run import run_group


def test_raw_kernels_reject_bad_input_without_crashing():
    cases, failures = run_group("kernels", max_examples=300)
    assert cases > 5000, cases
    assert not failures, "\n".join(failures[:40])
