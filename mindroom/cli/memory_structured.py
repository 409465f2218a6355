"""The structured side of ``mindroom memory``: fields on ``add``, and ``set``.

Thin, like :mod:`mindroom.cli.memory` (which registers these actions beside its own): every
action goes through the agent's view (:class:`mindroom.memory.policy.view.AgentView`), so
``--agent``
and ``--team`` apply that allowlist (``memory.allowlists``) exactly as the agent's own tools do.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import click

from mindroom.app.runlock import running
from mindroom.atomic import atomic_write
from mindroom.cli.options import Args, switch
from mindroom.config import Config
from mindroom.errors import ConfigError, MemoryStoreError
from mindroom.memory.backend import MemoryBackend, keeps_files
from mindroom.memory.files.fields import NO_FIELDS, EntryFields, check_fields, render_fields
from mindroom.memory.files.restore import set_fields_sync
from mindroom.memory.files.store import FileMemory
from mindroom.memory.ops_events import EventLog
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.audience import AudienceBook, chosen, describe
from mindroom.memory.policy.audit import export_markdown, person_export
from mindroom.memory.policy.consent import ConsentQueue
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.people.data import StoreReport, forget_person

STRUCTURED_ACTIONS = frozenset({"set", "audiences", "proposals", "confirm", "reject", "stats"})


def field_params() -> list[click.Parameter]:
    """``--category``, ``--importance`` and ``--pin`` (the fields of a new entry)."""
    return [
        click.Option(["--category"], help="its category (memory.categories; default general)"),
        click.Option(["--importance"], type=click.IntRange(1, 5), metavar="1-5"),
        click.Option(["--pin"], is_flag=True, help="never let it expire"),
    ]


def add_structured_commands(action: Callable[..., click.Command]) -> None:
    """Register ``set``, ``audiences``, ``proposals``, ``confirm``, ``reject`` and ``stats`` through
    :mod:`mindroom.cli.memory`'s ``action`` (which adds ``--agent``/``--team``)."""
    action(
        "set",
        "change a memory's fields (category, importance, pinned)",
        click.Argument(["id"]),
        click.Option(["--category"], help="new category (memory.categories)"),
        click.Option(["--importance"], type=click.IntRange(1, 5), metavar="1-5"),
        *switch("--pin", "--unpin", "pin", "never let it expire / let it expire again"),
        click.Option(
            ["--audience"],
            metavar="WHO",
            help="where it may be recalled: public, dm:@person:server, a room:<key> of "
            "`memory audiences`, or default (the scope's)",
        ),
    )
    action("audiences", "list the closed rooms this memory's entries were learned in")
    action("proposals", "list changes waiting for a person's consent (or a second signal)")
    action("confirm", "confirm a proposed change: it is written", click.Argument(["proposal"]))
    action("reject", "reject a proposed change: nothing is written", click.Argument(["proposal"]))
    action(
        "stats",
        "count what memory did, by node and operation",
        click.Option(["--days"], type=float, default=7, help="how far back (default 7)"),
    )


def cli_access(args: Args, config: Config) -> CategoryAccess:
    """The allowlist of the agent (or team) an action names."""
    team = getattr(args, "team", None)
    if team:
        return CategoryAccess.of_team(config, team, config.teams[team].agents)
    return CategoryAccess.of(config, args.agent)


def fields_of(args: Args) -> EntryFields:
    """The fields ``add`` was given (a MemoryStoreError names a bad one)."""
    try:
        return check_fields(
            EntryFields(category=args.category, importance=args.importance, pinned=args.pin)
        )
    except ValueError as exc:
        raise MemoryStoreError(str(exc)) from None


def run_structured(args: Args, view: AgentView) -> int:
    """Carry out a structured action; prints the result."""
    memory = view.memory
    if args.action in ("proposals", "confirm", "reject"):  # proposals of either backend
        return _consent(args, memory)
    if not keeps_files(memory):
        raise MemoryStoreError(f"`{args.action}` is for file memory; this one uses mem0")
    if args.action == "stats":
        return _stats(memory, args.days)
    book = AudienceBook(memory.scope.state_dir)
    if args.action == "audiences":
        return _audiences(book)
    return _set(args, view, memory, book)


def _set(args: Args, view: AgentView, memory: FileMemory, book: AudienceBook) -> int:
    """``memory set ID``: the fields given, checked, written; nothing when one is bad."""
    entry = view.get_sync(args.id)
    changes: dict[str, object] = {}
    if args.category is not None:
        changes["category"] = view.access.writable(args.category)
    if args.importance is not None:
        changes["importance"] = args.importance
    if args.pin is not None:
        changes["pinned"] = args.pin
    if args.audience is not None:
        try:
            changes["audience"] = chosen(args.audience, book, args.user)
        except ValueError as exc:
            raise MemoryStoreError(str(exc)) from None
    if not changes:
        raise MemoryStoreError(
            "nothing to change: give --category, --importance, --pin, --unpin or --audience"
        )
    try:
        fields = check_fields(replace(entry.fields, **changes))  # type: ignore[arg-type]
    except ValueError as exc:
        raise MemoryStoreError(str(exc)) from None
    done = set_fields_sync(memory, entry.id, fields, actor="cli")
    words = render_fields(done.fields) if done.fields != NO_FIELDS else "(no fields)"
    print(f"{done.id}  {done.path}:{done.start_line}  {words}")
    if "audience" in changes:
        print(f"  {describe(done.fields.audience, book, args.user)}")
    return 0


