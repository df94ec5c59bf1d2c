"""`python -m minigrad chat`: talk to an instruct model, its prompts laid out by its own chat template.

    python -m minigrad chat --ckpt SmolLM2-135M-Instruct.Q4_1.gguf                  # interactive
    python -m minigrad chat --ckpt SmolLM2-135M-Instruct.Q4_1.gguf --message "What is the capital of France?"

The model loads with `minigrad.pretrained.load_pretrained` (a Hugging Face directory, a GGUF, a minigrad
checkpoint or an official RWKV-7 file). Every turn, the whole conversation (an optional system message,
the exchanges so far, the new message) is rendered by the tokenizer's Jinja chat template as transformers'
`apply_chat_template(..., add_generation_prompt=True)` does (`minigrad.data.chat`), and the reply is
sampled until the end-of-turn token: the tokenizer's eos id(s) and the token the template writes after an
assistant message (`<|im_end|>`, `<|eot_id|>`, `<end_of_turn>` ...). RWKV's World tokenizer has no
template: its models get the plain "User: ...\\n\\nAssistant:" format of BlinkDL's chat demos, a reply
ending at a blank line. Other tokenizers without a template are an error that points to `sample`.

When the conversation and a reply of --tokens no longer fit in a GPT's context (max_seq_len), the oldest
exchanges are dropped. `run(args)` is the command (`build_parser_args(parser)` adds its options);
`ChatSession` is the conversation, usable from Python.
"""
import re
import sys

import numpy as np

from minigrad.data.chat import check_messages
from minigrad.data.tokenizer import RWKVWorldTokenizer
from minigrad.kernels.validate import check_int
from minigrad.models.sampling import (
    TextStreamer,
    check_min_p,
    check_repetition_penalty,
    check_sampling,
    textless_ids,
)
from minigrad.pretrained import ACCEPTED, TOKENIZER_FILES, load_pretrained
from minigrad.utils.pipes import stdout_closed

DEFAULT_TOKENS = 512
DEFAULT_TEMPERATURE = 0.7
EXIT, RESET = "/exit", "/reset"
PROMPT = "> "
ERRORS = (OSError, ValueError, TypeError, ImportError)     # printed as one line by `_error`
_PROBE = "minigrad-probe-reply"     # an assistant message whose end shows the template's end-of-turn


# ---- the command line -------------------------------------------------------------------------------


def build_parser_args(p):
    """Add the options of `python -m minigrad chat` to the argparse parser `p`."""
    a = p.add_argument
    a("--ckpt", required=True, help=f"the model to talk to: {ACCEPTED}. Its tokenizer needs a chat template "
                                    "(an instruct model), or is RWKV's World tokenizer")
    a("--tokenizer", help=f"read text with this tokenizer instead of the model's own: {TOKENIZER_FILES}")
    a("--system", help="a system message that opens the conversation (default none: some templates, "
                       "SmolLM2's among them, then write their own)")
    a("--message", help=f"answer this message, print the reply and exit (default: an interactive chat "
                         f"reading lines from stdin; {RESET} clears the history, {EXIT} or end of input "
                         f"quits)")
    a("--tokens", type=int, default=DEFAULT_TOKENS,
      help=f"at most this many tokens per reply (default {DEFAULT_TOKENS}); a reply ends earlier at the "
           "model's end-of-turn token")
    a("--temperature", type=float, default=DEFAULT_TEMPERATURE,
      help=f"softmax temperature; 0 = greedy (default {DEFAULT_TEMPERATURE})")
    a("--top-k", type=int, default=None, help="sample only from the k most likely tokens")
    a("--top-p", type=float, default=None,
      help="nucleus sampling: the smallest set of tokens whose probability reaches p")
    a("--min-p", type=float, default=None,
      help="keep only tokens whose probability is at least p x that of the most likely one")
    a("--repetition-penalty", type=float, default=1.0,
      help="divide the positive logits (multiply the negative ones) of tokens already in the context by "
           "this; > 1 discourages repeats (default 1.0 = off)")
    a("--seed", type=int, default=0, help="seed of the sampler; reply n (from 0) uses seed + n (default 0)")
    a("--threads", type=int, default=None, help="threads for kernels and BLAS")


