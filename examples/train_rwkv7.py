"""Train a small RWKV-7 on Shakespeare, then use it as an RNN: feed text in pieces, carrying the state.

    python examples/train_rwkv7.py            # 400 steps: a few minutes on 2 idle cores
    python examples/generate.py runs/example-rwkv7

Training goes through `minigrad.train.train`, the loop behind `python -m minigrad train`
(see examples/train_gpt.py for the loop written out by hand).
"""
import argparse  # noqa: I001 (minigrad is imported before numpy on purpose)

import minigrad as mg  # before numpy: it sets OPENBLAS_THREAD_TIMEOUT, read when OpenBLAS loads
import numpy as np
from minigrad.train import TrainConfig, train

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=400, help="optimizer steps (default 400)")
parser.add_argument("--out", default="runs/example-rwkv7", help="run directory")
args = parser.parse_args()

# d_model 128, 4 layers, head size 64, LoRA sizes 32; batches of 16 x 128 bytes.
result = train(TrainConfig(model="rwkv7", size="small", steps=args.steps, out=args.out, eval_every=100,
                           sample_tokens=200))
model, tokenizer = result["model"], result["tokenizer"]

# An RNN view of the same model: the text in three pieces, the recurrent state carried between them,
# gives the same next-token distribution as the text in one go.
text = "O Romeo, Romeo! wherefore art thou Romeo?"
ids = tokenizer.encode(text)[None, :]
model.eval()
with mg.no_grad():
    whole = model(mg.from_numpy(ids)).data[:, -1]
    state = None
    for piece in np.array_split(ids, 3, axis=1):
        logits, state = model(mg.from_numpy(piece), state=state, return_state=True)
    pieces = logits.data[:, -1]
print(f"whole vs. pieces, max |difference| of the last logits: {np.abs(whole - pieces).max():.2e}")
probs = np.exp(pieces[0] - pieces[0].max())
probs /= probs.sum()
top = np.argsort(-probs)[:5]
print("most likely next bytes:", ", ".join(f"{tokenizer.decode([i])!r} {probs[i]:.2f}" for i in top))
