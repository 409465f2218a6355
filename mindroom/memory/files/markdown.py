"""Memory entries in markdown files that people read and edit by hand. Pure functions, no I/O.

A memory file (``MEMORY.md``, ``memory/YYYY-MM-DD.md``, a topic file) is ordinary markdown.
Everything in it that is a memory is an *entry*; :func:`parse_entries` finds them and the edit
functions change one entry while leaving every other byte of the file alone.

Mindroom entries
    What mindroom writes. The first line is a bullet that ends with an id marker; every further
    line of the text is a continuation line indented by exactly two spaces, and a blank line of
    the text is a line of exactly two spaces::

        - Alice prefers tea <!-- m-1a2b3c4d -->
        - Project X notes: <!-- m-0f0f0f0f -->
            indented by two in the text
          # a heading inside the text

          second paragraph

    The id is the *last* ``<!-- m-xxxxxxxx -->`` at the end of the first line (``m-`` and eight
    lowercase hex digits), so a text whose own first line ends in something marker-like still
    reads back with the right id and text. The marker may carry the entry's structured fields
    after the id (``<!-- m-1a2b3c4d category=profile importance=4 pinned -->``, see
    :mod:`mindroom.memory.files.fields`); an edit of the text keeps them. The entry runs over the
    following lines that start with two spaces; whitespace-only lines at its end are not
    part of it. Entries start in column 0 (an indented marker line is just text).

Hand-written entries
    Every other non-blank line is a memory of its own, except markdown headings (``# ...``,
    and ``===`` underlines), horizontal rules, YAML front matter (``---`` on line 1 up to its
    closing ``---`` or ``...``) and HTML comments (a line starting with ``<!--``, up to the line
    that closes it). A leading ``-``, ``*``, ``+`` or ``1.`` bullet is not part of the text.
    Lines indented deeper than a hand-written bullet that directly follow it belong to it (a
    multi-line bullet; its continuation lines lose up to the bullet's content indentation, a
    whitespace-only line between two of them is a blank line of the text, an empty line ends
    it). A fenced code block (```` ``` ```` or ``~~~``, closed) is one entry, fences included.
    A hand-written entry's id is :func:`hand_id` of its file and text, so it is stable while
    the line is unchanged, wherever the line moves in the file.

    Front matter, code fences and multi-line comments never extend across a mindroom entry's
    first line: an opener whose closer would be after one stands alone. So entries mindroom
    appends can never be swallowed by an unclosed ```` ``` ```` or ``<!--`` a person left behind.

Lines are separated by ``\\n`` only (a ``\\r`` before it belongs to the line ending); a leading
byte order mark is ignored and kept.

Guarantees
    * Texts round-trip exactly (after :func:`normalize_text`): any unicode, markdown inside,
      headings and list items on any line, leading spaces, blank lines, ``<!-- m-... -->``
      anywhere in the text.
    * :func:`append_entry` only adds bytes at the end: a line ending if the file lacked a final
      one, then the entry, ending in a newline. It never adds a blank line.
    * :func:`replace_entry` and :func:`remove_entry` rewrite only the lines of the first entry
      with the id; every other line keeps its bytes (trailing whitespace, ``\\r\\n`` endings, a
      missing final newline). New lines take the line ending of the line they replace.
    * After an edit every other entry parses exactly as before (same id, text, and line range
      shifted by the edit). Where the rewritten lines alone would change how a neighbouring line
      reads (an indented line that would join a bullet, a ``---`` that would become line 1 and
      open front matter), one empty line is written with them to keep the neighbour apart.
      The one case this cannot cover: removing the only mindroom entry that stood between an
      unclosed fence (or comment, or front matter) opener and a later closing line; the entry
      is removed anyway and the block closes as markdown would read it.
    * Replacing a hand-written entry writes hand-written markdown: the same bullet marker and
      indentation (``- `` when it had none and the text does not fit on one plain line, ``* ``
      or ``-   `` when needed to read back right), or plain text / the verbatim code block when
      it had no bullet; its id becomes ``hand_id(path, new_text)``. Only when no hand-written
      form reads back as exactly the new text in that place (in practice: a text containing
      ``-->`` below an unclosed ``<!--``) it becomes a mindroom entry ``m-`` + the old id's hex.

Where new memories go
    :func:`append_new_entry` (what every writer of a new memory uses: the agents' tools, the
    flush, the CLI, consolidation) puts an entry at the end of the section a comment line
    ``<!-- mindroom: new memories below -->`` opens (the words may have more around them, in a
    comment of one line or several): after that section's last line that is not blank, before
    the next heading of the level of the marker's own heading or above. A file without the
    marker gets it at its end, as :func:`append_entry` does, unless that would put it under an
    unrelated heading: when the file ends in a section (not under its title alone, nor under a
    section titled ``Notes``), a ``## Notes`` heading and the marker are appended first, once;
    either way it only adds lines, every other line keeps its bytes. :func:`append_entry` always
    appends at the very end (the archive file keeps its own order).

What a model reads
    An HTML comment that is not part of an entry is for people (a template's guidance, the
    marker above): :func:`without_guidance` takes it out of a file's lines, on one line or
    several, and out of headings; every path that shows a memory file to a model reads the file
    through it. Entry id markers, and comments a person wrote inside an entry's text, stay: they
    are part of the entry. A ``<!--`` inside a fenced code block is code, not a comment.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import replace as _replace

from mindroom.memory.files.dates import entry_date
from mindroom.memory.files.fields import (
    FIELD_WORD,
    NO_FIELDS,
    EntryFields,
    check_fields,
    parse_fields,
    render_fields,
)

ENTRY_ID_RE = re.compile(r"\bm-[0-9a-f]{8}\b")

_ENTRY_LINE_RE = re.compile(
    rf"^- (?P<first>.*) <!-- (?P<id>m-[0-9a-f]{{8}})(?P<fields>(?: {FIELD_WORD})*) -->[ \t]*$"
)
_HEADING_RE = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_UNDERLINE_RE = re.compile(r"^ {0,3}=+[ \t]*$")
_RULE_RE = re.compile(r"^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
_FENCE_RE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_COMMENT_RE = re.compile(r"^ {0,3}<!--")
_BULLET_RE = re.compile(r"^(?P<prefix>[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+)(?P<rest>\S.*)$")
_FRONT_OPEN_RE = re.compile(r"^---[ \t]*$")
_FRONT_CLOSE_RE = re.compile(r"^(?:---|\.\.\.)[ \t]*$")
_BOM = "\ufeff"


@dataclass(frozen=True)
class MemoryEntry:
    """One memory in a file: a mindroom entry (``m-`` id) or a hand-written one (``h-`` id)."""

    id: str
    text: str
    path: str
    start_line: int
    end_line: int
    fields: EntryFields = NO_FIELDS  # what its marker says (hand-written: none, defaults apply)

    @property
    def hand_written(self) -> bool:
        """True for lines a person wrote (no id marker); their id follows their text."""
        return self.id.startswith("h-")

    @property
    def date(self) -> dt.date | None:
        """The entry's date: its daily file's day, else the first date written in it."""
        return entry_date(self.path, self.text)


def new_entry_id() -> str:
    """A fresh random mindroom entry id: ``m-`` and eight hex digits."""
    return "m-" + secrets.token_hex(4)


def hand_id(path: str, text: str) -> str:
    """The id of a hand-written entry: ``h-`` + 8 hex of sha256(path NUL stripped text)."""
    data = f"{path}\0{text.strip()}".encode("utf-8", "surrogatepass")
    return "h-" + hashlib.sha256(data).hexdigest()[:8]


def normalize_text(text: str) -> str:
    """Memory text as stored: line breaks as ``\\n`` (also a lone ``\\r``), outer whitespace
    stripped. Raises ValueError when nothing is left."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        raise ValueError("memory text is empty")
    return text