def run(args):
    """Run `python -m minigrad chat` with parsed `args`: answer --message once, or chat on stdin. The
    replies go to stdout, what was loaded and notes to stderr. Returns the exit code: 0, 1 after a
    one-line error (every option is checked before the model loads), 130 when interrupted."""
    try:
        settings = _settings(args)
        session = open_session(args.ckpt, args.tokenizer, args.system, **settings)
        if args.message is not None:
            session.reply(args.message, session.streamer())
            return 0
        return chat_loop(session)
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except ERRORS as e:
        _error(e)
        return 1


def _settings(args):
    """ChatSession keyword arguments of the options, each checked (TypeError / ValueError naming it)."""
    import minigrad as mg

    check_sampling(args.temperature, args.top_k, args.top_p)
    if args.message is not None and not args.message.strip():
        raise ValueError("--message is empty: give the text to answer")
    if args.threads is not None:
        mg.set_num_threads(args.threads)
    return dict(max_new_tokens=check_int("chat", "--tokens", args.tokens, 1),
                seed=check_int("chat", "--seed", args.seed, 0),
                temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                min_p=check_min_p(args.min_p),
                repetition_penalty=check_repetition_penalty(args.repetition_penalty))


def open_session(ckpt, tokenizer=None, system=None, **settings):
    """A ChatSession with the model at `ckpt` (and `tokenizer`, a file replacing its own); what was
    loaded and how replies end are printed on stderr."""
    loaded = load_pretrained(ckpt, tokenizer)
    print(loaded.description, file=sys.stderr)
    session = ChatSession(loaded.model, loaded.tokenizer, system, where=ckpt, **settings)
    print(session.describe(), file=sys.stderr)
    return session


def chat_loop(session, stdin=None, out=None):
    """Read messages from `stdin` (default sys.stdin), one a line, and stream each reply to `out`
    (default sys.stdout) until end of input or /exit; /reset clears the history; blank lines are
    skipped. An error of one turn (a message too long for the context) is printed and the chat goes
    on. Returns 0."""
    stdin = stdin if stdin is not None else sys.stdin
    interactive = _isatty(stdin)
    if interactive:
        session.note(f"type a message and Enter; {RESET} clears the history, {EXIT} or Ctrl-D quits")
    while True:
        line = _read_line(stdin, interactive)
        text = None if line is None else line.strip()
        if text is None or text == EXIT:
            return 0
        if text == RESET:
            session.reset()
            session.note("(history cleared)")
        elif text:
            try:
                session.reply(text, session.streamer(out))
            except ValueError as e:
                _error(e)


def _isatty(stream):
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _read_line(stdin, interactive):
    """The next line of input, None at its end. At a terminal: input() with a prompt and line editing."""
    if not interactive:
        return stdin.readline() or None
    try:
        import readline  # noqa: F401 - gives input() line editing and history
    except ImportError:
        pass
    try:
        return input(PROMPT)
    except EOFError:
        print(file=sys.stderr)
        return None


def _error(e):
    """The one-line message of a failed command or turn, on stderr (none when stdout's reader left)."""
    if stdout_closed(e):
        return
    print("minigrad chat: error: " + " ".join(str(e).split()), file=sys.stderr)


# ---- how a conversation becomes a prompt --------------------------------------------------------------


def chat_format(tokenizer, where="the model"):
    """The prompt format of a tokenizer: its chat template, else RWKV World's plain format. ValueError
    pointing to `sample` for a tokenizer with neither (a base model's)."""
    if getattr(tokenizer, "chat_template", None) is not None:
        return TemplateFormat(tokenizer)
    if isinstance(tokenizer, RWKVWorldTokenizer):
        return WorldFormat(tokenizer)
    raise ValueError(f"{where}: its tokenizer {tokenizer!r} has no chat template (a base model rather than "
                     f"an instruct one? a tokenizer.json given with --tokenizer carries none): "
                     f"`python -m minigrad sample --ckpt {where} --prompt TEXT` continues a text instead")


def _eos_ids(tokenizer):
    """The tokenizer's eos_token_id as a list (an int, a list of them, or none)."""
    eos = getattr(tokenizer, "eos_token_id", None)
    return [] if eos is None else [int(i) for i in np.atleast_1d(eos)]


