"""Peak memory of one training step (forward + backward + AdamW) for GPT and RWKV-7, and its
flatness over many steps.

    python benchmarks/bench_memory.py [--steps 200] [--batch 8] [--seq 128]

Per model and config: parameter bytes, the tracemalloc peak of one step above what was live
before it (activations saved for backward, gradients, optimizer temporaries; numpy registers
its allocations with tracemalloc, the kernels' small per-thread scratch is not counted), and RSS
before/after `--steps` steps. Each model runs in its own subprocess so RSS is its own.
"""
import argparse
import json
import os
import subprocess
import sys
import tracemalloc

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CONFIGS = {
    "gpt": dict(vocab_size=512, d_model=128, n_layer=4, n_head=4),
    "rwkv7": dict(vocab_size=512, d_model=128, n_layer=4, head_size=32),
}


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def measure(kind, steps, batch, seq):
    import minigrad as mg
    from minigrad import functional as F

    mg.manual_seed(0)
    if kind == "gpt":
        from minigrad.models.gpt import GPT, GPTConfig
        model = GPT(GPTConfig(**CONFIGS[kind], max_seq_len=seq))
    else:
        from minigrad.models.rwkv7 import RWKV7
        from minigrad.models.rwkv7_init import RWKV7Config
        model = RWKV7(RWKV7Config(**CONFIGS[kind]), seed=0)
    opt = mg.optim.AdamW(model.parameters(), lr=1e-3)
    V = CONFIGS[kind]["vocab_size"]
    rng = np.random.default_rng(0)

    def step():
        data = rng.integers(0, V, (batch, seq + 1))
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()                                       # optimizer state, tables
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    step()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    before = rss_mb()
    for _ in range(steps):
        step()
    params = sum(p.data.nbytes for p in model.parameters())
    return {"model": kind, "params_mb": params / 2 ** 20, "step_peak_mb": peak / 2 ** 20,
            "rss_before_mb": before, "rss_after_mb": rss_mb(), "steps": steps, "batch": f"{batch}x{seq}"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.steps, args.batch, args.seq)))
        return
    print(f"| model | batch | params MB | peak of one step MB | RSS before -> after {args.steps} steps MB |")
    print("|---|---|---|---|---|")
    for kind in CONFIGS:
        out = subprocess.run([sys.executable, __file__, "--one", kind, "--steps", str(args.steps),
                              "--batch", str(args.batch), "--seq", str(args.seq)],
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"| {r['model']} | {r['batch']} | {r['params_mb']:.1f} | {r['step_peak_mb']:.1f} | "
              f"{r['rss_before_mb']:.1f} -> {r['rss_after_mb']:.1f} |")


if __name__ == "__main__":
    main()
