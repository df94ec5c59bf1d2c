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


def generator_from_state(state, what="generator state"):
    """A new numpy Generator holding exactly `state` (a `bit_generator.state` dict, as
    `get_rng_state()` returns): ValueError naming `what` for anything numpy rejects or would not
    restore as it is (a truncated float, an extra key, another bit generator)."""
    gen = np.random.default_rng()
    try:
        gen.bit_generator.state = state
    except (TypeError, ValueError, KeyError, OverflowError) as e:
        raise ValueError(f"{what} is not a numpy generator state ({type(e).__name__}: {e}): "
                         f"{state!r:.120}") from None
    if gen.bit_generator.state != state:
        raise ValueError(f"{what} is not a numpy generator state numpy restores as it is: {state!r:.120}")
    return gen


def set_rng_state(state):
    """Restore a `get_rng_state()` snapshot (ValueError for anything else)."""
    _state["gen"] = generator_from_state(state, "set_rng_state: state")
