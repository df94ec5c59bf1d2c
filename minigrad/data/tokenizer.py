"""Tokenizers: bytes (default, vocab 256), characters (vocab from the corpus), optional BPE, and the
RWKV "World" tokenizer of pretrained RWKV models (a vocabulary file read by `RWKVWorldTokenizer`).

Every tokenizer has `encode(text) -> int64 array`, `decode(ids) -> str`, `vocab_size`, and
`to_dict()` (JSON-serialisable, stored in checkpoints); `tokenizer_from_dict(d)` rebuilds it.
"""
import ast
import json
import os

import numpy as np


def _as_id_list(ids):
    ids = np.asarray(getattr(ids, "data", ids))
    if ids.size == 0:                  # [] comes in as float64: decoding nothing gives ""
        return np.zeros(0, np.int64)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"decode: token ids must be integers, got dtype {ids.dtype}")
    return ids.reshape(-1)


def _check_text(text, who):
    if not isinstance(text, str):
        raise TypeError(f"{who}.encode: text must be a str, got {type(text).__name__}")
    return text


def _utf8(text, who):
    """`text` as UTF-8 bytes; ValueError naming the first lone surrogate (not Unicode text, so
    UTF-8 has no bytes for it) instead of Python's UnicodeEncodeError."""
    try:
        return _check_text(text, who).encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{who}.encode: text has a lone surrogate {text[e.start]!r} at index {e.start}, "
                         "which UTF-8 cannot encode") from None


def _check_range(ids, vocab_size, who):
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        bad = ids[(ids < 0) | (ids >= vocab_size)][0]
        raise ValueError(f"{who}.decode: token id {int(bad)} is outside [0, {vocab_size})")


class ByteTokenizer:
    """UTF-8 bytes as tokens: works on any text, vocab 256, nothing to train or store."""
    kind = "byte"
    vocab_size = 256

    def encode(self, text):
        raw = _utf8(text, "ByteTokenizer")
        return np.frombuffer(raw, dtype=np.uint8).astype(np.int64)

    def decode(self, ids):
        ids = _as_id_list(ids)
        _check_range(ids, 256, "ByteTokenizer")
        return ids.astype(np.uint8).tobytes().decode("utf-8", errors="replace")

    def to_dict(self):
        return {"type": self.kind}

    def __repr__(self):
        return "ByteTokenizer(vocab_size=256)"


