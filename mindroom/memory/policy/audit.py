"""The audit view of the history, and everything stored about one person.

The history (:mod:`mindroom.memory.files.history`) records every write of a scope, with the
operations the store knows. Read as an audit trail they are the spec's events: ``ADD``,
``UPDATE`` (text or fields), ``DELETE`` (also a purge after TTL, and an archive move by
consolidation or a person's resolution), ``MERGE``, ``LINK``, ``TTL`` and ``RESTORE``, each
with its actor, time and metadata. Internal records (``abort`` of a write that did not happen,
``repair`` of a team mirror) are not events.

:func:`person_export` gathers everything mindroom stores about one Matrix user by enumerating
the map of a person's data (:mod:`mindroom.people.data`): every private memory of theirs (file
and mem0; live, expired and archived entries, with their fields, and the audit trail of each),
the shared entries that are theirs, their transcripts and every other store. Nothing is created
or changed: folders that do not exist are not made.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from mindroom.config.schema import Config
from mindroom.errors import MemoryStoreError
from mindroom.memory.files.fields import parse_fields, render_fields
from mindroom.memory.files.history import HistoryRecord
from mindroom.memory.files.markdown import MemoryEntry, render_entry
from mindroom.memory.files.store import FileMemory
from mindroom.memory.private import PRIVATE_DIR, requester_key
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.index import memory_files

EVENTS = {
    "add": "ADD",
    "update": "UPDATE",
    "delete": "DELETE",
    "archive": "DELETE",
    "merge": "MERGE",
    "link": "LINK",
    "ttl": "TTL",
    "restore": "RESTORE",
}


def event(record: HistoryRecord) -> dict[str, Any] | None:
    """``record`` as an audit event (None: an internal record)."""
    name = EVENTS.get(record.op)
    if name is None:
        return None
    return {
        "time": dt.datetime.fromtimestamp(record.time, dt.UTC).isoformat(),
        "event": name,
        "op": record.op,
        "actor": record.actor,
        "memory_id": record.id,
        "path": record.path,
        "old": record.old,
        "new": record.new,
        "meta": record.meta or {},
    }


def events(memory: FileMemory, entry_id: str | None = None) -> list[dict[str, Any]]:
    """The audit trail of ``memory`` (of one entry), oldest first."""
    return [e for e in map(event, memory.history_of(entry_id)) if e is not None]


def entry_data(entry: MemoryEntry) -> dict[str, Any]:
    fields = entry.fields
    return {
        "id": entry.id,
        "text": entry.text,
        "path": entry.path,
        "line": entry.start_line,
        "category": fields.category,
        "importance": fields.importance,
        "pinned": fields.pinned,
        "type": fields.type_in(entry.path),
        "state": fields.state or "active",
        "purge": fields.purge.isoformat() if fields.purge else None,
        "created": fields.created.isoformat() if fields.created else None,
        "updated": fields.updated.isoformat() if fields.updated else None,
        "fields": render_fields(fields),  # as the marker writes them
    }


def every_entry(memory: FileMemory) -> list[MemoryEntry]:
    """Every entry of every file, the archive's too (live, expired, archived)."""
    found: list[MemoryEntry] = []
    for relative, _ in memory_files(memory.scope.root, archive=True):
        try:
            found.extend(memory.entries_of(relative))
        except MemoryStoreError:
            continue  # unreadable: named in the export's "unreadable" list
    return found


def person_export(
    config: Config,
    registry: MemoryRegistry,
    storage: Path,
    user_id: str,
    *,
    for_person: bool = False,
) -> dict[str, Any]:
    """Everything stored about ``user_id``, as plain JSON data: every store of the map of a
    person's data (:mod:`mindroom.people.data`) under ``stores``, and the person's memories
    read from it under the keys earlier exports had (``private_memory``, the file and mem0
    private scopes; ``shared_memory_mentions``; ``other_stores``, the database files of their
    private folder). ``for_person``: the person's own download (``/me``), whose shared part
    holds only what their direct chat could show them; else an admin's, with everything."""
    from mindroom.people.data import export_person

    data = export_person(config, storage, registry, user_id, for_person=for_person)
    stores = data["stores"]
    folder = stores["private_folder"]["data"]
    private = list(folder["memories"])
    for scope in stores["mem0_private"]["data"]:
        private.append(
            {
                "scope": scope["scope"],
                "agent": None,
                "folder": None,
                "entries": [
                    {"id": e["id"], "text": e["text"], "path": "mem0"} for e in scope["entries"]
                ],
                "history": [],  # mem0's own change records: under stores.mem0_private
            }
        )
    shared = [
        {"scope": s["scope"], "entries": s["entries"]}
        for s in stores["shared_memory"]["data"]
        if s["entries"]
    ]
    home = storage / PRIVATE_DIR / requester_key(user_id)
    other = sorted(
        str(home / name)
        for name in folder["files"]
        if name.endswith(".db") and "memory" not in Path(name).parts
    )
    return {
        "user_id": user_id,
        "exported_at": data["exported_at"],
        "private_memory": private,
        "shared_memory_mentions": shared,
        "other_stores": other,
        "stores": stores,
    }


def export_markdown(data: dict[str, Any]) -> str:
    """A person's export as one markdown file (entries in mindroom's own format)."""
    lines = [f"# Everything mindroom stores about {data['user_id']}", ""]
    sections = [
        ("Private memory", data["private_memory"]),
        ("Shared memory that names them", data["shared_memory_mentions"]),
    ]
    for title, scopes in sections:
        lines += [f"## {title}", ""]
        if not scopes:
            lines += ["(none)", ""]
        for scope in scopes:
            lines += [f"### {scope['scope']}", ""]
            for entry in scope["entries"]:
                lines += _markdown_entry(entry)
            for change in scope.get("history", []):
                lines.append(
                    f"- {change['time']} {change['event']} {change['memory_id']} "
                    f"by {change['actor']}"
                )
            lines.append("")
    lines += ["## Other files holding their data", ""]
    lines += [f"- {path}" for path in data["other_stores"]] or ["(none)"]
    lines += ["", "## Every store of the map, in full", ""]
    for name, store in data.get("stores", {}).items():
        lines += [f"### {name}: {store['what']}", ""]
        lines += [f"- {where}" for where in store["where"]] or ["(nothing of theirs)"]
        lines += ["", "```json", json.dumps(store["data"], ensure_ascii=False, indent=1), "```", ""]
    return "\n".join(lines) + "\n"


def _markdown_entry(entry: dict[str, Any]) -> list[str]:
    """An entry's lines as mindroom writes them, fields in the marker (a hand-written one as a
    plain bullet)."""
    if entry["id"].startswith("m-"):
        return render_entry(entry["id"], entry["text"], parse_fields(entry["fields"]))
    first, *rest = entry["text"].split("\n")
    return [f"- {first}", *("  " + line for line in rest)]
