"""``mindroom memory export`` / ``import``: a scope's memories as one markdown file, both ways.

So switching an agent between backends never loses memory: export from one, change
``memory_backend``, import into the other (and diff the texts of two exports to check).

The export is a memory file in mindroom's own entry format (see :mod:`mindroom.memory.markdown`):
a ``# Memories of <scope>`` heading, for the file backend a ``## <file>`` heading per memory
file, and every entry as ``- text <!-- m-xxxxxxxx -->`` with its continuation lines. That
format reads back exactly (any text, several lines, markdown inside), so an entry's text
survives the trip unchanged. Ids are kept where they are mindroom ids; a hand-written entry's
``h-`` id and a mem0 id become an ``m-`` id derived from them (the import ignores ids: the
receiving backend gives its own).

The import reads any markdown memory file (an export, a ``MEMORY.md``, hand-written notes):
every entry in it, in order, each text once. It refuses before writing anything when the file
is missing, not UTF-8, or holds no entry. Texts already in the scope are skipped; the rest go
through the backend's normal write path: the file backend appends them to ``MEMORY.md`` with
history actor ``import``, mem0 stores them verbatim (no model call).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys
from pathlib import Path

from mindroom.atomic import atomic_write
from mindroom.errors import MemoryStoreError
from mindroom.memory.consent import ConsentPending, WriteConsent
from mindroom.memory.files import read_text
from mindroom.memory.index import memory_files
from mindroom.memory.markdown import ENTRY_ID_RE, normalize_text, parse_entries, render_entry
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.scope import ENTRYPOINT, confined_path
from mindroom.memory.store import FileMemory

ACTOR = "import"
ALL = sys.maxsize  # "every memory" for a backend's list
# a foreign id marker at the end of an entry's first line (mem0's uuid ids), not part of the text
_FOREIGN_MARKER_RE = re.compile(
    r" <!-- [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12} -->[ \t]*$", re.MULTILINE
)

Group = tuple[str | None, list[tuple[str, str]]]  # (heading, [(entry id, text)])


def export_id(entry_id: str) -> str:
    """A mindroom entry id for ``entry_id``: itself if it is one, else derived from it."""
    if ENTRY_ID_RE.fullmatch(entry_id):
        return entry_id
    if re.fullmatch(r"h-[0-9a-f]{8}", entry_id):
        return "m-" + entry_id[2:]
    digits = entry_id.replace("-", "").lower()
    if re.fullmatch(r"[0-9a-f]{8,}", digits):
        return "m-" + digits[:8]
    return "m-" + hashlib.sha256(entry_id.encode()).hexdigest()[:8]


def render_export(scope_id: str, groups: list[Group]) -> str:
    """The export document of ``scope_id``: its heading, then each group's entries."""
    lines = [f"# Memories of {scope_id}"]
    if not any(entries for _, entries in groups):
        lines += ["", "<!-- no memories -->"]
    for heading, entries in groups:
        if not entries:
            continue
        lines += ["", f"## {heading}", ""] if heading else [""]
        for entry_id, text in entries:
            lines += render_entry(export_id(entry_id), text)
    return "\n".join(lines) + "\n"


def import_texts(document: str) -> list[str]:
    """The texts of every entry of ``document``, in order, each once (a mem0-style id marker
    ending an entry's first line is dropped: it is an id, not text)."""
    texts: list[str] = []
    seen: set[str] = set()
    for entry in parse_entries(document, "import.md"):
        text = entry.text
        if entry.hand_written:
            first, newline, rest = text.partition("\n")
            text = _FOREIGN_MARKER_RE.sub("", first) + newline + rest
        try:
            text = normalize_text(text)
        except ValueError:
            continue
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return texts


def read_import(source: Path) -> list[str]:
    """The texts to import from ``source``; MemoryStoreError when there are none to read."""
    if not source.is_file():
        raise MemoryStoreError(f"cannot import {source}: no such file")
    texts = import_texts(read_text(source, str(source)))
    if not texts:
        raise MemoryStoreError(
            f"no memories to import in {source} (it holds no entries: only headings, "
            "comments or blank lines)"
        )
    return texts


def file_groups(memory: FileMemory) -> list[Group]:
    """Every entry of every memory file, ``MEMORY.md`` first; raises for an unreadable file
    (an export that silently left one out would lose it on the way to another backend)."""
    files = [relative for relative, _ in memory_files(memory.scope.root)]
    ordered = [f for f in files if f == ENTRYPOINT] + [f for f in files if f != ENTRYPOINT]
    groups: list[Group] = []
    for relative in ordered:
        path, relative = confined_path(memory.scope.root, relative)
        entries = parse_entries(read_text(path, relative), relative)
        groups.append((relative, [(e.id, e.text) for e in entries]))
    return groups


def mem0_groups(memory: Mem0Memory) -> list[Group]:
    """The scope's mem0 memories, oldest first, as one group."""
    entries = asyncio.run(memory.list(ALL))
    return [(None, [(e.id, e.text) for e in reversed(entries)])]


def export_scope(memory: FileMemory | Mem0Memory, output: Path | None) -> int:
    """Write the export of ``memory`` to ``output`` (stdout when None)."""
    groups = mem0_groups(memory) if isinstance(memory, Mem0Memory) else file_groups(memory)
    document = render_export(memory.scope_id, groups)
    if output is None:
        sys.stdout.write(document)
        return 0
    count = sum(len(entries) for _, entries in groups)
    atomic_write(output, document)
    print(f"exported {count} memories of {memory.scope_id} to {output}")
    return 0


def import_scope(memory: FileMemory | Mem0Memory, source: Path) -> int:
    """Add the texts of ``source`` not yet in ``memory``; prints how many."""
    texts = read_import(source)
    held: list[str] = []
    if isinstance(memory, Mem0Memory):
        added = len(memory.import_entries(texts, actor=ACTOR))
    else:
        added, held = _import_files(memory, texts)
    there = len(texts) - added - len(held)
    print(f"imported {added} memories into {memory.scope_id} ({there} already there)")
    if held:
        print(
            f"{len(held)} sensitive memories wait for the consent of the person they are "
            f"about (`mindroom memory proposals`): {', '.join(held)}"
        )
    return 0


def _import_files(memory: FileMemory, texts: list[str]) -> tuple[int, list[str]]:
    """Append each new text to ``MEMORY.md`` through the normal write path (history: import);
    how many were added, and the proposals of those held back for consent (an import is an
    operator's write: the store judges it so)."""
    present = {e.text for e in memory.list_sync(ALL)}
    added = 0
    held: list[str] = []
    for text in texts:
        if text in present:
            continue
        try:
            written = memory.append_unique_sync(
                text, actor=ACTOR, path=ENTRYPOINT, consent=WriteConsent.operator()
            )
        except ConsentPending as pending:
            held.extend(p.id for p in pending.proposals)
            continue
        if written is not None:
            added += 1
    return added, held
