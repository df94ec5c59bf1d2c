"""Fuzz the public fused ops (F.*), linear, embedding and both models' forward with bad input,
in a subprocess (a segfault fails this test, not the suite). See tests/_fuzz_functional_cases.py."""

from _fuzz_run import run_group


def test_functional_ops_and_models_reject_bad_input_without_crashing():
    cases, failures = run_group("functional", max_examples=300)
    assert cases > 2500, cases
    assert not failures, "\n".join(failures[:40])