class CharTokenizer:
    """One token per distinct character of the corpus (sorted), so vocab_size = len(chars)."""
    kind = "char"

    def __init__(self, chars):
        chars = "".join(chars)
        if len(set(chars)) != len(chars):
            raise ValueError("CharTokenizer: characters must be distinct")
        if not chars:
            raise ValueError("CharTokenizer: needs at least one character")
        self.chars = chars
        self.vocab_size = len(chars)
        self._index = {c: i for i, c in enumerate(chars)}
        self._table = np.array([ord(c) for c in chars], dtype=np.int64)

    @classmethod
    def from_text(cls, text):
        return cls(sorted(set(text)))

    def encode(self, text):
        _check_text(text, "CharTokenizer")
        try:
            return np.fromiter((self._index[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as e:
            raise ValueError(f"CharTokenizer.encode: character {e.args[0]!r} is not in the "
                             f"vocabulary of {self.vocab_size} characters built from the corpus") from None

    def decode(self, ids):
        ids = _as_id_list(ids)
        _check_range(ids, self.vocab_size, "CharTokenizer")
        return "".join(self.chars[i] for i in ids.tolist())

    def to_dict(self):
        return {"type": self.kind, "chars": self.chars}

    def __repr__(self):
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def _require_tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise ImportError("BPETokenizer needs the `tokenizers` package: pip install tokenizers "
                          "(or pip install -e \".[bpe]\"); the byte and char tokenizers need nothing"
                          ) from None
    return tokenizers


class BPETokenizer:
    """Byte-level BPE through Hugging Face's `tokenizers` package (optional dependency).

    `bos_token_id`, `eos_token_id` and `chat_template` (set by `GPT.from_gguf` / `from_hf`, else
    None) are kept by `to_dict()`, so they survive a checkpoint and reach `save_hf`."""
    kind = "bpe"
    EXTRAS = ("bos_token_id", "eos_token_id", "chat_template")

    def __init__(self, tokenizer):
        self._tok = tokenizer
        self.vocab_size = tokenizer.get_vocab_size()
        self.bos_token_id = self.eos_token_id = self.chat_template = None

    @classmethod
    def train(cls, text, vocab_size=512, min_frequency=2):
        """Learn a byte-level BPE vocabulary of `vocab_size` tokens (>= 256) from `text`."""
        tk = _require_tokenizers()
        if not isinstance(text, str):
            raise TypeError(f"BPETokenizer.train: text must be a str, got {type(text).__name__}")
        if type(vocab_size) is bool or not isinstance(vocab_size, (int, np.integer)):
            raise TypeError(f"BPETokenizer.train: vocab_size must be an int, got {vocab_size!r}")
        if vocab_size < 256:
            raise ValueError(f"BPETokenizer.train: vocab_size must be >= 256 (the byte alphabet), "
                             f"got {vocab_size}")
        tok = tk.Tokenizer(tk.models.BPE())
        tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tk.decoders.ByteLevel()
        trainer = tk.trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                         initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
                                         show_progress=False)
        lines = text.splitlines(keepends=True)
        chunks = ("".join(lines[i:i + 1000]) for i in range(0, len(lines), 1000))
        tok.train_from_iterator(chunks, trainer=trainer)
        return cls(tok)

    @classmethod
    def from_json(cls, s):
        return cls(_require_tokenizers().Tokenizer.from_str(s))

    def encode(self, text, add_special_tokens=True):
        """Token ids (int64) of `text`; add_special_tokens=False leaves out what the tokenizer's
        post-processor adds around a text (e.g. Llama's BOS), as transformers' argument of that name."""
        _utf8(text, "BPETokenizer")     # the tokenizers library rejects lone surrogates obscurely
        return np.asarray(self._tok.encode(text, add_special_tokens=bool(add_special_tokens)).ids,
                          dtype=np.int64)

    def id_to_token(self, token_id):
        """The vocabulary string of one id (e.g. '<|im_end|>'), None for an id outside it."""
        return self._tok.id_to_token(int(token_id))

    def token_to_id(self, token):
        """The id of one vocabulary string, None when it is not a token."""
        return self._tok.token_to_id(token)

    def added_token_ids(self):
        """The ids of the added tokens (special and control tokens such as '<|im_end|>', which the
        pre-tokenizer never splits)."""
        return frozenset(self._tok.get_added_tokens_decoder())

    def special_token(self, name):
        """The string of `bos` or `eos` (the first id of a list of eos ids), None when unset."""
        value = getattr(self, f"{name}_token_id")
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        return None if value is None else self.id_to_token(value)

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True, **template_kwargs):
        """`messages` ([{'role': str, 'content': str}, ...]) laid out by the tokenizer's `chat_template`
        (minigrad.data.chat.render_chat, with bos_token / eos_token the strings of bos_token_id /
        eos_token_id): the text (tokenize=False) or its int64 ids, as transformers'
        `apply_chat_template`, which also encodes the rendered text without adding special tokens
        (the template writes those itself). ValueError when the tokenizer has no chat template;
        template_kwargs are more template variables."""
        if self.chat_template is None:
            raise ValueError("BPETokenizer.apply_chat_template: this tokenizer has no chat_template (a base "
                             "model's, or a tokenizer.json read without its tokenizer_config.json); set "
                             "tokenizer.chat_template to the model's Jinja template")
        from minigrad.data.chat import render_chat

        text = render_chat(self.chat_template, messages, add_generation_prompt,
                           bos_token=self.special_token("bos"), eos_token=self.special_token("eos"),
                           **template_kwargs)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def decode(self, ids):
        ids = _as_id_list(ids)
        _check_range(ids, self.vocab_size, "BPETokenizer")
        return self._tok.decode(ids.tolist())

    def to_dict(self):
        d = {"type": self.kind, "json": self._tok.to_str()}
        d.update({k: getattr(self, k, None) for k in self.EXTRAS if getattr(self, k, None) is not None})
        return d

    def __repr__(self):
        return f"BPETokenizer(vocab_size={self.vocab_size})"


RWKV_VOCAB_NAME = "rwkv_vocab_v20230424.txt"    # the World vocabulary file shipped in BlinkDL's `rwkv`


class RWKVWorldTokenizer:
    """The RWKV "World" tokenizer: a vocabulary of byte strings, text encoded as UTF-8 and cut by
    greedy longest match from the left (the semantics of BlinkDL's `rwkv.rwkv_tokenizer.TRIE_TOKENIZER`).

    `tokens` maps id -> bytes (non-empty, distinct). vocab_size = the largest id + 1; an id without a
    token (the official file has none for 0, the end-of-text token that separates documents in
    training: `eos_token_id`) decodes to nothing. `decode` replaces bytes that are not UTF-8 (a cut
    through a character) with U+FFFD, as ByteTokenizer does. `from_file(path)` reads the official
    vocabulary format, one token a line: `<id> <Python literal of a str or bytes> <its length in bytes>`."""
    kind = "rwkv_world"

    MAX_ID = 1 << 24     # ids index a table: a hostile file must not make it gigabytes

    def __init__(self, tokens, eos_token_id=0):
        self._bytes, self._prefixes = self._tables(tokens)
        self.vocab_size = len(self._bytes)
        if eos_token_id is not None and (type(eos_token_id) is not int or eos_token_id < 0):
            raise ValueError(f"RWKVWorldTokenizer: eos_token_id must be a token id >= 0 or None, "
                             f"got {eos_token_id!r}")
        self.eos_token_id, self.bos_token_id = eos_token_id, None

    @classmethod
    def _tables(cls, tokens):
        """(id -> bytes list with b"" in the gaps, dict: every prefix of a token -> its id, or -1 for a
        prefix that is not itself a token). ValueError for a bad id, an empty or repeated token."""
        if not tokens:
            raise ValueError("RWKVWorldTokenizer: the vocabulary is empty")
        prefixes = {}
        for i, token in tokens.items():
            if type(i) is not int or not 0 <= i < cls.MAX_ID or not isinstance(token, bytes) or not token:
                raise ValueError(f"RWKVWorldTokenizer: token {i!r} -> {token!r:.40} must be an id in "
                                 f"[0, {cls.MAX_ID}) -> non-empty bytes")
            if prefixes.get(token, -1) >= 0:
                raise ValueError(f"RWKVWorldTokenizer: token {token!r} appears twice "
                                 f"(ids {prefixes[token]} and {i})")
            prefixes[token] = i
            for n in range(1, len(token)):
                prefixes.setdefault(token[:n], -1)
        by_id = [b""] * (max(tokens) + 1)
        for i, token in tokens.items():
            by_id[i] = token
        return by_id, prefixes

    @classmethod
    def from_file(cls, path, eos_token_id=0):
        """The tokenizer of an RWKV vocabulary file (`rwkv_vocab_v20230424.txt` format); ValueError
        naming the file and line for a malformed line."""
        tokens = {}
        try:
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    if line.strip():
                        i, token = _vocab_line(line, f"{path}, line {number}")
                        if i in tokens:
                            raise ValueError(f"{path}, line {number}: token id {i} appears twice")
                        tokens[i] = token
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not an RWKV vocabulary file (not UTF-8 text: {e.reason} at byte "
                             f"{e.start})") from None
        return cls(tokens, eos_token_id)

    @classmethod
    def from_dict(cls, d):
        """Rebuild from `to_dict()`: d["tokens"][id] is the token's bytes in hex (None for a gap)."""
        tokens = d.get("tokens")
        if not isinstance(tokens, list):
            raise ValueError("RWKV World tokenizer record: 'tokens' must be a list of hex strings")
        try:
            table = {i: bytes.fromhex(t) for i, t in enumerate(tokens) if t is not None}
        except (TypeError, ValueError) as e:
            raise ValueError(f"RWKV World tokenizer record: a token is not a hex string ({e})") from None
        return cls(table, d.get("eos_token_id"))

    def encode(self, text):
        return self.encode_bytes(_utf8(text, "RWKVWorldTokenizer"))

    def encode_bytes(self, raw):
        """Token ids (int64) of `raw` bytes: at each position the longest token that starts there."""
        ids, start, n, prefixes = [], 0, len(raw), self._prefixes
        while start < n:
            best, end, stop = -1, start, start + 1
            while stop <= n:
                found = prefixes.get(raw[start:stop])
                if found is None:
                    break
                if found >= 0:
                    best, end = found, stop
                stop += 1
            if best < 0:
                raise ValueError(f"RWKVWorldTokenizer.encode: no token starts with byte "
                                 f"{raw[start:start + 1]!r} (at byte {start}): the vocabulary lacks it")
            ids.append(best)
            start = end
        return np.asarray(ids, dtype=np.int64)

    def token_bytes(self, token_id):
        """The bytes of one token id (b"" for an id without a token)."""
        _check_range(np.asarray([token_id]), self.vocab_size, "RWKVWorldTokenizer")
        return self._bytes[token_id]

    def ids_containing(self, raw):
        """The ids (sorted) of every token whose bytes contain `raw` (e.g. b"\\n\\n": the paragraph
        breaks that end a turn of RWKV's chat format)."""
        return [i for i, token in enumerate(self._bytes) if raw in token]

    def decode(self, ids):
        ids = _as_id_list(ids)
        _check_range(ids, self.vocab_size, "RWKVWorldTokenizer")
        return b"".join(self._bytes[i] for i in ids.tolist()).decode("utf-8", errors="replace")

    def to_dict(self):
        return {"type": self.kind, "tokens": [t.hex() if t else None for t in self._bytes],
                "eos_token_id": self.eos_token_id}

    def __repr__(self):
        return f"RWKVWorldTokenizer(vocab_size={self.vocab_size})"


def _vocab_line(line, where):
    """(id, token bytes) of one vocabulary line `<id> <str or bytes literal> <byte length>`. The literal is
    read by ast.literal_eval (never eval: the file cannot run code)."""
    first, last = line.find(" "), line.rstrip("\r\n").rfind(" ")
    try:
        if first < 0 or last <= first:
            raise ValueError("expected '<id> <literal> <length>'")
        i, length = int(line[:first]), int(line[last:])
        token = _literal(line[first:last].strip())
        if isinstance(token, str):
            token = token.encode("utf-8")
        if not isinstance(token, bytes):
            raise ValueError(f"the token is a {type(token).__name__}, not a str or bytes literal")
        if len(token) != length:
            raise ValueError(f"the token has {len(token)} bytes but the line says {length}")
        if i < 0:
            raise ValueError(f"negative id {i}")
    except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
        raise ValueError(f"{where}: not an RWKV vocabulary line ({e}): {line.strip()[:80]!r}") from None
    return i, token


def _literal(text):
    """The value of a Python str or bytes literal: a quoted text without escapes or inner quotes as it
    is (most of the official file: 5x faster than the parser), anything else by ast.literal_eval."""
    quote = text[:1]
    if (len(text) >= 2 and quote in "'\"" and text[-1] == quote and quote not in text[1:-1]
            and "\\" not in text):
        return text[1:-1]
    return ast.literal_eval(text)


def default_rwkv_vocab():
    """Path of the World vocabulary file inside the installed `rwkv` package, or None."""
    import importlib.util

    spec = importlib.util.find_spec("rwkv")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], RWKV_VOCAB_NAME)
    return path if os.path.isfile(path) else None


