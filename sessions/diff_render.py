"""The review diff of one file: its patch parsed into hunks, each side highlighted in the file's
own language (Pygments, lexer by file name, plain text when none fits), rendered as a unified
and a side-by-side table. The page shows one of the two (a toggle in the browser), so both are
rendered; each file's rendering is cached by (path, patch hash), since the session page, the
live stream and every reload ask for the same files again.

Every line of code goes through Pygments' HTML formatter, which escapes it; the rest of the
markup is built here with `html.escape`, so the result is safe to mark safe.
"""

from __future__ import annotations

import hashlib
import html
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Literal

from django.utils.safestring import SafeString
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.util import ClassNotFound

# Beyond these a file is shown without colours (still marked line by line): highlighting is
# linear but not free, and a reviewer does not read a 10,000-line generated file.
MAX_HIGHLIGHT_CHARS = 200_000
MAX_HIGHLIGHT_LINES = 5_000
# A whole file bigger than this is not shown whole (docs/sessions.md, "Reviewing the diff").
WHOLE_FILE_MAX_BYTES = 1_000_000
WHOLE_FILE_MAX_LINES = 20_000
TRUNCATED = "… (truncated)"  # what sessions.workspace_git puts where it cut a patch
PLAIN = "plain text"

Kind = Literal["ctx", "add", "del"]
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_FORMATTER = HtmlFormatter(nowrap=True)


@dataclass(frozen=True)
class Line:
    kind: Kind
    old: int | None  # line number on the old side (None for an added line)
    new: int | None  # on the new side (None for a removed line)
    text: str


@dataclass
class Hunk:
    header: str
    old_start: int
    new_start: int
    lines: list[Line] = field(default_factory=list)


@dataclass
class Patch:
    hunks: list[Hunk]
    status: str  # "modified", "added", "deleted", "renamed"
    truncated: bool


def parse_patch(patch: str) -> Patch:
    """The hunks of one file's `git diff` output. Lines are split on "\\n" only (a form feed
    or a lone carriage return inside a line is part of it, as git sees it)."""
    hunks: list[Hunk] = []
    status, truncated = "modified", False
    old = new = 0
    for raw in patch.split("\n"):
        if raw == TRUNCATED:
            truncated = True
            break
        match = _HUNK.match(raw)
        if match:
            old, new = int(match.group(1)), int(match.group(3))
            hunks.append(Hunk(header=raw, old_start=old, new_start=new))
        elif not hunks:  # the file's header: mode and name lines
            if raw.startswith("new file mode"):
                status = "added"
            elif raw.startswith("deleted file mode"):
                status = "deleted"
            elif raw.startswith("rename from"):
                status = "renamed"
        elif raw.startswith("+"):
            hunks[-1].lines.append(Line("add", None, new, raw[1:]))
            new += 1
        elif raw.startswith("-"):
            hunks[-1].lines.append(Line("del", old, None, raw[1:]))
            old += 1
        elif raw.startswith(" "):
            hunks[-1].lines.append(Line("ctx", old, new, raw[1:]))
            old, new = old + 1, new + 1
        # "\ No newline at end of file" and the final empty string: nothing to show
    return Patch(hunks=hunks, status=status, truncated=truncated)


def lexer_for(path: str) -> Lexer | None:
    """The Pygments lexer for a file name, or None (plain text) when none is known."""
    name = path.rsplit("/", 1)[-1]
    try:
        # stripnl=False: leading blank lines are lines too; the numbering must not shift.
        return get_lexer_for_filename(name, stripnl=False, ensurenl=True)
    except ClassNotFound:
        return None


def highlight_lines(texts: list[str], lexer: Lexer | None) -> list[str]:
    """One HTML string per line of `texts`, highlighted as consecutive code (or escaped)."""
    if lexer is None or not texts:
        return [html.escape(t) for t in texts]
    # Pygments turns "\r" into a line break; it is no line of git's, so it is not shown.
    source = "\n".join(t.replace("\r", "") for t in texts) + "\n"
    try:
        out = highlight(source, lexer, _FORMATTER).split("\n")
    except Exception:  # a lexer bug must cost the colours, not the review
        out = []
    if len(out) < len(texts):
        return [html.escape(t) for t in texts]
    return out[: len(texts)]