def render_entry(entry_id: str, text: str, fields: EntryFields = NO_FIELDS) -> list[str]:
    """The lines (without line endings) of a mindroom entry with ``entry_id``, ``text`` and
    ``fields`` (see :mod:`mindroom.memory.files.fields`)."""
    if not ENTRY_ID_RE.fullmatch(entry_id):
        raise ValueError(f"not a mindroom entry id: {entry_id!r}")
    words = render_fields(check_fields(fields))
    first, *rest = normalize_text(text).split("\n")
    marker = f"<!-- {entry_id} {words} -->" if words else f"<!-- {entry_id} -->"
    return [f"- {first} {marker}", *("  " + line for line in rest)]


def parse_entries(document: str, path: str) -> list[MemoryEntry]:
    """Every entry of ``document`` in file order; ``path`` is recorded in them (and in ids)."""
    return [block.entry for block in _parse(_split_lines(_strip_bom(document)[1]), path)]


def iter_entries(document: str, path: str) -> Iterator[MemoryEntry]:
    """The entries of ``document`` in file order, parsed as they are taken (as
    :func:`parse_entries` reads them; stop early to read only the first few)."""
    lines = _split_lines(_strip_bom(document)[1])
    return (block.entry for block in _blocks([_content(line) for line in lines], path))