TOKENIZERS = {"byte": ByteTokenizer, "char": CharTokenizer, "bpe": BPETokenizer}


def tokenizer_from_dict(d):
    """Rebuild a tokenizer from `to_dict()` output (a dict, or its JSON string)."""
    if isinstance(d, str):
        d = json.loads(d)
    kind = d.get("type")
    if kind == "byte":
        return ByteTokenizer()
    if kind == "char":
        return CharTokenizer(d["chars"])
    if kind == "bpe":
        tok = BPETokenizer.from_json(d["json"])
        for key in BPETokenizer.EXTRAS:
            value = d.get(key)
            ids = value if isinstance(value, list) else [value]   # HF configs may list several eos ids
            ok = (value is None or isinstance(value, str) if key == "chat_template" else
                  value is None or all(type(v) is int and v >= 0 for v in ids))
            if not ok:
                raise ValueError(f"BPE tokenizer record: {key} must be "
                                 f"{'a string' if key == 'chat_template' else 'a token id (or a list)'} or "
                                 f"null, got {value!r:.80}")
            setattr(tok, key, value)
        return tok
    if kind == RWKVWorldTokenizer.kind:
        return RWKVWorldTokenizer.from_dict(d)
    raise ValueError(f"unknown tokenizer type {kind!r}; expected one of "
                     f"{sorted([*TOKENIZERS, RWKVWorldTokenizer.kind])}")


def make_tokenizer(kind, text=None, vocab_size=None):
    """A tokenizer by name: 'byte', 'char' (built from `text`) or 'bpe' (trained on `text`)."""
    if kind == "byte":
        return ByteTokenizer()
    if kind in ("char", "bpe") and not isinstance(text, str):
        raise TypeError(f"make_tokenizer: the {kind!r} tokenizer is built from a text (a str), "
                        f"got {type(text).__name__}")
    if kind == "char":
        return CharTokenizer.from_text(text)
    if kind == "bpe":   # vocab_size 0 is an error (from train), not the default
        return BPETokenizer.train(text, 512 if vocab_size is None else vocab_size)
    raise ValueError(f"unknown tokenizer {kind!r}; expected one of {sorted(TOKENIZERS)}")
