"""``mindroom memory ...``: work directly on an agent's memory, on either backend.

Thin: resolves the scope from the config and prints what the memory returns. Every write
is recorded in the scope's history with actor ``cli``. On a mem0 agent the ids are mem0's and
``history`` shows mem0's change records; ``restore``, ``reindex``, ``conflicts`` and
``resolve`` belong to the file backend (its history, its archive, its indexes over files and
what consolidation records beside them) and are refused there with what to do instead.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import click

from mindroom.app.runlock import running
from mindroom.cli.memory_recall import add_recall_command
from mindroom.cli.memory_structured import (
    STRUCTURED_ACTIONS,
    add_structured_commands,
    cli_access,
    field_params,
    fields_of,
    run_person_export,
    run_person_forget,
    run_structured,
)
from mindroom.cli.memory_transfer import export_scope, import_scope
from mindroom.cli.options import Args, Invocation, invocation, storage_params, with_storage
from mindroom.config import Config, load_config
from mindroom.errors import ConfigError, EmbedderError, MemoryStoreError
from mindroom.memory.backend import MemoryBackend, in_engine, keeps_files
from mindroom.memory.files.fields import NO_FIELDS, render_fields
from mindroom.memory.files.store import FileMemory
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.policy.audit import events
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry


@click.group("memory", help="read and edit an agent's memory")
def group() -> None:
    """``mindroom memory``."""


def _action(
    name: str, help_text: str, *params: click.Parameter, whose_required: bool = True
) -> click.Command:
    """A ``mindroom memory`` action on the memory ``--agent`` or ``--team`` (and ``--user``)
    names, carried out by :func:`run_memory`."""

    def callback(agent: str | None, team: str | None, **_: object) -> Invocation:
        if agent and team:
            raise click.UsageError("--agent and --team each name one memory: give one of them")
        if whose_required and not (agent or team):
            raise click.UsageError("one of the options --agent NAME or --team NAME is required")
        return invocation(run_memory)

    whose = [
        click.Option(["--agent"], help="agent name"),
        click.Option(["--team"], help="team name (its shared memory)"),
        click.Option(["--user"], help="Matrix ID, for a private companion's memory"),
    ]
    command = click.Command(
        name, callback=callback, params=[*params, *whose, *storage_params()], help=help_text
    )
    group.add_command(command)
    return command


def _memory_id() -> click.Argument:
    return click.Argument(["id"])


_action("list", "list memories", click.Option(["--limit"], type=int, default=50))
_action(
    "search",
    "search memories",
    click.Argument(["query"]),
    click.Option(["--limit"], type=int, default=10),
)
_action(
    "add",
    "add a memory",
    click.Argument(["text"]),
    click.Option(["--file"], help="memory file (default MEMORY.md)"),
    *field_params(),
)
add_structured_commands(_action)
_action("get", "show one memory", _memory_id())
_action(
    "history",
    "show the history (of one memory)",
    click.Argument(["id"], required=False),
    click.Option(["--json"], is_flag=True, help="as audit events (ADD, UPDATE...)"),
)
_action("restore", "bring back a deleted or archived memory", _memory_id())
_action(
    "conflicts",
    "list contradictions and proposed merges consolidation recorded",
    click.Option(["--all"], is_flag=True, help="settled ones too"),
)
_action(
    "resolve",
    "settle a recorded conflict or proposed merge\n\n"
    "CONFLICT: its id (c-...), from `mindroom memory conflicts`",
    click.Argument(["conflict"]),
    click.Option(["--keep"], metavar="ID", help="keep this entry, archive the other"),
    click.Option(["--keep-both"], is_flag=True, help="keep both as they are"),
    click.Option(["--edit"], metavar="TEXT", help="new text for the kept entry"),
    click.Option(["--accept"], is_flag=True, help="apply a proposed merge"),
)
_action("reindex", "rebuild the search indexes (keywords, vectors) from the files")
_action(
    "export",
    "write every memory with its id, fields and file (--user alone: everything about that person)",
    click.Option(
        ["--output"],
        type=click.Path(path_type=Path),
        help="file to write (default: standard output)",
    ),
    click.Option(
        ["--format"],
        type=click.Choice(["markdown", "json"]),
        default="markdown",
        help="markdown (default; reads back with import) or json (also reads back)",
    ),
    whose_required=False,
)
_action(
    "import",
    "add the entries of an export (markdown or json) or any markdown file, with their "
    "ids, fields and files (skipping what is already there)\n\n"
    "FILE: an export (markdown or json), or notes in markdown",
    click.Argument(["file"], type=click.Path(path_type=Path)),
)
_action("delete", "delete one memory (the history keeps it: restore brings it back)", _memory_id())
_action(
    "forget",
    "erase everything about one person (--user) from every store mindroom keeps",
    click.Option(["--yes"], is_flag=True, help="do not ask for confirmation"),
    whose_required=False,
)


@with_storage
@group.command("flush", help="run one memory flush cycle now")
@click.option("--agent", help="only this agent's (or team's) sessions")
def flush(**_: object) -> Invocation:
    """``mindroom memory flush``."""
    return invocation(run_flush)


@with_storage
@group.command("flush-status", help="show the memory flush state")
def flush_status(**_: object) -> Invocation:
    """``mindroom memory flush-status``."""
    return invocation(run_flush_status)


def _storage(args: Args) -> tuple[Path, Path]:
    config_path = Path(args.config).resolve()
    return config_path, Path(args.storage).resolve() if args.storage else config_path.parent


async def run_flush(args: Args) -> int:
    """``mindroom memory flush``: one cycle now, ignoring idle times; prints what it wrote."""
    from mindroom.adapters.agno.runner import AgentRuntime
    from mindroom.memory.flush.loop import FlushWorker
    from mindroom.memory.flush.state import extracted_by_mem0

    config_path, storage = _storage(args)
    config = load_config(config_path)
    registry = MemoryRegistry(config, storage, config_path.parent)
    runtime = AgentRuntime(config, storage / "mindroom_data", registry)
    worker = FlushWorker(config, runtime, registry, storage / "mindroom_data")
    try:
        # the same ledger table as a running bot: sessions it is extracting now are left to it,
        # and so are its mem0 sessions (mem0's local store takes one process's writes)
        bot = running(storage / "mindroom_data")
        results = await worker.cycle(force=True, agent=args.agent, leave_mem0=bot is not None)
        pending = await worker.entries(args.agent)
        left = [e for e in pending if e.dirty and extracted_by_mem0(config, e)] if bot else []
    finally:
        await worker.aclose()
        await runtime.close()
        registry.close()
    for result in results:
        entry = result.entry
        who = f" for {entry.requester}" if entry.requester else ""
        if result.error:
            print(f"{entry.agent} {entry.session_id}{who}: failed: {result.error}")
            continue
        print(
            f"{entry.agent} {entry.session_id}{who}: {result.messages} messages, "
            f"{len(result.written)} new facts"
        )
        for fact in result.written:
            print(f"  + {fact}")
    busy = [e for e in pending if e.in_flight]
    if busy:
        print(f"{len(busy)} sessions are being flushed by another process (the running bot)")
    if left:
        print(f"{len(left)} mem0 sessions are left to the running bot (it extracts them itself)")
    if not results and not busy and not left:
        print("nothing to flush")
    return 0


async def run_flush_status(args: Args) -> int:
    """``mindroom memory flush-status``: the flush table of the ledger."""
    from mindroom.memory.flush.loop import read_flush_state

    config_path, storage = _storage(args)
    database = load_config(config_path).storage.database if config_path.is_file() else None
    entries = await read_flush_state(storage / "mindroom_data", database)
    entries.sort(key=lambda e: (e.agent, e.session_id, e.requester or ""))
    print(f"{'agent':<14} {'dirty':<6} {'cursor':>6} {'fail':>4}  {'next try':<19} session")
    for e in entries:
        when = (
            dt.datetime.fromtimestamp(e.next_attempt_at).strftime("%Y-%m-%d %H:%M:%S")
            if e.next_attempt_at
            else "-"
        )
        flags = ("yes" if e.dirty else "no") + ("*" if e.in_flight else "")
        who = f" for {e.requester}" if e.requester else ""
        print(
            f"{e.agent:<14} {flags:<6} {e.cursor:>6} {e.failures:>4}  {when:<19} "
            f"{e.session_id}{who}"
        )
    print(f"({len(entries)} sessions; * = in flight)")
    return 0


def _target(args: Args) -> str:
    """The options naming the memory an action works on (for messages)."""
    user = f" --user {args.user}" if args.user else ""
    team = getattr(args, "team", None)
    return (f"--team {team}" if team else f"--agent {args.agent}") + user


def _whose(args: Args) -> str:
    """The memory an action works on, in words: ``agent 'general'`` or ``team 'crew'``."""
    team = getattr(args, "team", None)
    return f"team {team!r}" if team else f"agent {args.agent!r}"


def _open_team(
    args: Args, config: Config, storage: Path, config_path: Path
) -> tuple[MemoryBackend, MemoryRegistry]:
    if args.team not in config.teams:
        known = ", ".join(config.teams) or "none"
        raise ConfigError(f"no team {args.team!r} in {config_path} (teams: {known})")
    members = config.teams[args.team].agents
    private = any(config.agents[m].private is not None for m in members)
    if private and not args.user:
        raise ConfigError(
            f"team {args.team!r} has a private companion, so its memory is kept per person: "
            "name whose with --user @name:server"
        )
    if args.user and not private:
        raise ConfigError(f"team {args.team!r} has one memory for everyone; drop --user")
    registry = MemoryRegistry(config, storage, config_path.parent)
    memory = registry.for_team(members, args.user)
    if memory is None:
        registry.close()
        raise ConfigError(f"team {args.team!r} has memory backend 'none'")
    return memory, registry


def _open(args: Args, config: Config | None = None) -> tuple[MemoryBackend, MemoryRegistry]:
    """The memory ``args`` name and its registry (``config``: the config file, when the
    caller has read it already)."""
    config_path = Path(args.config).resolve()
    storage = Path(args.storage).resolve() if args.storage else config_path.parent
    config = config or load_config(config_path)
    if args.user and (not args.user.startswith("@") or ":" not in args.user):
        raise ConfigError(f"--user {args.user!r} is not a Matrix ID like @alice:example.org")
    if getattr(args, "team", None):
        return _open_team(args, config, storage, config_path)
    if args.agent not in config.agents:
        known = ", ".join(config.agents) or "none"
        raise ConfigError(f"no agent {args.agent!r} in {config_path} (agents: {known})")
    private = config.agents[args.agent].private is not None
    if args.user and not private:
        raise ConfigError(f"agent {args.agent!r} is not a private companion; drop --user")
    if private and not args.user:
        raise ConfigError(
            f"agent {args.agent!r} is a private companion with a memory per person: "
            "name whose with --user @name:server"
        )
    registry = MemoryRegistry(config, storage, config_path.parent)
    memory = registry.for_agent(args.agent, args.user)
    if memory is None:
        raise ConfigError(f"agent {args.agent!r} has memory backend 'none'")
    return memory, registry


def _refuse_while_running(args: Args, data_dir: Path) -> None:
    """A mem0 write from here while the bot runs is refused: mem0's local store (Chroma) takes
    writes from one process only; one from the CLI left the running bot's mem0 searches failing
    ("Error finding id") until its own next write. Reads from here are harmless."""
    holder = running(data_dir)
    if holder is not None:
        raise MemoryStoreError(
            f"{args.action} refused while mindroom runs for {data_dir.parent} "
            f"({holder.describe()}): {_whose(args)} uses mem0, whose local store takes "
            "writes from one process only, and a write from here would break the running "
            "bot's memory search. Stop mindroom first, or ask the agent to remember it "
            "(its add_memory tool)."
        )


def _line(entry_id: str, path: str, line: int, text: str) -> str:
    first, *rest = text.splitlines() or [""]
    more = f" (+{len(rest)} lines)" if rest else ""
    return f"{entry_id}  {path}:{line}  {first}{more}"


def run_memory(args: Args) -> int:
    """Carry out one ``mindroom memory`` action; prints results, returns the exit code."""
    if args.action == "export" and not args.agent and not getattr(args, "team", None):
        if not args.user:
            raise ConfigError(
                "memory export: name --agent, --team, or --user (everything about one person)"
            )
        config_path, storage = _storage(args)
        return run_person_export(args, load_config(config_path), storage, config_path.parent)
    if args.action == "forget":
        config_path, storage = _storage(args)
        return run_person_forget(args, load_config(config_path), storage, config_path.parent)
    memory, registry = _open(args)
    try:
        if in_engine(memory) and args.action in ("add", "import", "delete", "confirm"):
            _refuse_while_running(args, registry.storage / "mindroom_data")
        return _act(args, memory, registry.config)
    except MemoryStoreError as exc:
        print(f"mindroom memory: {exc}")
        return 1
    finally:
        registry.close()


def _act(args: Args, memory: MemoryBackend, config: Config) -> int:
    if args.action == "export":
        return export_scope(memory, args.output, args.format)
    if args.action == "import":
        return import_scope(memory, args.file)
    view = AgentView(memory, cli_access(args, config))  # --agent/--team: its allowlist
    if args.action in STRUCTURED_ACTIONS:
        return run_structured(args, view)
    if in_engine(memory) and args.action == "delete":
        e = view.delete_sync(args.id.strip(), actor="cli")
        print(f"deleted {_mem0_line(e.id, e.text)}")
        return 0
    if in_engine(memory):
        return _act_mem0(args, memory)
    if not keeps_files(memory):
        raise MemoryStoreError(f"{args.action} is not offered by the memory of {_whose(args)}")
    act = _FILE_ACTIONS.get(args.action)
    return 0 if act is None else act(args, memory, view)


def _list(args: Args, memory: FileMemory, view: AgentView) -> int:
    entries = view.list_sync(args.limit)
    for e in entries:
        print(_line(e.id, e.path, e.start_line, e.text))
    print(f"({len(entries)} memories in {memory.scope.root})")
    return 0


def _search(args: Args, memory: FileMemory, view: AgentView) -> int:
    hits = memory.index.search(args.query, args.limit, where=view.reading().where())
    for hit in hits:
        e = hit.entry
        print(f"{hit.score:.3g}  {_line(e.id, e.path, e.start_line, e.text)}")
    if not hits:
        print(f"no memories match {args.query!r}")
    return 0


def _add(args: Args, _memory: FileMemory, view: AgentView) -> int:
    e = view.add_sync(args.text, actor="cli", path=args.file, fields=fields_of(args))
    print(f"added {_line(e.id, e.path, e.start_line, e.text)}")
    return 0


def _get(args: Args, _memory: FileMemory, view: AgentView) -> int:
    e = view.get_sync(args.id)
    words = f"  {render_fields(e.fields)}" if e.fields != NO_FIELDS else ""
    print(f"{e.id}  {e.path}:{e.start_line}-{e.end_line}{words}\n{e.text}")
    return 0


def _history(args: Args, memory: FileMemory, _view: AgentView) -> int:
    if args.json:
        print(json.dumps(events(memory, args.id), ensure_ascii=False, indent=2))
        return 0
    records = memory.history_of(args.id)
    for r in records:
        when = dt.datetime.fromtimestamp(r.time).strftime("%Y-%m-%d %H:%M:%S")
        change = f"{r.old!r} -> {r.new!r}" if r.op == "update" else repr(r.new or r.old)
        print(f"{when}  {r.actor:<6} {r.op:<8} {r.id}  {r.path}  {change}")
    if not records:
        print("no history yet")
    return 0


def _delete(args: Args, _memory: FileMemory, view: AgentView) -> int:
    e = view.delete_sync(args.id.strip(), actor="cli")
    print(f"deleted {_line(e.id, e.path, e.start_line, e.text)}")
    print(f"(bring it back with: mindroom memory restore {_target(args)} {e.id})")
    return 0


def _restore(args: Args, memory: FileMemory, _view: AgentView) -> int:
    e = memory.restore_sync(args.id, actor="cli")
    print(f"restored {_line(e.id, e.path, e.start_line, e.text)}")
    return 0


def _reindex(_args: Args, memory: FileMemory, _view: AgentView) -> int:
    count = memory.index.rebuild()
    print(f"reindexed {count} memories from {memory.scope.root}")
    status = _reindex_vectors(memory)
    return _reindex_shared(memory) or status


def _mem0_line(entry_id: str, text: str) -> str:
    first, *rest = text.splitlines() or [""]
    more = f" (+{len(rest)} lines)" if rest else ""
    return f"{entry_id}  {first}{more}"


def _conflicts(args: Args, memory: FileMemory) -> int:
    """``mindroom memory conflicts``: each recorded pair with both texts as they are now."""
    from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
    from mindroom.memory.jobs.consolidate.resolve import sides

    records = ConsolidationRecords(db_path(memory.scope.state_dir))
    try:
        found = records.conflicts(include_resolved=args.all)
        for conflict in found:
            when = dt.datetime.fromtimestamp(conflict.created_at).strftime("%Y-%m-%d")
            print(
                f"{conflict.id}  {conflict.kind:<8} {conflict.status:<8} {when}  {conflict.reason}"
            )
            for mark, side in zip("AB", sides(memory, conflict), strict=True):
                if side.now is None:
                    print(f"  {mark} {side.id}  (no longer in memory)  {side.recorded}")
                else:
                    e = side.now
                    print(f"  {mark} {_line(e.id, e.path, e.start_line, e.text)}")
            if conflict.kind == "merge":
                print(f"  proposed: {conflict.metadata.get('text', '')}")
            if conflict.resolution:
                print(f"  settled: {conflict.resolution}")
    finally:
        records.close()
    which = "recorded" if args.all else "open"
    print(f"({len(found)} {which} in {memory.scope.root})")
    if found and not args.all:
        print(
            f"settle one with: mindroom memory resolve {_target(args)} ID "
            "--keep A_OR_B_ID | --keep-both | --edit TEXT [--keep ID] | --accept"
        )
    return 0


def _resolve(args: Args, memory: FileMemory) -> int:
    """``mindroom memory resolve``: settle one recorded pair (see its module)."""
    from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
    from mindroom.memory.jobs.consolidate.resolve import resolve

    records = ConsolidationRecords(db_path(memory.scope.state_dir))
    try:
        done = resolve(
            memory,
            records,
            args.conflict,
            keep=args.keep,
            keep_both=args.keep_both,
            text=args.edit,
            accept=args.accept,
        )
    finally:
        records.close()
    print(f"{args.conflict}: {done}")
    return 0


# What restore and reindex would do has no meaning in mem0; say why and what to do instead.
_MEM0_REFUSALS = {
    "restore": (
        "it uses the mem0 backend, which forgets a deleted memory (only its history keeps the "
        "text). See the text with `mindroom memory history {target} ID` and store it "
        "again with `mindroom memory add {target} TEXT`."
    ),
    "conflicts": (
        "it uses the mem0 backend, which settles a new fact against the stored ones as it "
        "stores it (it updates or deletes instead of keeping a contradiction); see what it "
        "changed with `mindroom memory history {target}`."
    ),
    "resolve": (
        "it uses the mem0 backend, which records no conflicts (see `mindroom memory "
        "conflicts {target}`)."
    ),
    "reindex": (
        "it uses the mem0 backend, which embeds each memory as it is stored and has no files "
        "to rebuild an index from. After changing the embedder, move the memories over with "
        "`mindroom memory export {target}` (old setting) and `mindroom memory import` "
        "(new setting)."
    ),
}


def _act_mem0(args: Args, memory: Mem0Memory) -> int:
    """The actions on a mem0 scope: mem0's ids, mem0's change records."""
    if args.action in _MEM0_REFUSALS:
        why = _MEM0_REFUSALS[args.action].format(target=_target(args))
        raise MemoryStoreError(f"{args.action} does not apply to {_whose(args)}: {why}")
    act = _MEM0_ACTIONS.get(args.action)
    return 0 if act is None else act(args, memory)


def _mem0_list(args: Args, memory: Mem0Memory) -> int:
    entries = asyncio.run(memory.list(args.limit))
    for e in entries:
        print(_mem0_line(e.id, e.text))
    print(f"({len(entries)} memories of {memory.scope_id} in mem0)")
    return 0


def _mem0_search(args: Args, memory: Mem0Memory) -> int:
    hits = memory.search_sync(args.query, args.limit)
    for hit in hits:
        print(f"{hit.score:.3g}  {_mem0_line(hit.entry.id, hit.entry.text)}")
    if not hits:
        print(f"no memories match {args.query!r}")
    return 0


def _mem0_add(args: Args, memory: Mem0Memory) -> int:
    if args.file:
        raise MemoryStoreError("mem0 keeps no files: drop --file (the memory is one text)")
    e = asyncio.run(memory.add(args.text, actor="cli"))
    print(f"added {_mem0_line(e.id, e.text)}")
    return 0


def _mem0_get(args: Args, memory: Mem0Memory) -> int:
    e = asyncio.run(memory.get(args.id))
    print(f"{e.id}  mem0\n{e.text}")
    return 0


def _mem0_history(args: Args, memory: Mem0Memory) -> int:
    records = memory.history_sync(args.id)
    for r in records:
        when = str(r.get("created_at") or "")[:19].replace("T", " ")
        old, new = r.get("old_memory"), r.get("new_memory")
        event = str(r.get("event"))
        change = f"{old!r} -> {new!r}" if event == "UPDATE" else repr(new or old)
        print(f"{when}  {event:<7} {r.get('memory_id')}  {change}")
    if not records:
        print("no history yet")
    return 0


_MEM0_ACTIONS: dict[str, Callable[[Args, Mem0Memory], int]] = {
    "list": _mem0_list,
    "search": _mem0_search,
    "add": _mem0_add,
    "get": _mem0_get,
    "history": _mem0_history,
}


def _reindex_shared(memory: FileMemory) -> int:
    """Rebuild this scope's rows of the PostgreSQL index too (``memory.search.index``)."""
    try:
        shared = memory.pg_search
        if shared is None:
            return 0
        shared.rebuild()
    except Exception as exc:  # the database's own words (no URL in them)
        print(f"mindroom memory: the PostgreSQL search index was not rebuilt: {exc}")
        return 1
    print(f"copied {shared.count()} memories to the PostgreSQL search index")
    return 0


def _reindex_vectors(memory: FileMemory) -> int:
    """Rebuild the vector index too (when there is an embedder): every entry embedded again."""
    try:
        vectors = memory.vectors
        if vectors is None:
            return 0
        count = vectors.rebuild()
    except EmbedderError as exc:
        print(f"mindroom memory: the vector index was not rebuilt: {exc}")
        return 1
    print(f"embedded {count} memories with {vectors.model_id}")
    return 0


add_recall_command(group, _open)


# The actions on a file scope (the ones every backend shares come before, in ``_act``).
_FILE_ACTIONS: dict[str, Callable[[Args, FileMemory, AgentView], int]] = {
    "list": _list,
    "search": _search,
    "add": _add,
    "get": _get,
    "history": _history,
    "delete": _delete,
    "restore": _restore,
    "conflicts": lambda args, memory, _view: _conflicts(args, memory),
    "resolve": lambda args, memory, _view: _resolve(args, memory),
    "reindex": _reindex,
}
