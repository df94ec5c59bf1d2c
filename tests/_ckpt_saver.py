"""Helper run as a subprocess by test_io: saves checkpoints in a loop until killed.

Checkpoint k holds weights filled with k, so a loaded checkpoint can be checked for integrity.
"""
import sys

import numpy as np

from minigrad import io


class FakeModel:
    def __init__(self, value):
        self.value = value

    def state_dict(self):
        return {"w": np.full((256, 256), self.value, np.float32), "b": np.full(7, self.value, np.float64)}


class FakeOptimizer:
    def __init__(self, value):
        self.value = value

    def state_dict(self):
        return {"state": {0: {"step": self.value, "m": np.full(65536, self.value, np.float32)}},
                "param_groups": [{"lr": 0.1, "params": [0]}]}


def main(run_dir, first):
    step = int(first)
    while True:
        io.save_checkpoint(run_dir, step, FakeModel(step), FakeOptimizer(step), model_type="fake",
                           config={"n": step}, rng={"x": step}, keep=2)
        print(step, flush=True)
        step += 1


if __name__ == "__main__":
    main(*sys.argv[1:])