@dataclass(frozen=True)
class RenderedFile:
    language: str
    unified: SafeString
    split: SafeString
    notes: tuple[str, ...]


def render_patch(path: str, patch: str) -> RenderedFile:
    """One file's patch as the review shows it (cached by path and patch)."""
    key = ("patch", path, _digest(patch))
    return _cached(key, lambda: _render_patch(path, patch))


def _render_patch(path: str, patch: str) -> RenderedFile:
    parsed = parse_patch(patch)
    lexer, notes = _lexer_within_limits(path, len(patch), patch.count("\n"))
    if parsed.truncated:
        notes.append("The patch was cut here: it is too long to keep whole in the session's log.")
    return _render(path, parsed.hunks, lexer, notes)


def render_whole_file(path: str, patch: str, content: str) -> RenderedFile:
    """The file as the diff left it (`content`), every line shown, with the patch's changes
    marked where they are. Cached by path, patch and content."""
    key = ("whole", path, _digest(patch), _digest(content))
    return _cached(key, lambda: _render_whole_file(path, patch, content))


def _render_whole_file(path: str, patch: str, content: str) -> RenderedFile:
    parsed = parse_patch(patch)
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    lexer, notes = _lexer_within_limits(path, len(content), len(lines))
    merged = _whole_file_lines(parsed, lines)
    if parsed.truncated:
        notes.append("The patch was cut: changes past its last hunk are not marked.")
    header = f"{path}: the whole file ({len(lines)} lines)"
    whole = Hunk(header=header, old_start=1, new_start=1, lines=merged)
    return _render(path, [whole], lexer, notes)


def _whole_file_lines(parsed: Patch, lines: list[str]) -> list[Line]:
    """Every line of the new side, the hunks' removed lines in their places."""
    merged: list[Line] = []
    old = new = 1  # the next line of each side not shown yet

    def context_upto(last_new: int) -> None:
        nonlocal old, new
        while new <= min(last_new, len(lines)):
            merged.append(Line("ctx", old, new, lines[new - 1]))
            old, new = old + 1, new + 1

    for hunk in parsed.hunks:
        has_new = any(line.kind != "del" for line in hunk.lines)
        # A hunk that only removes says "+N,0": its lines go after new line N.
        context_upto(hunk.new_start - 1 if has_new else hunk.new_start)
        merged.extend(hunk.lines)
        new = max(new, hunk.new_start + sum(line.kind != "del" for line in hunk.lines))
        old = max(old, hunk.old_start + sum(line.kind != "add" for line in hunk.lines))
    context_upto(len(lines))
    return merged


def _lexer_within_limits(path: str, chars: int, lines: int) -> tuple[Lexer | None, list[str]]:
    lexer = lexer_for(path)
    if lexer is not None and (chars > MAX_HIGHLIGHT_CHARS or lines > MAX_HIGHLIGHT_LINES):
        return None, [f"Shown without highlighting: {lines:,} lines is more than it colours."]
    return lexer, []