def _audiences(book: AudienceBook) -> int:
    """The closed rooms recorded in the scope's ``audiences.json``: key, kind, room, name and
    the readers it had."""
    rooms = book.rooms()
    for key, told in sorted(rooms.items()):
        readers = ", ".join(sorted(told.readers)) or "(nobody)"
        print(
            f"{key}  {told.kind:<9} {told.room_id or '-'}  {told.name or '-'}  readers: {readers}"
        )
    if not rooms:
        print(f"no rooms recorded (in {book.path})")
    return 0


def _person(args: Args) -> str:
    user = args.user
    if not user or not user.startswith("@") or ":" not in user:
        raise ConfigError(f"--user {user!r} is not a Matrix ID like @alice:example.org")
    if args.agent or getattr(args, "team", None):
        raise ConfigError(f"memory {args.action} --user is about one person: drop --agent/--team")
    return str(user)


def run_person_export(args: Args, config: Config, storage: Path, config_dir: Path) -> int:
    """``memory export --user MXID``: everything stored about one person, as markdown or
    JSON: every store of the map (:mod:`mindroom.people.data`)."""
    user = _person(args)
    registry = MemoryRegistry(config, storage, config_dir)
    try:
        data = person_export(config, registry, storage, user)
    finally:
        registry.close()
    text = (
        json.dumps(data, ensure_ascii=False, indent=2) + "\n"
        if args.format == "json"
        else export_markdown(data)
    )
    if args.output is None:
        sys.stdout.write(text)
    else:
        atomic_write(args.output, text)
        count = sum(len(s["entries"]) for s in data["private_memory"])
        print(f"wrote everything about {user} to {args.output} ({count} private entries)")
    return 0


def run_person_forget(args: Args, config: Config, storage: Path, config_dir: Path) -> int:
    """``memory forget --user MXID``: erase the person's part of every store of the map, after
    a confirmation (``--yes`` skips it; without a terminal it is required)."""
    user = _person(args)
    holder = running(storage / "mindroom_data")
    if holder is not None:
        raise MemoryStoreError(
            f"forget refused while mindroom runs for {storage} ({holder.describe()}): the "
            "running bot holds the stores open and could write them again. Stop mindroom "
            "first, or let the person use the forget button on their /me page."
        )
    if not args.yes:
        if not sys.stdin.isatty():
            raise ConfigError(
                f"memory forget --user {user}: no terminal to confirm on; add --yes to erase "
                "everything about this person without asking"
            )
        answer = input(
            f"Erase everything mindroom stores about {user}? This cannot be undone. Type 'yes': "
        )
        if answer.strip().lower() != "yes":
            print("nothing erased")
            return 1
    registry = MemoryRegistry(config, storage, config_dir)
    try:
        reports = _forget_alone(config, storage, registry, user)
    finally:
        registry.close()
    for report in reports:
        print(f"{report.store:<20} {report.count:>6} erased")
    print(f"forgot {user}: {sum(r.count for r in reports)} items in {len(reports)} stores")
    return 0


def _forget_alone(
    config: Config, storage: Path, registry: MemoryRegistry, user: str
) -> list[StoreReport]:
    """:func:`forget_person`; with ``storage.database``, once every mindroom process on it (on
    any machine) holds still (:mod:`mindroom.cluster.erasure`)."""
    erase = functools.partial(forget_person, config, storage, registry, user)
    if config.storage.database is None:
        return erase()
    from mindroom.cluster.erasure import run_alone

    print("waiting for the mindroom processes on storage.database to hold still", file=sys.stderr)
    return run_alone(config.storage.database, erase)


def _consent(args: Args, memory: MemoryBackend) -> int:
    queue = ConsentQueue(memory)
    try:
        if args.action == "proposals":
            pending = queue.pending()
            for p in pending:
                until = dt.datetime.fromtimestamp(p.expires).strftime("%Y-%m-%d")
                who = p.user_id or "(nobody named)"
                print(f"{p.id}  {p.kind:<9} {p.field:<14} {who}  until {until}  {p.text}")
            if not pending:
                print("no proposals waiting")
            return 0
        confirm = args.action == "confirm"
        proposal, entry = queue.decide(args.proposal, confirm=confirm, actor="cli", user_id=None)
    finally:
        queue.close()
    if entry is not None:
        where = f"{entry.path}:{entry.start_line}"
        print(f"confirmed {proposal.id}: wrote {entry.id}  {where}  {entry.text}")
    else:
        print(f"rejected {proposal.id}: nothing written")
    return 0


def _stats(memory: FileMemory, days: float) -> int:
    since = time.time() - days * 86400
    log = EventLog(memory)
    try:
        rows = log.counts(since)
    finally:
        log.close()
    by_key: dict[tuple[str, str], dict[str, int]] = {}
    for node, op, status, count in rows:
        by_key.setdefault((node, op), {})[status] = count
    print(f"{'node':<9} {'op':<8} {'ok':>6} {'skipped':>8} {'error':>6}   (last {days:g} days)")
    for (node, op), counts in sorted(by_key.items()):
        print(
            f"{node:<9} {op:<8} {counts.get('ok', 0):>6} {counts.get('skipped', 0):>8} "
            f"{counts.get('error', 0):>6}"
        )
    if not by_key:
        print("(no events yet)")
    return 0
