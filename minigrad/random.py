"""minigrad's global random generator (parameter init, dropout, randn/rand, sampling)."""
import numpy as np

_state = {"gen": np.random.default_rng()}


def manual_seed(seed):
    """Reseed the global generator; the same seed gives the same numbers."""
    _state["gen"] = np.random.default_rng(int(seed))
    return _state["gen"]


def default_generator():
    """The global numpy Generator."""
    return _state["gen"]


def get_rng_state():
    """A picklable/JSON-able snapshot of the global generator."""
    return _state["gen"].bit_generator.state


def set_rng_state(state):
    gen = np.random.default_rng()
    gen.bit_generator.state = state
    _state["gen"] = gen
