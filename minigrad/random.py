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


class Generator(np.random.Generator):
    """torch.Generator's shape over numpy's: `mg.Generator().manual_seed(s)` gives the stream
    `mg.manual_seed(s)` gives the global generator, and it is a numpy Generator, so it goes wherever
    minigrad takes `generator=` (randn, rand, randint, randperm, multinomial, dropout, nn.init)."""

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise ValueError(f"Generator: minigrad runs on the CPU only, got device={device!r}")
        super().__init__(np.random.PCG64())

    def manual_seed(self, seed):
        """Reseed in place and return self, as torch.Generator.manual_seed."""
        self.bit_generator.state = np.random.PCG64(int(seed)).state
        return self

    def get_state(self):
        return self.bit_generator.state

    def set_state(self, state):
        checked = generator_from_state(state, "Generator.set_state: state")
        self.bit_generator.state = checked.bit_generator.state
        return self

    def __reduce__(self):
        return _generator_with_state, (self.get_state(),)


def _generator_with_state(state):
    return Generator().set_state(state)
