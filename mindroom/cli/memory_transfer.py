"""``mindroom memory export`` / ``import``: a scope's memories as one document, both ways.

So switching an agent between backends (or machines) never loses memory: export from one,
change ``memory_backend``, import into the other (and compare two exports to check).

Two formats, both read back by ``import`` (it tells them apart by the first character):

markdown (default)
    A memory file in mindroom's own entry format (see :mod:`mindroom.memory.files.markdown`): a
    ``# Memories of <scope>`` heading, for the file backend a ``## <file>`` heading per memory
    file (the archive's files included), and every entry as it is stored: a mindroom entry as
    ``- text <!-- m-xxxxxxxx fields -->`` with its id and every field of its marker
    (category, importance, pinned, type, state, purge, created, updated, words not
    understood), a hand-written entry as a hand-written line (its ``h-`` id follows its file
    and text, so it comes back with the same id). A ``<!-- section: ## Heading -->`` line
    says which heading of its file the following entries stand under; an archived entry is
    followed by its archive note. A mem0 id (a uuid) becomes an ``m-`` id derived from it.

json (``--format json``)
    One object, stable within its ``version``::

        {"format": "mindroom-memory-export", "version": 1, "scope": "agent_general",
         "backend": "file", "exported_at": "2026-11-27T01:02:03Z", "count": 2,
         "entries": [
           {"id": "m-1a2b3c4d", "text": "Alice takes insulin", "file": "MEMORY.md",
            "section": "## Health", "line": 4, "hand_written": false,
            "marker": "category=health importance=5 pinned created=2026-11-02",
            "fields": {"category": "health", "importance": 5, "pinned": true, "type": null,
                       "state": null, "purge": null, "created": "2026-11-02",
                       "updated": null, "extra": []},
            "category": "health", "importance": 5, "type": "semantic",
            "date": "2026-11-02", "archived": false, "archive_note": null,
            "expired": false}]}

    ``fields`` is what the marker says (null: not written, the default applies); ``category``,
    ``importance`` and ``type`` are the values that apply (defaults filled in); ``marker`` is
    the marker's words as written, and is what ``import`` reads (``fields`` when it is
    missing). ``file`` and ``line`` are null on mem0, ``section`` is null before any heading;
    ``expired``: TTL soft-deleted it (``state=soft_deleted``, kept until its ``purge`` day);
    ``archived``: it is in ``memory/archive/`` (consolidation merged or superseded it).

The import reads any markdown memory file (an export, a ``MEMORY.md``, hand-written notes) or
a json export. It refuses before writing anything when the file is missing, not UTF-8, not a
valid export, names a file outside the memory folder, or holds no entry. On the file backend
every entry goes back into its file, under its heading, with its id and fields (entries
without a file, from notes or mem0, go to ``MEMORY.md`` with fresh ids), through the store's
batch write (:meth:`FileMemory.add_many_sync`: one lock, one rewrite and one batch of history
records, actor ``import``, per file). An id the memory already holds:

* with the same text and fields: skipped, counted as already there;
* with another text or other fields: both are kept, the imported one under a fresh id, and
  the import says so (``m-... is taken by a different memory: imported as m-...``).

An entry with a new id whose text the memory already holds is skipped too (already there). On
mem0 the texts are stored verbatim (no model call), each text once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mindroom.atomic import atomic_write
from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import MemoryBackend, in_engine, keeps_files
from mindroom.memory.files.dates import entry_date
from mindroom.memory.files.fields import (
    NO_FIELDS,
    EntryFields,
    check_fields,
    parse_fields,
    render_fields,
)
from mindroom.memory.files.markdown import (
    ENTRY_ID_RE,
    MemoryEntry,
    entry_sections,
    hand_id,
    hand_lines,
    normalize_text,
    parse_entries,
    render_entry,
)
from mindroom.memory.files.protocol import read_text
from mindroom.memory.files.store import FileMemory, NewEntry
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.policy.consent import ConsentPending, WriteConsent
from mindroom.memory.scope import ENTRYPOINT, confined_path
from mindroom.memory.search.index import ARCHIVE_DIR, memory_files

ACTOR = "import"
FORMAT = "mindroom-memory-export"
VERSION = 1
ALL = sys.maxsize  # "every memory" for a backend's list
# a foreign id marker at the end of an entry's first line (mem0's uuid ids), not part of the text
_FOREIGN_MARKER_RE = re.compile(
    r" <!-- (?P<id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}) -->[ \t]*$",
    re.MULTILINE,
)
_FILE_HEADING_RE = re.compile(r"^## (?P<file>\S.*\.md)[ \t]*$")
_SECTION_RE = re.compile(r"^<!-- section: (?P<heading>.*) -->[ \t]*$")
_NOTE_RE = re.compile(r"^<!-- archived .* -->[ \t]*$")
_HAND_ID_RE = re.compile(r"h-[0-9a-f]{8}")


@dataclass(frozen=True)
class ExportedEntry:
    """One entry of an export: as stored, with where it lives (``file`` None: no file)."""

    id: str
    text: str
    file: str | None = None
    section: str | None = None
    line: int | None = None
    fields: EntryFields = NO_FIELDS
    note: str | None = None  # an archived entry's archive note line

    @property
    def hand_written(self) -> bool:
        return self.id.startswith("h-")

    @property
    def archived(self) -> bool:
        return self.file is not None and self.file.startswith(ARCHIVE_DIR + "/")


# -- export ------------------------------------------------------------------------------------


def export_id(entry_id: str) -> str:
    """A mindroom entry id for a foreign ``entry_id`` (mem0's): itself if it is one, else
    derived from it."""
    if ENTRY_ID_RE.fullmatch(entry_id):
        return entry_id
    digits = entry_id.replace("-", "").lower()
    if re.fullmatch(r"[0-9a-f]{8,}", digits):
        return "m-" + digits[:8]
    return "m-" + hashlib.sha256(entry_id.encode()).hexdigest()[:8]


def file_entries(memory: FileMemory) -> list[ExportedEntry]:
    """Every entry of every memory file (``MEMORY.md`` first, the archive last); raises for an
    unreadable file (an export that silently left one out would lose it on the way)."""
    files = [relative for relative, _ in memory_files(memory.scope.root, archive=True)]
    archive = [f for f in files if f.startswith(ARCHIVE_DIR + "/")]
    ordered = [f for f in files if f == ENTRYPOINT]
    ordered += [f for f in files if f != ENTRYPOINT and f not in archive] + archive
    found: list[ExportedEntry] = []
    for relative in ordered:
        path, relative = confined_path(memory.scope.root, relative)
        document = read_text(path, relative)
        lines = document.split("\n")
        for entry, section in entry_sections(document, relative):
            after = lines[entry.end_line].rstrip("\r") if entry.end_line < len(lines) else ""
            note = after if relative in archive and _NOTE_RE.match(after) else None
            found.append(
                ExportedEntry(
                    entry.id, entry.text, relative, section, entry.start_line, entry.fields, note
                )
            )
    return found


def mem0_entries(memory: Mem0Memory) -> list[ExportedEntry]:
    """The scope's mem0 memories, oldest first (no files)."""
    entries = asyncio.run(memory.list(ALL))
    return [ExportedEntry(e.id, e.text) for e in reversed(entries)]


def _entry_lines(entry: ExportedEntry) -> list[str]:
    if entry.hand_written:
        lines = hand_lines(entry.text)
        if lines is not None:
            return lines
        return render_entry("m-" + entry.id[2:], entry.text)
    return render_entry(export_id(entry.id), entry.text, entry.fields)


def render_markdown(scope_id: str, entries: list[ExportedEntry]) -> str:
    """The markdown export of ``scope_id`` (see the module docstring)."""
    lines = [f"# Memories of {scope_id}"]
    if not entries:
        lines += ["", "<!-- no memories -->"]
    file: str | None = None
    section: str | None = None
    for n, entry in enumerate(entries):
        if n == 0 or entry.file != file:
            file, section = entry.file, None
            lines += ["", f"## {file}", ""] if file else [""]
        if entry.section != section:
            section = entry.section
            lines.append(f"<!-- section: {section or ''} -->")
        lines += _entry_lines(entry)
        if entry.note is not None:
            lines.append(entry.note)
    return "\n".join(lines) + "\n"


def entry_json(entry: ExportedEntry) -> dict[str, Any]:
    """The json object of one entry (see the module docstring)."""
    fields = entry.fields
    date = entry_date(entry.file, entry.text) if entry.file is not None else None
    return {
        "id": entry.id,
        "text": entry.text,
        "file": entry.file,
        "section": entry.section,
        "line": entry.line,
        "hand_written": entry.hand_written,
        "marker": render_fields(fields),
        "fields": {
            "category": fields.category,
            "importance": fields.importance,
            "pinned": fields.pinned,
            "type": fields.type,
            "state": fields.state,
            "purge": _day(fields.purge),
            "created": _day(fields.created),
            "updated": _day(fields.updated),
            "extra": list(fields.extra),
        },
        "category": fields.category_or(),
        "importance": fields.importance_or_default,
        "type": fields.type_in(entry.file or ENTRYPOINT),
        "date": _day(date),
        "archived": entry.archived,
        "archive_note": entry.note,
        "expired": fields.soft_deleted,
    }


def _day(day: dt.date | None) -> str | None:
    return day.isoformat() if day else None


def render_json(scope_id: str, backend: str, entries: list[ExportedEntry]) -> str:
    """The json export of ``scope_id`` (see the module docstring)."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    document = {
        "format": FORMAT,
        "version": VERSION,
        "scope": scope_id,
        "backend": backend,
        "exported_at": now.isoformat().replace("+00:00", "Z"),
        "count": len(entries),
        "entries": [entry_json(e) for e in entries],
    }
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def export_scope(memory: MemoryBackend, output: Path | None, fmt: str = "markdown") -> int:
    """Write the export of ``memory`` in ``fmt`` to ``output`` (stdout when None)."""
    if keeps_files(memory):
        backend, entries = "file", file_entries(memory)
    elif in_engine(memory):
        backend, entries = "mem0", mem0_entries(memory)
    else:
        raise MemoryStoreError(f"the memory of {memory.scope_id} cannot be exported")
    if fmt == "json":
        document = render_json(memory.scope_id, backend, entries)
    else:
        document = render_markdown(memory.scope_id, entries)
    if output is None:
        sys.stdout.write(document)
        return 0
    atomic_write(output, document)
    print(f"exported {len(entries)} memories of {memory.scope_id} to {output}")
    return 0


# -- reading an import -------------------------------------------------------------------------


def parse_markdown(document: str) -> list[ExportedEntry]:
    """The entries of a markdown document: an export (files, sections, notes) or any notes."""
    lines = [line.rstrip("\r") for line in document.split("\n")]
    is_export = document.lstrip("\ufeff").startswith("# Memories of ")
    found: list[ExportedEntry] = []
    file: str | None = None
    section: str | None = None
    done = 0
    for entry in parse_entries(document, "import.md"):
        for line in lines[done : entry.start_line - 1]:
            heading = _FILE_HEADING_RE.match(line) if is_export else None
            marked = _SECTION_RE.match(line)
            if heading is not None:
                file, section = heading.group("file"), None
            elif marked is not None:
                section = marked.group("heading") or None
        done = entry.end_line
        after = lines[entry.end_line] if entry.end_line < len(lines) else ""
        note = after if _NOTE_RE.match(after) else None
        text, entry_id = entry.text, entry.id
        if entry.hand_written:
            first, newline, rest = text.partition("\n")
            foreign = _FOREIGN_MARKER_RE.search(first)
            if foreign is not None:
                entry_id = foreign.group("id")
                text = _FOREIGN_MARKER_RE.sub("", first) + newline + rest
            elif file is not None:
                entry_id = hand_id(file, text)
        try:
            text = normalize_text(text)
        except ValueError:
            continue
        found.append(ExportedEntry(entry_id, text, file, section, None, entry.fields, note))
    return found


def import_texts(document: str) -> list[str]:
    """The texts of every entry of a markdown ``document``, in order, each once."""
    return list(dict.fromkeys(e.text for e in parse_markdown(document)))


def parse_json(document: str, name: str) -> list[ExportedEntry]:
    """The entries of a json export; MemoryStoreError naming what is wrong."""
    try:
        data = json.loads(document)
    except ValueError as exc:
        raise MemoryStoreError(f"{name} is not valid json: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise MemoryStoreError(f"{name} is not a mindroom memory export (no format {FORMAT!r})")
    if data.get("version") != VERSION:
        raise MemoryStoreError(f"{name} is export version {data.get('version')!r}, not {VERSION}")
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise MemoryStoreError(f"{name} has no list of entries")
    return [_json_entry(item, n, name) for n, item in enumerate(entries, 1)]


def _json_entry(item: object, n: int, name: str) -> ExportedEntry:
    where = f"entry {n} of {name}"
    if not isinstance(item, dict) or not isinstance(item.get("text"), str):
        raise MemoryStoreError(f"{where} has no text")
    try:
        text = normalize_text(item["text"])
        fields = check_fields(parse_fields(_marker_of(item)))
    except (ValueError, TypeError) as exc:
        raise MemoryStoreError(f"{where}: {exc}") from None
    optional = {key: item.get(key) for key in ("id", "file", "section", "archive_note")}
    for key, value in optional.items():
        if value is not None and not isinstance(value, str):
            raise MemoryStoreError(f"{where}: {key} must be a string or null")
    return ExportedEntry(
        str(optional["id"] or ""),
        text,
        optional["file"],
        optional["section"],
        None,
        fields,
        optional["archive_note"],
    )


def _marker_of(item: dict[str, Any]) -> str:
    """The marker words of a json entry: ``marker``, else built from ``fields``."""
    marker = item.get("marker")
    if isinstance(marker, str):
        return marker
    fields = item.get("fields") or {}
    if not isinstance(fields, dict):
        raise TypeError("fields must be an object")
    words = [f"{k}={v}" for k, v in fields.items() if k not in ("pinned", "extra") and v]
    words += ["pinned"] if fields.get("pinned") else []
    return " ".join(words + [str(w) for w in fields.get("extra") or []])


def read_import(source: Path) -> list[ExportedEntry]:
    """The entries to import from ``source``; MemoryStoreError when there are none to read."""
    if not source.is_file():
        raise MemoryStoreError(f"cannot import {source}: no such file")
    document = read_text(source, str(source))
    if document.lstrip("\ufeff \t\r\n").startswith("{"):
        entries = parse_json(document, str(source))
    else:
        entries = parse_markdown(document)
    if not entries:
        raise MemoryStoreError(
            f"no memories to import in {source} (it holds no entries: only headings, "
            "comments or blank lines)"
        )
    return entries


# -- import ------------------------------------------------------------------------------------


def import_scope(memory: MemoryBackend, source: Path) -> int:
    """Add the entries of ``source`` not yet in ``memory``; prints how many (and renames, and
    the sensitive ones that wait for consent)."""
    entries = read_import(source)
    held: list[str] = []
    if in_engine(memory):
        texts = list(dict.fromkeys(e.text for e in entries))
        added = len(memory.import_entries(texts, actor=ACTOR, held=held))
        already = len(texts) - added - len(held)
        renamed: list[tuple[str, str]] = []
    elif keeps_files(memory):
        added, already, renamed, held = import_files(memory, entries)
    else:
        raise MemoryStoreError(f"the memory of {memory.scope_id} cannot import")
    print(f"imported {added} memories into {memory.scope_id} ({already} already there)")
    for old, new in renamed:
        print(f"  {old} is taken by a different memory in {memory.scope_id}: imported as {new}")
    if held:
        print(
            f"{len(held)} sensitive memories wait for the consent of the person they are "
            f"about (`mindroom memory proposals`): {', '.join(held)}"
        )
    return 0


def _target_file(memory: FileMemory, entry: ExportedEntry) -> str:
    if entry.file is None:
        return ENTRYPOINT
    if not entry.file.endswith(".md"):
        raise MemoryStoreError(f"cannot import into {entry.file!r}: not a markdown file")
    return confined_path(memory.scope.root, entry.file)[1]


def _held(memory: FileMemory) -> dict[str, tuple[str, EntryFields]]:
    """Every entry id the scope holds (archive included): its text and fields."""
    held: dict[str, tuple[str, EntryFields]] = {}
    for relative, _ in memory_files(memory.scope.root, archive=True):
        for entry in memory.entries_of(relative):
            held.setdefault(entry.id, (entry.text, entry.fields))
    return held


def _kept_id(entry: ExportedEntry) -> str | None:
    """The id ``entry`` keeps: an ``m-`` id; an ``h-`` id in its own file (written by hand
    there, it reads back with that id); None for a foreign (mem0) id or a line of notes."""
    if ENTRY_ID_RE.fullmatch(entry.id):
        return entry.id
    if entry.file is not None and _HAND_ID_RE.fullmatch(entry.id):
        return entry.id
    return None


def import_files(
    memory: FileMemory, entries: Iterable[ExportedEntry]
) -> tuple[int, int, list[tuple[str, str]], list[str]]:
    """Write ``entries`` into their files (see the module docstring): (added, already there,
    [(taken id, the id it was imported as)], [the proposals held back for consent]).

    An import is an operator's write, so the store judges its consent so: a batch holding a
    sensitive fact is refused whole, its held facts filed as proposals, and the rest of the
    batch written again without them."""
    held = _held(memory)
    texts = {text for text, _ in held.values()}
    batches: dict[str, list[tuple[NewEntry, str | None]]] = {}
    targets: dict[str | None, str] = {}
    already = 0
    for entry in entries:
        # every path is checked before anything is written
        relative = targets.get(entry.file) or targets.setdefault(
            entry.file, _target_file(memory, entry)
        )
        keep = _kept_id(entry)
        taken = held.get(keep) if keep else None
        if taken == (entry.text, entry.fields) or (taken is None and entry.text in texts):
            already += 1
            continue
        heading = entry.section if entry.file is not None else None
        item = NewEntry(entry.text, entry.fields, None if taken else keep, heading, entry.note)
        batches.setdefault(relative, []).append((item, keep if taken else None))
    added = 0
    renamed: list[tuple[str, str]] = []
    waiting: list[str] = []
    for relative, batch in batches.items():
        written, batch, held_ids = _add_consented(memory, relative, batch)
        waiting.extend(held_ids)
        added += len(written)
        for (_, old), new in zip(batch, written, strict=False):
            if old is not None:
                renamed.append((old, new.id))
    return added, already, renamed, waiting


def _add_consented(
    memory: FileMemory, relative: str, batch: list[tuple[NewEntry, str | None]]
) -> tuple[list[MemoryEntry], list[tuple[NewEntry, str | None]], list[str]]:
    """Write ``batch`` into ``relative`` as an operator; a batch the store holds back for
    consent is written again without its held texts. (written, the batch written, held ids)."""
    held: list[str] = []
    while batch:
        try:
            written = memory.add_many_sync(
                relative, [item for item, _ in batch], actor=ACTOR, consent=WriteConsent.operator()
            )
        except ConsentPending as pending:
            held.extend(p.id for p in pending.proposals)
            waiting = {p.text for p in pending.proposals}
            kept = [pair for pair in batch if pair[0].text not in waiting]
            if len(kept) == len(batch):  # held for a text not in the batch: never loop
                raise
            batch = kept
            continue
        return written, batch, held
    return [], [], held
