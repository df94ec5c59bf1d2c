"""Chat templates: render a conversation with a model's Jinja template as Hugging Face transformers'
`tokenizer.apply_chat_template(..., tokenize=False)` does, so that an instruct model sees the text it
was trained on.

    render_chat(template, [{"role": "user", "content": "Hi"}], add_generation_prompt=True,
                bos_token="<|im_start|>", eos_token="<|im_end|>")

The template runs in jinja2's ImmutableSandboxedEnvironment (templates come from downloaded files: they
must not reach Python's internals or change their inputs) with transformers' settings: trim_blocks and
lstrip_blocks, the loopcontrols extension ({% break %}, {% continue %}), the `{% generation %}` tag
(rendered as its body; transformers uses it to mark assistant tokens), and its helpers:
`raise_exception(message)`, `strftime_now(format)`, a `tojson` filter that does not escape HTML and takes
ensure_ascii / indent / separators / sort_keys, and `namespace` / `dict` that cannot store or reach
underscore names. The template sees `messages`, `add_generation_prompt`, `tools` and `documents` (None),
`bos_token` / `eos_token` (when given) and any extra keyword (which wins over the tokens, as in
transformers).

jinja2 (>= 3.1.6, as transformers requires: older versions have sandbox escapes) is optional: without
it rendering raises ImportError naming `pip install jinja2`. An error the template raises
(raise_exception, an undefined attribute, a sandbox violation) or a template that does not parse is a
`ChatTemplateError` (a ValueError).
"""
import functools
import json
import re
from datetime import datetime

MIN_JINJA2 = (3, 1, 6)
MESSAGE = "{'role': str, 'content': str} dict"


class ChatTemplateError(ValueError):
    """A chat template that does not parse, or that raised while rendering a conversation."""


# ---- messages --------------------------------------------------------------------------------------


def check_messages(messages, who="render_chat"):
    """`messages` as a list of fresh dicts (keys with None values dropped, as transformers does), after
    checking it is a non-empty list of dicts whose 'role' and 'content' are strings: TypeError /
    ValueError naming the argument and the message otherwise."""
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"{who}: messages must be a list of {MESSAGE}s, got {type(messages).__name__}")
    if not messages:
        raise ValueError(f"{who}: messages is empty: a conversation needs at least one message")
    return [_check_message(m, f"{who}: messages[{i}]") for i, m in enumerate(messages)]


def _check_message(message, where):
    """One message as a new dict without None values; its role and content must be strings."""
    if not isinstance(message, dict):
        raise TypeError(f"{where} must be a {MESSAGE}, got {type(message).__name__}")
    for key in ("role", "content"):
        if key not in message or message[key] is None:
            raise ValueError(f"{where} has no {key!r} (each message is a {MESSAGE})")
        if not isinstance(message[key], str):
            raise TypeError(f"{where}[{key!r}] must be a str, got {type(message[key]).__name__}")
    if not message["role"]:
        raise ValueError(f"{where}['role'] is empty")
    return {k: v for k, v in message.items() if v is not None}


# ---- the environment ---------------------------------------------------------------------------------


def _require_jinja2():
    """The jinja2 module, >= MIN_JINJA2; ImportError saying how to install it otherwise."""
    try:
        import jinja2
        import jinja2.ext
        import jinja2.sandbox
    except ImportError:
        raise ImportError("chat templates need the `jinja2` package: pip install jinja2") from None
    if _version(jinja2.__version__) < MIN_JINJA2:
        raise ImportError(f"chat templates need jinja2 >= {'.'.join(map(str, MIN_JINJA2))} (older versions "
                          f"have sandbox escapes), found {jinja2.__version__}: pip install -U jinja2")
    return jinja2


def _version(text):
    """(3, 1, 6) of '3.1.6' (and of '3.1.6rc1' or '3.1.6.dev0')."""
    return tuple(int(n) for n in re.findall(r"\d+", text)[:3])


def raise_exception(message):
    """Template helper: stop rendering with `message` (templates call it on conversations they refuse)."""
    import jinja2

    raise jinja2.exceptions.TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """Template filter: JSON text of `value`, without Jinja's HTML escaping (a chat is not a web page)."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    """Template helper: the local date and time formatted by `format` (templates that state today's date)."""
    return datetime.now().strftime(format)


class _Dict:
    """The template's `dict`: builds plain dicts (dict(a=1), dict.fromkeys(keys)) without exposing the
    dict type itself to attribute tricks."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


def _safe_namespace(jinja2):
    """The template's `namespace`: Jinja's, refusing attribute names that start with '_'."""
    def check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"a chat template cannot store the underscore name "
                                                  f"{name!r} on a namespace")

    class Namespace(jinja2.utils.Namespace):
        def __init__(*args, **kwargs):      # `self` not named: namespace(self=1) must work, as in Jinja
            attrs = dict(*args[1:], **kwargs)
            for name in attrs:
                check(name)
            jinja2.utils.Namespace.__init__(args[0], attrs)

        def __setitem__(self, name, value):
            check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

    return Namespace


def _generation_tag(jinja2):
    """An extension for `{% generation %}...{% endgeneration %}`: the body, rendered as it is."""
    class Generation(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    return Generation


@functools.lru_cache(maxsize=1)
def _environment():
    """The sandboxed Jinja environment of chat templates (built once)."""
    jinja2 = _require_jinja2()
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_generation_tag(jinja2), jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now, dict=_Dict(),
                       namespace=_safe_namespace(jinja2))
    return env


def compile_template(template):
    """The compiled Jinja template of a chat template's text (cached: a chat renders one template
    many times). TypeError for a non-string, ChatTemplateError for a template that does not parse."""
    if not isinstance(template, str):
        raise TypeError(f"chat template must be a str (Jinja text), got {type(template).__name__}")
    return _compile(template)


@functools.lru_cache(maxsize=16)
def _compile(template):
    env = _environment()
    try:
        return env.from_string(template)
    except _jinja_errors() as e:
        raise ChatTemplateError(f"the chat template does not parse: {_describe(e)}") from None


def _jinja_errors():
    import jinja2

    return jinja2.exceptions.TemplateError


def _describe(error):
    line = getattr(error, "lineno", None)
    return f"{error} (line {line})" if line else str(error) or type(error).__name__


# ---- rendering ----------------------------------------------------------------------------------------


def render_chat(template, messages, add_generation_prompt=True, bos_token=None, eos_token=None, **extra):
    """The text of `messages` (a list of {'role': str, 'content': str} dicts, other keys passed on) laid
    out by the Jinja chat `template`, as transformers' `apply_chat_template(..., tokenize=False)`.

    add_generation_prompt: end with the header of the assistant's reply (what a model continues).
    bos_token / eos_token: the strings templates write as `{{ bos_token }}` (left undefined, i.e.
    empty, when None); `extra`: more template variables (e.g. tools=[...], enable_thinking=False)."""
    messages = check_messages(messages)
    compiled = compile_template(template)
    tokens = {k: v for k, v in (("bos_token", bos_token), ("eos_token", eos_token)) if v is not None}
    variables = {"tools": None, "documents": None, **tokens, **extra}
    try:
        return compiled.render(messages=messages, add_generation_prompt=bool(add_generation_prompt),
                               **variables)
    except _jinja_errors() as e:
        raise ChatTemplateError(f"the chat template failed on this conversation: {_describe(e)}") from None
