"""Tiny GPT / RWKV-7 models and a plain training loop, shared by the memory, reproducibility and
threading tests (run in process or as `python tests/_tiny_training.py <command> ...`)."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import minigrad as mg  # noqa: E402
from minigrad import functional as F  # noqa: E402

VOCAB, B, T = 64, 4, 16


def tiny_model(kind, dtype=np.float32, seed=0):
    mg.manual_seed(seed)
    if kind == "gpt":
        from minigrad.models.gpt import GPT, GPTConfig
        return GPT(GPTConfig(vocab_size=VOCAB, d_model=32, n_layer=2, n_head=4, n_kv_head=2, max_seq_len=T),
                   dtype=dtype)
    from minigrad.models.rwkv7 import RWKV7
    from minigrad.models.rwkv7_init import RWKV7Config
    return RWKV7(RWKV7Config(vocab_size=VOCAB, d_model=32, n_layer=2, head_size=8), dtype=dtype, seed=seed)


def batch(step, seed=0):
    rng = np.random.default_rng([seed, step])
    data = rng.integers(0, VOCAB, (B, T + 1))
    return data[:, :-1], data[:, 1:]


def loss_of(model, x, y):
    logits = model(mg.from_numpy(np.ascontiguousarray(x)))
    return F.cross_entropy(logits.reshape(-1, VOCAB), mg.from_numpy(np.ascontiguousarray(y).reshape(-1)))


class Trainer:
    """model + AdamW; step(i) runs forward, backward and the update on batch i, returns the loss."""

    def __init__(self, kind, dtype=np.float32, seed=0, lr=3e-3):
        self.model = tiny_model(kind, dtype, seed)
        self.opt = mg.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.01)
        self.seed = seed

    def step(self, i):
        x, y = batch(i, self.seed)
        loss = loss_of(self.model, x, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(loss.item())

    def params(self):
        state = self.model.state_dict()
        return {k: np.array(v.data if isinstance(v, mg.Tensor) else v) for k, v in state.items()}


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def cmd_rss(kind, warmup, steps):
    trainer = Trainer(kind)
    for i in range(warmup):
        trainer.step(i)
    before = rss_mb()
    samples = []
    for i in range(warmup, warmup + steps):
        trainer.step(i)
        if i % 50 == 0:
            samples.append(round(rss_mb(), 2))
    return {"before_mb": before, "after_mb": rss_mb(), "samples": samples}


def cmd_losses(kind, steps, threads):
    mg.set_num_threads(int(threads))
    trainer = Trainer(kind)
    losses = [trainer.step(i) for i in range(int(steps))]
    digest = {k: float(np.abs(v.astype(np.float64)).sum()) for k, v in trainer.params().items()}
    return {"losses": [float(v).hex() for v in losses], "params": {k: v.hex() for k, v in digest.items()}}


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    result = {"rss": cmd_rss, "losses": cmd_losses}[command](args[0], *map(int, args[1:]))
    print(json.dumps(result))