def append_entry(document: str, entry_id: str, text: str, fields: EntryFields = NO_FIELDS) -> str:
    """``document`` with a new mindroom entry at its end. Raises ValueError for a bad or taken id,
    an empty text or fields a marker cannot hold."""
    rendered = render_entry(entry_id, text, fields)
    bom, body = _strip_bom(document)
    lines = _split_lines(body)
    if any(block.entry.id == entry_id for block in _parse(lines, "")):
        raise ValueError(f"entry id {entry_id} is already in the document")
    eol = _document_eol(lines)
    if body and not body.endswith("\n"):
        body += eol
    return bom + body + "".join(line + eol for line in rendered)


def replace_entry(
    document: str, path: str, entry_id: str, text: str, fields: EntryFields | None = None
) -> str | None:
    """``document`` with the text (and the fields, unless None: kept) of the first entry
    ``entry_id`` replaced (None: no such id).

    A mindroom entry keeps its id. A hand-written entry stays hand-written where it can (see the
    module docstring) and then reads back with id ``hand_id(path, text)``; given fields, it
    becomes a mindroom entry ``m-`` + its old id's hex (hand-written lines have no marker).
    """
    text = normalize_text(text)
    bom, body = _strip_bom(document)
    lines = _split_lines(body)
    blocks = _parse(lines, path)
    index = _find(blocks, entry_id)
    if index is None:
        return None
    block = blocks[index]
    if block.kind == "mindroom":
        kept = block.entry.fields if fields is None else fields
        candidates = [(render_entry(entry_id, text, kept), entry_id, kept)]
    else:
        candidates = _hand_candidates(block, text, path, {b.entry.id for b in blocks})
        if fields is not None and fields != NO_FIELDS:
            new_id = candidates[-1][1]
            candidates = [(render_entry(new_id, text, fields), new_id, fields)]
    return bom + "".join(_edit(lines, blocks, index, path, text, candidates))


def remove_entry(document: str, path: str, entry_id: str) -> str | None:
    """``document`` without the lines of the first entry ``entry_id`` (None: no such id)."""
    bom, body = _strip_bom(document)
    lines = _split_lines(body)
    blocks = _parse(lines, path)
    index = _find(blocks, entry_id)
    if index is None:
        return None
    return bom + "".join(_edit(lines, blocks, index, path, "", [([], "", NO_FIELDS)]))


# -- parsing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Block:
    entry: MemoryEntry
    kind: str  # "mindroom", "bullet", "plain" or "code"
    prefix: str  # a bullet's marker with its indentation; else the first line's indentation


