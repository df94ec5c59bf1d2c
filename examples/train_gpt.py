"""Train a small byte-level GPT on Shakespeare with minigrad's Python API.

    python examples/train_gpt.py              # 600 steps, 1.2M bytes: a few minutes on 2 idle cores
    python examples/generate.py runs/example-gpt --prompt "ROMEO:"

The whole loop is here: data -> model -> loss -> backward -> AdamW, with a validation loss now
and then, a checkpoint at the end and a sample; validation loss after 600 steps is about 1.75
nats/byte. (`python -m minigrad train` does the same with a progress bar, resume, metrics and a plot.)
"""
import argparse  # noqa: I001 (minigrad is imported before numpy on purpose)
import time

import minigrad as mg  # before numpy: it sets OPENBLAS_THREAD_TIMEOUT, read when OpenBLAS loads
import numpy as np
from minigrad import F, io
from minigrad.data import BatchSampler, ByteTokenizer, eval_batches, load_corpus, train_val_split
from minigrad.models import GPT, GPTConfig
from minigrad.optim import AdamW
from minigrad.optim.lr_scheduler import warmup_cosine
from minigrad.train import generate_text

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=600, help="optimizer steps (default 600)")
parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default 3e-3)")
parser.add_argument("--out", default="runs/example-gpt", help="where the checkpoint goes")
args = parser.parse_args()

mg.manual_seed(0)
B, T = 16, 128

# Data: the plays as bytes, 90 % to train on, the last 10 % to validate on.
text, about = load_corpus("shakespeare")
tokenizer = ByteTokenizer()
train_ids, val_ids = train_val_split(tokenizer.encode(text), val_fraction=0.1)
batches = BatchSampler(train_ids, batch_size=B, seq_len=T, seed=0)
val_batches = eval_batches(val_ids, B, T, n_batches=8)
print(f"corpus: {about}")

# Model: 4 layers, d_model 128, 4 heads, RoPE, SwiGLU, tied embeddings (~0.8M parameters).
config = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=128, n_layer=4, n_head=4, ffn_hidden=384,
                   max_seq_len=T)
model = GPT(config)
optimizer = AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
print(f"model: {sum(p.data.size for p in model.parameters()) / 1e6:.2f}M parameters")


def loss_on(x, y):
    logits = model(mg.from_numpy(x))                      # (B, T, vocab)
    return F.cross_entropy(logits.reshape(-1, config.vocab_size), mg.from_numpy(y.reshape(-1)))


def val_loss():
    model.eval()
    with mg.no_grad():
        loss = np.mean([loss_on(x, y).item() for x, y in val_batches])
    model.train()
    return loss


start = time.perf_counter()
for step in range(args.steps):
    lr = warmup_cosine(step, args.lr, warmup_steps=50, total_steps=args.steps, min_lr=args.lr / 10)
    for group in optimizer.param_groups:
        group["lr"] = lr
    x, y = batches.next()                                # int64 (B, T); y is x shifted by one
    loss = loss_on(x, y)
    optimizer.zero_grad()
    loss.backward()
    mg.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if step % 100 == 0 or step == args.steps - 1:
        elapsed = time.perf_counter() - start
        print(f"step {step:5d}  train {loss.item():.3f}  val {val_loss():.3f}  lr {lr:.2e}  "
              f"{(step + 1) * B * T / elapsed:,.0f} tok/s")

path = io.save_checkpoint(args.out, args.steps, model, optimizer, tokenizer=tokenizer)
print(f"saved {path}")

# model.generate(ids, n) samples with a KV cache; generate_text slides a window of T tokens so the
# model never sees positions it was not trained on.
print(generate_text(model, tokenizer, "ROMEO:\n", tokens=300, temperature=0.8, seed=0, window=T))
