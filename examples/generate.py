"""Generate text from a checkpoint written by `python -m minigrad train` or the train_* examples.

    python examples/generate.py runs/gpt-small --prompt "ROMEO:" --tokens 300
    python examples/generate.py runs/example-rwkv7 --temperature 0.5 --top-k 20

The checkpoint carries the model type, config and tokenizer, so any run directory works. The same
prompt is continued at a few temperatures to show what the knob does (0 = greedy).
"""
import argparse
import time

from minigrad import io
from minigrad.train import generate_text

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("ckpt", nargs="?", default="runs/gpt-small", help="run directory or checkpoint file")
parser.add_argument("--prompt", default="ROMEO:\n", help="text to continue")
parser.add_argument("--tokens", type=int, default=200, help="tokens to generate per sample")
parser.add_argument("--temperature", type=float, nargs="+", default=[0.0, 0.6, 1.0],
                    help="one or more temperatures to sample at (default 0 0.6 1)")
parser.add_argument("--top-k", type=int, default=None, help="keep only the k most likely tokens")
parser.add_argument("--top-p", type=float, default=None, help="nucleus sampling threshold")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

try:
    ckpt = io.load_checkpoint(args.ckpt)
except (OSError, ValueError) as e:   # no such file or directory, or a damaged checkpoint
    raise SystemExit(f"generate.py: {e}") from None
model = ckpt.build_model()
model.eval()
tokenizer = ckpt.tokenizer
print(f"{ckpt.path}: {ckpt.model_type} trained {ckpt.step} steps, {tokenizer}")
window = (ckpt.extra or {}).get("train", {}).get("seq_len")  # GPT: the context length it was trained on
for temperature in args.temperature:
    start = time.perf_counter()
    text = generate_text(model, tokenizer, args.prompt, args.tokens, temperature, args.top_k, args.top_p,
                         seed=args.seed, window=window)
    rate = args.tokens / (time.perf_counter() - start)
    print(f"\n--- temperature {temperature} ({rate:.0f} tokens/s) ---")
    print(text)
