"""Helper for test_io, run as a subprocess: saves checkpoints of a tiny GPT in a loop until killed.

Checkpoint k holds every weight equal to k, so a loaded checkpoint can be checked for integrity.
"""
import sys

import minigrad as mg
from minigrad import io
from minigrad.data import ByteTokenizer
from minigrad.models import GPT, GPTConfig

TINY = GPTConfig(vocab_size=256, d_model=64, n_layer=2, n_head=2, ffn_hidden=128)


def make_model_and_optimizer():
    """A tiny GPT and an AdamW that has taken one step (so it has state to save)."""
    mg.manual_seed(0)
    model = GPT(TINY)
    opt = mg.optim.AdamW(model.parameters(), lr=1e-3)
    for p in model.parameters():
        p.grad = mg.ones_like(p)
    opt.step()
    return model, opt


def fill(model, value):
    for p in model.parameters():
        p.data[...] = value


def save(run_dir, step, model, opt, keep=2):
    fill(model, step)
    return io.save_checkpoint(run_dir, step, model, opt, tokenizer=ByteTokenizer(), keep=keep,
                              rng={"minigrad": mg.get_rng_state(), "x": step}, extra={"n": step})


def main(run_dir, first):
    model, opt = make_model_and_optimizer()
    step = int(first)
    while True:
        save(run_dir, step, model, opt)
        print(step, flush=True)
        step += 1


if __name__ == "__main__":
    main(*sys.argv[1:])