class TemplateFormat:
    """A tokenizer's Jinja chat template (tokenizer_config.json / chat_template.jinja of a Hugging Face
    directory, tokenizer.chat_template of a GGUF), rendered as transformers renders it."""
    name = "the tokenizer's chat template"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def encode(self, messages):
        """The ids of `messages` followed by the header of the assistant's reply."""
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)

    def stop_ids(self):
        """The ids a reply ends at: the eos id(s) and the template's end-of-turn token."""
        ids = _eos_ids(self.tokenizer)
        end = self.end_of_turn_id()
        return ids if end is None or end in ids else ids + [end]

    def end_of_turn_id(self):
        """The token the template writes right after an assistant message (<|im_end|>, <|eot_id|>,
        <end_of_turn> ...) when it is an added token, found by rendering a probe exchange; None when
        it is plain text or the template refuses the probe."""
        probe = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": _PROBE}]
        try:
            text = self.tokenizer.apply_chat_template(probe, add_generation_prompt=False, tokenize=False)
        except ValueError:
            return None
        at = text.find(_PROBE)
        after = self.tokenizer.encode(text[at + len(_PROBE):], add_special_tokens=False) if at >= 0 else []
        first = int(after[0]) if len(after) else None
        return first if first in self.tokenizer.added_token_ids() else None


class WorldFormat:
    """RWKV World models' chat format, as in BlinkDL's chat demos: one paragraph a message,
    "System: ...\\n\\nUser: ...\\n\\nAssistant: ...\\n\\n", the prompt ending in "Assistant:". A blank
    line ends a turn, so blank lines inside a message are made single newlines; a reply ends at the
    first token holding one (or at the end-of-text token 0)."""
    name = "RWKV World's plain 'User: ... Assistant:' format (RWKV's chat demos)"
    ROLES = {"system": "System", "user": "User", "assistant": "Assistant"}
    TURN_END = "\n\n"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def render(self, messages):
        """The text of `messages` followed by "Assistant:"; ValueError for a role it has no name for."""
        parts = []
        for i, m in enumerate(check_messages(messages, "chat")):
            if m["role"] not in self.ROLES:
                raise ValueError(f"chat: messages[{i}] has role {m['role']!r}; RWKV's chat format knows "
                                 f"{sorted(self.ROLES)}")
            parts.append(f"{self.ROLES[m['role']]}: {self.paragraph(m['content'])}{self.TURN_END}")
        return "".join(parts) + f"{self.ROLES['assistant']}:"

    @staticmethod
    def paragraph(text):
        """`text` stripped, with \\r\\n as \\n and no blank lines (which would end the turn)."""
        return re.sub(r"\n{2,}", "\n", text.strip().replace("\r\n", "\n"))

    def encode(self, messages):
        return self.tokenizer.encode(self.render(messages))

    def stop_ids(self):
        """The eos id and every token that holds a blank line."""
        blank = self.tokenizer.ids_containing(self.TURN_END.encode())
        return sorted(set(_eos_ids(self.tokenizer)) | set(blank))


# ---- the conversation ----------------------------------------------------------------------------------


