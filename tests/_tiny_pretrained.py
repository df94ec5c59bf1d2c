"""A tiny pretrained GPT on disk (a Hugging Face directory with a BPE tokenizer.json) and a repetitive
corpus, shared by the fine-tuning CLI tests."""
import minigrad as mg
from minigrad.models import GPT, GPTConfig

LINE = "the king doth love the night, and the night doth love the king.\n"


def write_corpus(directory, repeats):
    """`repeats` copies of LINE in directory/king.txt; returns its path."""
    path = directory / "king.txt"
    path.write_text(LINE * repeats, encoding="utf-8")
    return str(path)


def write_tiny_gpt(directory):
    """A tiny GPT (context 48) with random weights, saved with save_hf next to a BPE tokenizer.json
    (needs the `tokenizers` package); returns the directory's path."""
    from minigrad.data import BPETokenizer

    tok = BPETokenizer.train(LINE * 20 + "".join(chr(c) for c in range(32, 127)), vocab_size=300)
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, d_model=32, n_layer=2, n_head=2, ffn_hidden=64,
                          max_seq_len=48))
    path = str(directory / "tiny-llama")
    model.save_hf(path, tokenizer=tok)
    return path