def _render(path: str, hunks: list[Hunk], lexer: Lexer | None, notes: list[str]) -> RenderedFile:
    unified: list[str] = []
    split: list[str] = []
    for hunk in hunks:
        old_side = [line for line in hunk.lines if line.kind != "add"]
        new_side = [line for line in hunk.lines if line.kind != "del"]
        shown: dict[int, str] = {}  # id(line) -> its highlighted HTML
        for side in (old_side, new_side):
            codes = highlight_lines([x.text for x in side], lexer)
            shown.update((id(line), code) for line, code in zip(side, codes, strict=True))
        header = html.escape(hunk.header)
        unified.append(f'<tr class="hunk"><td class="ln"></td><td class="ln"></td>'
                       f'<td class="code">{header}</td></tr>')  # fmt: skip
        split.append(f'<tr class="hunk"><td class="code" colspan="4">{header}</td></tr>')
        for line in hunk.lines:
            unified.append(
                f'<tr class="{line.kind}"{_numbers(line)}><td class="ln">{_n(line.old)}</td>'
                f'<td class="ln">{_n(line.new)}</td><td class="code">{shown[id(line)]}</td></tr>'
            )
        for left, right in _pairs(hunk.lines):
            split.append(f"<tr>{_half(left, left and left.old, shown)}"
                         f"{_half(right, right and right.new, shown)}</tr>")  # fmt: skip
    return RenderedFile(
        language=lexer.name if lexer is not None else PLAIN,
        unified=_table("unified", unified),
        split=_table("split", split),
        notes=tuple(notes),
    )


def _pairs(lines: list[Line]) -> list[tuple[Line | None, Line | None]]:
    """Side-by-side rows: a context line on both sides; a run of removed lines beside the run
    of added lines that follows it."""
    rows: list[tuple[Line | None, Line | None]] = []
    removed: list[Line] = []
    added: list[Line] = []

    def flush() -> None:
        rows.extend(zip_longest(removed, added))
        removed.clear()
        added.clear()

    for line in lines:
        if line.kind == "ctx":
            flush()
            rows.append((line, line))
        elif line.kind == "del":
            if added:
                flush()
            removed.append(line)
        else:
            added.append(line)
    flush()
    return rows


def _half(line: Line | None, number: int | None, shown: dict[int, str]) -> str:
    if line is None:
        return '<td class="ln empty"></td><td class="code empty"></td>'
    return (f'<td class="ln {line.kind}">{_n(number)}</td>'
            f'<td class="code {line.kind}">{shown[id(line)]}</td>')  # fmt: skip


def _numbers(line: Line) -> str:
    """Data attributes a line comment can be anchored by (old and new line numbers)."""
    attrs = f' data-old="{line.old}"' if line.old is not None else ""
    return attrs + (f' data-new="{line.new}"' if line.new is not None else "")


def _n(number: int | None) -> str:
    return "" if number is None else str(number)


# The columns' widths: the first row may be a header spanning them all, which a fixed layout
# would otherwise size them by.
_COLUMNS = {
    "unified": '<col class="ln"><col class="ln"><col>',
    "split": '<col class="ln"><col><col class="ln"><col>',
}


def _table(layout: str, rows: list[str]) -> SafeString:
    body = "\n".join(rows)
    return SafeString(
        f'<table class="diff-table {layout} highlight"><colgroup>{_COLUMNS[layout]}</colgroup>'
        f"<tbody>{body}</tbody></table>"
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def file_key(path: str, patch: str) -> str:
    """Names one version of one file's change: what "viewed" marks (a new version of the
    change is not viewed yet)."""
    return hashlib.sha256(f"{path}\0{patch}".encode("utf-8", "surrogatepass")).hexdigest()[:40]


# -- the cache ----------------------------------------------------------------------------------

CACHE_CHARS = 64_000_000  # per process; an entry is the HTML of both layouts
_cache: OrderedDict[tuple, tuple[RenderedFile, int]] = OrderedDict()
_cache_chars = 0
_cache_lock = threading.Lock()  # the live stream renders in a database thread


def _cached(key: tuple, render) -> RenderedFile:
    global _cache_chars
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit[0]
    rendered = render()
    size = len(rendered.unified) + len(rendered.split)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = (rendered, size)
            _cache_chars += size
        while _cache_chars > CACHE_CHARS and len(_cache) > 1:
            _, (_, dropped) = _cache.popitem(last=False)
            _cache_chars -= dropped
    return rendered


def clear_cache() -> None:
    """Forget every rendered file (tests)."""
    global _cache_chars
    with _cache_lock:
        _cache.clear()
        _cache_chars = 0