class ChatSession:
    """A conversation with a model: an optional system message, the exchanges so far (user message,
    reply), how they become a prompt (`chat_format`) and how every reply is sampled.

    `reply(message)` answers and remembers the exchange; `reset()` forgets the exchanges. Reply n
    (from 0) samples with seed + n (temperature 0: greedy). Ids beyond the tokenizer's vocabulary (a
    padded embedding) are never sampled. `where` names the model in errors."""

    def __init__(self, model, tokenizer, system=None, max_new_tokens=DEFAULT_TOKENS, seed=0,
                 temperature=DEFAULT_TEMPERATURE, top_k=None, top_p=None, min_p=None,
                 repetition_penalty=1.0, where="the model", notes=None):
        self.model, self.tokenizer, self.notes = model, tokenizer, notes
        self.format = chat_format(tokenizer, where)
        self.stop_ids = self.format.stop_ids()
        if system is not None and not isinstance(system, str):
            raise TypeError(f"chat: system must be a str, got {type(system).__name__}")
        self.system = system
        self.max_new_tokens = check_int("chat", "max_new_tokens", max_new_tokens, 1)
        self.seed = check_int("chat", "seed", seed, 0)
        check_sampling(temperature, top_k, top_p)
        self.sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=check_min_p(min_p),
                             repetition_penalty=check_repetition_penalty(repetition_penalty))
        self.limit = getattr(model.config, "max_seq_len", None)
        self.textless = textless_ids(model, tokenizer)
        self.history, self.replies = [], 0

    def describe(self):
        """One line: the prompt format, where replies end, the context."""
        stops = ", ".join(f"{self._token_name(i)} ({i})" for i in self.stop_ids[:4])
        more = f" and {len(self.stop_ids) - 4} more" if len(self.stop_ids) > 4 else ""
        context = f"{self.limit} tokens" if self.limit is not None else "unbounded"
        return (f"chat: {self.format.name}; a reply ends at {stops or 'no end token'}{more} or after "
                f"{self.max_new_tokens} tokens; context {context}")

    def _token_name(self, token_id):
        name = getattr(self.tokenizer, "id_to_token", None)
        return name(token_id) if name is not None else repr(self.tokenizer.decode(np.array([token_id])))

    def note(self, text):
        """Print a note for the user (on `notes`, default stderr)."""
        print(text, file=self.notes if self.notes is not None else sys.stderr, flush=True)

    def reset(self):
        """Forget the exchanges (the system message stays)."""
        self.history = []

    def messages(self, message, history=None):
        """The conversation with `message` as the newest user message."""
        system = [] if self.system is None else [{"role": "system", "content": self.system}]
        history = self.history if history is None else history
        return system + history + [{"role": "user", "content": message}]

    def prompt(self, message):
        """(prompt ids, most tokens the reply may take) of the conversation with `message`. While the
        prompt and max_new_tokens do not fit in the model's context, the oldest exchange is dropped for
        good (with a note); when even `message` alone leaves no room for one token, ValueError (and the
        history is kept)."""
        if self.limit is not None:
            alone = len(self.format.encode(self.messages(message, history=[])))
            if alone >= self.limit:
                raise ValueError(f"the message is too long: with the chat template it takes {alone} tokens "
                                 f"of the model's context of {self.limit}, which leaves no room for a reply")
        while True:
            ids = self.format.encode(self.messages(message))
            room = self.max_new_tokens if self.limit is None else min(self.max_new_tokens,
                                                                      self.limit - len(ids))
            if room == self.max_new_tokens or not self.history:
                return ids, room
            del self.history[:2]
            self.note(f"(the oldest exchange was dropped to fit the context of {self.limit} tokens)")

    def reply(self, message, streamer=None):
        """The model's answer to `message` (the text before the end-of-turn token, stripped), remembered
        with it. `streamer` (e.g. `self.streamer()`) receives the tokens as they are sampled."""
        from minigrad.train import generate_ids

        if not isinstance(message, str):
            raise TypeError(f"chat: message must be a str, got {type(message).__name__}")
        ids, room = self.prompt(message)
        out = generate_ids(self.model, ids, room, seed=self.seed + self.replies,
                           eos_token_id=self.stop_ids or None, suppress_tokens=self.textless,
                           streamer=streamer, **self.sampling)
        new = out[len(ids):]
        if len(new) and int(new[-1]) in self.stop_ids:
            new = new[:-1]
        text = self.tokenizer.decode(new).strip()
        self.history += [{"role": "user", "content": message}, {"role": "assistant", "content": text}]
        self.replies += 1
        return text

    def streamer(self, file=None):
        """A ReplyStreamer printing this session's replies on `file` (default stdout)."""
        return ReplyStreamer(self.tokenizer, self.stop_ids, file)


class ReplyStreamer(TextStreamer):
    """Prints a reply as it is sampled, as `ChatSession.reply` returns it: the prompt skipped, the
    end-of-turn token left out, no leading or trailing whitespace (whitespace is held back until text
    follows it, and dropped at the end), then a newline."""

    def __init__(self, tokenizer, stop_ids=(), file=None):
        super().__init__(tokenizer, skip_prompt=True, file=file)
        self.stop = {int(i) for i in stop_ids}
        self.held, self.started = "", False

    def put(self, value):
        """Pass on the prompt and every new id but an end-of-turn one."""
        ids = np.asarray(getattr(value, "data", value)).reshape(-1)
        if not self.next_tokens_are_prompt and ids.size == 1 and int(ids[0]) in self.stop:
            return
        super().put(value)

    def on_finalized_text(self, text, stream_end=False):
        """Print `text` but its trailing whitespace (held until more text follows), the leading
        whitespace of the reply dropped; at the end, what is left without trailing whitespace, and a
        newline."""
        text = self.held + text
        if not self.started:
            text = text.lstrip()
        shown = text.rstrip()
        self.held = "" if stream_end else text[len(shown):]
        self.started = bool(shown or self.started) and not stream_end
        if shown or stream_end:
            super().on_finalized_text(shown, stream_end)