@dataclass(frozen=True)
class _Span:
    """Lines that hold no entry."""

    kind: str  # "heading", "rule" (also a heading's underline), "comment" or "front"
    start: int  # the index of its first line
    end: int  # the index of its last line


def _strip_bom(document: str) -> tuple[str, str]:
    if document.startswith(_BOM):
        return _BOM, document[1:]
    return "", document


def _split_lines(text: str) -> list[str]:
    """Lines with their endings; only ``\\n`` separates lines. ``"".join`` gives ``text`` back."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _content(line: str) -> str:
    if line.endswith("\n"):
        line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
    return line


def _width(text: str) -> int:
    """Columns of leading whitespace (a tab advances to the next multiple of four)."""
    width = 0
    for char in text:
        if char == " ":
            width += 1
        elif char == "\t":
            width += 4 - width % 4
        else:
            break
    return width


def _columns(prefix: str) -> int:
    """Columns ``prefix`` takes at the start of a line (where a bullet's content starts)."""
    return _width(re.sub(r"[^\t]", " ", prefix) + "x")


def _indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _strip_columns(line: str, columns: int) -> str:
    """``line`` without up to ``columns`` columns of leading whitespace."""
    width = 0
    index = 0
    while index < len(line) and width < columns and line[index] in " \t":
        width = width + 1 if line[index] == " " else width + 4 - width % 4
        index += 1
    return line[index:]


def _closing_line(contents: list[str], start: int, closes: re.Pattern[str] | str) -> int | None:
    """The first line after ``start`` that ``closes`` (a regex, or a substring), unless a
    mindroom entry line comes first."""
    for index in range(start + 1, len(contents)):
        line = contents[index]
        if _ENTRY_LINE_RE.match(line):
            return None
        closed = closes in line if isinstance(closes, str) else closes.match(line)
        if closed:
            return index
    return None


def _fence_end(contents: list[str], start: int) -> int | None:
    match = _FENCE_RE.match(contents[start])
    if match is None:
        return None
    fence = match.group("fence")
    if fence[0] == "`" and "`" in match.group("info"):
        return None
    closer = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    return _closing_line(contents, start, closer)


def _comment_end(contents: list[str], start: int) -> int | None:
    match = _COMMENT_RE.match(contents[start])
    if match is None:
        return None
    if "-->" in contents[start][match.end() :]:
        return start
    end = _closing_line(contents, start, "-->")
    return start if end is None else end


def _hand(path: str, text: str, start: int, end: int, kind: str, prefix: str) -> _Block:
    return _Block(MemoryEntry(hand_id(path, text), text, path, start + 1, end + 1), kind, prefix)


def _parse(lines: list[str], path: str) -> list[_Block]:
    return list(_blocks([_content(line) for line in lines], path))


def _blocks(contents: list[str], path: str) -> Iterator[_Block]:
    """The blocks of a document's lines (without their endings), in order, as they are found:
    a reader that needs only the first few stops early (a big file's listing)."""
    return (part for part in _layout(contents, path) if isinstance(part, _Block))


def _layout(contents: list[str], path: str) -> Iterator[_Block | _Span]:
    """Every block and every span of lines that holds no entry, in order: together they cover
    every line that is not blank."""
    index = 0
    if contents and _FRONT_OPEN_RE.match(contents[0]):
        end = _closing_line(contents, 0, _FRONT_CLOSE_RE)
        if end is not None:
            yield _Span("front", 0, end)
            index = end + 1
    while index < len(contents):
        if not contents[index].strip():
            index += 1
            continue
        for read in _BLOCK_READERS:
            found = read(contents, index, path)
            if found is not None:
                part, index = found
                yield part
                break


# A block reader: at line ``index`` (not blank), None if the block there is not its kind, else
# the block (or the span of lines that hold no entry, e.g. a heading) and the index after it.
_Read = tuple[_Block | _Span, int] | None


def _entry_block(contents: list[str], index: int, path: str) -> _Read:
    """A mindroom entry: its marker line and the lines indented two spaces under it."""
    entry = _ENTRY_LINE_RE.match(contents[index])
    if entry is None:
        return None
    end = index
    follow = index + 1
    while follow < len(contents) and contents[follow].startswith("  "):
        if contents[follow].strip():
            end = follow
        follow += 1
    parts = [entry.group("first"), *(c[2:] for c in contents[index + 1 : end + 1])]
    text = "\n".join(parts).strip()
    fields = parse_fields(entry.group("fields"))
    found = MemoryEntry(entry.group("id"), text, path, index + 1, end + 1, fields)
    return _Block(found, "mindroom", ""), end + 1


def _code_block(contents: list[str], index: int, path: str) -> _Read:
    end = _fence_end(contents, index)
    if end is None:
        return None
    text = "\n".join(contents[index : end + 1]).strip()
    return _hand(path, text, index, end, "code", _indentation(contents[index])), end + 1


def _structure(contents: list[str], index: int, _path: str) -> _Read:
    """A heading, a rule or a heading's underline: no entry."""
    line = contents[index]
    if _HEADING_RE.match(line):
        return _Span("heading", index, index), index + 1
    if _RULE_RE.match(line) or _UNDERLINE_RE.match(line):
        return _Span("rule", index, index), index + 1
    return None


def _comment(contents: list[str], index: int, _path: str) -> _Read:
    """An HTML comment, on one line or several: no entry."""
    end = _comment_end(contents, index)
    return None if end is None else (_Span("comment", index, end), end + 1)


def _bullet_block(contents: list[str], index: int, path: str) -> _Read:
    """A hand-written bullet and the lines indented deeper under it."""
    bullet = _BULLET_RE.match(contents[index])
    if bullet is None:
        return None
    prefix = bullet.group("prefix")
    width, offset = _width(prefix), _columns(prefix)
    end = index
    follow = index + 1
    while follow < len(contents) and _width(contents[follow]) > width:
        if contents[follow].strip():
            end = follow
        follow += 1
    rest = (_strip_columns(c, offset) for c in contents[index + 1 : end + 1])
    text = "\n".join([bullet.group("rest"), *rest]).strip()
    return _hand(path, text, index, end, "bullet", prefix), end + 1


def _plain_block(contents: list[str], index: int, path: str) -> _Read:
    """Any other line: a hand-written entry of its own."""
    line = contents[index]
    return _hand(path, line.strip(), index, index, "plain", _indentation(line)), index + 1


_BLOCK_READERS = (
    _entry_block,
    _code_block,
    _structure,
    _comment,
    _bullet_block,
    _plain_block,  # always reads: the loop always moves on
)


# -- editing -----------------------------------------------------------------------------------


def _find(blocks: list[_Block], entry_id: str) -> int | None:
    for index, block in enumerate(blocks):
        if block.entry.id == entry_id:
            return index
    return None


def _eol_of(line: str) -> str | None:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith("\n"):
        return "\n"
    return None


def _document_eol(lines: list[str]) -> str:
    """The line ending of the last line that has one (``\\n`` for none)."""
    for line in reversed(lines):
        eol = _eol_of(line)
        if eol is not None:
            return eol
    return "\n"


def _render_bullet(prefix: str, text: str) -> list[str]:
    indent = " " * _columns(prefix)
    first, *rest = text.split("\n")
    return [prefix + first, *(indent + line for line in rest)]


_Candidate = tuple[list[str], str, EntryFields]  # content lines, the id and fields they read as


def _hand_candidates(block: _Block, text: str, path: str, taken: set[str]) -> list[_Candidate]:
    """Ways to write ``text`` in place of a hand-written entry, most faithful first."""
    new_id = hand_id(path, text)
    forms: list[list[str]] = []
    indent = _indentation(block.prefix)
    if block.kind == "bullet":
        forms.append(_render_bullet(block.prefix, text))
    else:
        # plain text, or a code block as written
        first, *rest = text.split("\n")
        forms.append([indent + first, *rest])
    for marker in ("- ", "* ", "-   "):
        forms.append(_render_bullet(indent + marker, text))
    candidates: list[_Candidate] = []
    for form in forms:
        if (form, new_id, NO_FIELDS) not in candidates:
            candidates.append((form, new_id, NO_FIELDS))
    digest = block.entry.id[2:]
    while "m-" + digest in taken:
        digest = hashlib.sha256(digest.encode()).hexdigest()[:8]
    candidates.append((render_entry("m-" + digest, text), "m-" + digest, NO_FIELDS))
    return candidates


_PADDINGS = ((False, False), (False, True), (True, False), (True, True))


def _edit(
    lines: list[str],
    blocks: list[_Block],
    index: int,
    path: str,
    text: str,
    candidates: list[_Candidate],
) -> list[str]:
    """``lines`` with the lines of ``blocks[index]`` replaced by the first candidate (content
    lines, expected id) that leaves every other entry as it was and reads back as one entry
    (id, ``text``); an empty candidate removes. Falls back to the last candidate unpadded."""
    target = blocks[index].entry
    start, stop = target.start_line - 1, target.end_line
    eol = _eol_of(lines[start]) or (_eol_of(lines[start - 1]) if start else None) or "\n"
    unterminated = _eol_of(lines[stop - 1]) is None
    before, after = lines[:start], lines[stop:]
    kept_before = [block.entry for block in blocks[:index]]

    def splice(content: list[str], pad_before: bool, pad_after: bool) -> list[str]:
        new = [""] * pad_before + content + [""] * pad_after
        rendered = [line + eol for line in new]
        if unterminated and rendered:
            rendered[-1] = new[-1]
        return before + rendered + after

    for content, new_id, fields in candidates:
        for pad_before, pad_after in _PADDINGS:
            if not content and pad_before:
                continue
            result = splice(content, pad_before, pad_after)
            delta = len(result) - len(lines)
            expected = list(kept_before)
            if content:
                first = start + 1 + pad_before
                last = first + len(content) - 1
                expected.append(MemoryEntry(new_id, text, path, first, last, fields))
            expected += [
                _replace(
                    b.entry,
                    start_line=b.entry.start_line + delta,
                    end_line=b.entry.end_line + delta,
                )
                for b in blocks[index + 1 :]
            ]
            if [block.entry for block in _parse(result, path)] == expected:
                return result
    return splice(candidates[-1][0], False, False)


# -- batches and export forms (import, export) -------------------------------------------------


def append_entries(document: str, items: list[tuple[str, str, EntryFields]]) -> str:
    """``document`` with new mindroom entries ``(id, text, fields)`` at its end, in order: what
    :func:`append_entry` does for each, with one parse of the document for the whole batch.
    Raises ValueError for a bad or taken id (also one taken twice in ``items``)."""
    bom, body = _strip_bom(document)
    lines = _split_lines(body)
    taken = {block.entry.id for block in _parse(lines, "")}
    eol = _document_eol(lines)
    rendered: list[str] = []
    for entry_id, text, fields in items:
        if entry_id in taken:
            raise ValueError(f"entry id {entry_id} is already in the document")
        taken.add(entry_id)
        rendered += render_entry(entry_id, text, fields)
    if body and not body.endswith("\n"):
        body += eol
    return bom + body + "".join(line + eol for line in rendered)


def hand_lines(text: str) -> list[str] | None:
    """Lines of hand-written markdown that read back, alone, as one hand-written entry with
    exactly ``text`` (so its id is ``hand_id(path, text)`` wherever it is written); None when
    no such form exists (then only a mindroom entry can hold the text)."""
    text = normalize_text(text)
    first, *rest = text.split("\n")
    forms = [_render_bullet("- ", text), [first, *rest]]
    forms += [_render_bullet(marker, text) for marker in ("* ", "-   ")]
    for form in forms:
        blocks = _parse([line + "\n" for line in form], "")
        if len(blocks) == 1 and blocks[0].kind != "mindroom" and blocks[0].entry.text == text:
            return form
    return None


def entry_sections(document: str, path: str) -> list[tuple[MemoryEntry, str | None]]:
    """Every entry of ``document`` with the markdown heading line it stands under (None: before
    any heading), in file order. Headings inside an entry (a code block, a continuation line)
    do not count."""
    lines = _split_lines(_strip_bom(document)[1])
    contents = [_content(line) for line in lines]
    found: list[tuple[MemoryEntry, str | None]] = []
    heading: str | None = None
    done = 0  # lines before this index are accounted for
    for block in _parse(lines, path):
        entry = block.entry
        for line in contents[done : entry.start_line - 1]:
            if _HEADING_RE.match(line):
                heading = line.strip()
        found.append((entry, heading))
        done = entry.end_line
    return found


def last_heading(document: str) -> str | None:
    """The last heading line of ``document`` outside its entries (None: it has none)."""
    lines = _split_lines(_strip_bom(document)[1])
    contents = [_content(line) for line in lines]
    inside: set[int] = set()
    for block in _parse(lines, ""):
        inside.update(range(block.entry.start_line - 1, block.entry.end_line))
    for index in range(len(contents) - 1, -1, -1):
        if index not in inside and _HEADING_RE.match(contents[index]):
            return contents[index].strip()
    return None


# -- where new memories go; what a model reads -------------------------------------------------

NEW_MEMORIES_MARKER = "<!-- mindroom: new memories below -->"
NEW_MEMORIES_TITLE = "Notes"  # the heading mindroom starts a section of new memories with
_MARKER_WORDS = "mindroom: new memories below"
_INLINE_COMMENT_RE = re.compile(r"<!--.*?-->")


def append_new_entry(
    document: str, entry_id: str, text: str, fields: EntryFields = NO_FIELDS
) -> str:
    """``document`` with a new mindroom entry where new memories go: at the end of the section
    :data:`NEW_MEMORIES_MARKER` opens, else at the end of the file, after a new
    ``## Notes`` heading (and the marker) when the file would otherwise end under an unrelated
    heading (see the module docstring). Each placement is taken only if every other entry reads
    as before (the last one always does). Raises ValueError as :func:`append_entry` does."""
    rendered = render_entry(entry_id, text, fields)
    wanted = _parse([line + "\n" for line in rendered], "")[0].entry
    bom, body = _strip_bom(document)
    lines = _split_lines(body)
    contents = [_content(line) for line in lines]
    parts = list(_layout(contents, ""))
    blocks = [part for part in parts if isinstance(part, _Block)]
    if any(block.entry.id == entry_id for block in blocks):
        raise ValueError(f"entry id {entry_id} is already in the document")
    spans = [part for part in parts if isinstance(part, _Span)]
    where = _new_memories_end(contents, parts, spans)
    if where is not None and where < len(lines):
        placed = _insert(lines, where, [rendered, [*rendered, ""]], wanted, blocks)
        if placed is not None:
            return bom + "".join(placed)
    eol = _document_eol(lines)
    if lines and _eol_of(lines[-1]) is None:
        lines = [*lines[:-1], lines[-1] + eol]
    heading = _new_section_heading(contents, spans) if where is None else None
    if heading is not None:
        lead = [""] if contents and contents[-1].strip() else []
        sectioned = [*lead, heading, NEW_MEMORIES_MARKER, *rendered]
        placed = _insert(lines, len(lines), [sectioned], wanted, blocks)
        if placed is not None:
            return bom + "".join(placed)
    return bom + "".join(lines) + "".join(line + eol for line in rendered)


def without_guidance(document: str) -> list[str | None]:
    """The lines of ``document`` (without their endings) as a model may read them: None for
    every line of an HTML comment that is not part of an entry (guidance for people, like a
    template's notes, on one line or several), and a heading without its comments. An entry's
    lines are as they are: its id marker, and a comment a person wrote inside its text, are
    part of it (a model that updates the entry must not drop them)."""
    contents = [_content(line) for line in _split_lines(_strip_bom(document)[1])]
    shown: list[str | None] = list(contents)
    for part in _layout(contents, ""):
        if isinstance(part, _Span) and part.kind == "comment":
            shown[part.start : part.end + 1] = [None] * (part.end + 1 - part.start)
        elif isinstance(part, _Span) and part.kind == "heading":
            shown[part.start] = _INLINE_COMMENT_RE.sub("", contents[part.start]).rstrip()
    return shown


def _is_marker(line: str) -> bool:
    """Whether a comment's line holds the marker's words (a template may say more around them)."""
    return _MARKER_WORDS in " ".join(line.split()).casefold()


def _heading_level(line: str) -> int:
    return len(line.strip().split(maxsplit=1)[0])


def _new_memories_end(
    contents: list[str], parts: list[_Block | _Span], spans: list[_Span]
) -> int | None:
    """The index of the line after the section of new memories (after its last line that is
    not blank), None when the document has no marker. The section runs from the first marker
    (a line of a comment holding the marker's words) to the next heading of its own heading's
    level or above (any heading when the marker stands under none)."""
    marker = next(  # the first line of the comment that holds it
        (
            span.start
            for span in spans
            if span.kind == "comment"
            and any(_is_marker(line) for line in contents[span.start : span.end + 1])
        ),
        None,
    )
    if marker is None:
        return None
    above = [s for s in spans if s.kind == "heading" and s.start < marker]
    level = _heading_level(contents[above[-1].start]) if above else 6
    stop = next(
        (
            s.start
            for s in spans
            if s.kind == "heading"
            and s.start > marker
            and _heading_level(contents[s.start]) <= level
        ),
        len(contents),
    )
    starts = (p.entry.start_line - 1 if isinstance(p, _Block) else p.start for p in parts)
    ends = (p.entry.end_line - 1 if isinstance(p, _Block) else p.end for p in parts)
    last = max(end for start, end in zip(starts, ends, strict=True) if marker <= start < stop)
    return last + 1


def _new_section_heading(contents: list[str], spans: list[_Span]) -> str | None:
    """The heading to start a section of new memories with at the end of a document that has
    none; None when its end is a fine place as it is: no headings, or only the document's
    title (its one level-1 heading, first), or a section titled :data:`NEW_MEMORIES_TITLE`."""
    headings = [contents[s.start] for s in spans if s.kind == "heading"]
    if not headings:
        return None
    levels = [_heading_level(h) for h in headings]
    titled = levels[0] == 1 and levels.count(1) == 1
    last = headings[-1].strip().lstrip("#").strip()
    if (titled and len(headings) == 1) or last.casefold() == NEW_MEMORIES_TITLE.casefold():
        return None
    return "#" * (2 if titled else min(levels)) + " " + NEW_MEMORIES_TITLE


def _insert(
    lines: list[str], where: int, forms: list[list[str]], wanted: MemoryEntry, blocks: list[_Block]
) -> list[str] | None:
    """``lines`` with the first of ``forms`` (lines without endings, holding the new entry
    ``wanted``) before line ``where`` that reads back with ``wanted`` and every other entry
    (``blocks``) as it was; None when none does."""
    eol = (_eol_of(lines[where - 1]) if where else None) or _document_eol(lines)
    others = [(b.entry.id, b.entry.text, b.entry.fields) for b in blocks]
    for form in forms:
        result = [*lines[:where], *(line + eol for line in form), *lines[where:]]
        found = [block.entry for block in _parse(result, "")]
        new = [(e.text, e.fields) for e in found if e.id == wanted.id]
        rest = [(e.id, e.text, e.fields) for e in found if e.id != wanted.id]
        if new == [(wanted.text, wanted.fields)] and rest == others:
            return result
    return None
