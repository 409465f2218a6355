"""``mindroom sessions list|show``: the conversations' sessions, as ``!status`` shows them.

Reads the session book in the ledger (``mindroom_data/ledger.db``); safe beside a running bot
(SQLite in WAL mode: a reader never blocks it). Writes nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from mindroom.cli.options import Args, Invocation, invocation, with_storage
from mindroom.config.load import load_config
from mindroom.errors import MindroomError
from mindroom.sessions.status import SessionStatus, gather, status_json, status_line, status_text
from mindroom.store.ledger import Ledger, ledger_target


@click.group("sessions", help="list and show conversation sessions")
def group() -> None:
    """``mindroom sessions``."""


@with_storage
@group.command("list", help="conversations, the most recently active first")
@click.option("--agent", help="only this agent's or team's conversations")
@click.option("--limit", type=int, default=50, help="at most this many (50)")
@click.option("--json", is_flag=True, help="one JSON object per line")
def listing(**_: object) -> Invocation:
    """``mindroom sessions list``."""
    return invocation(run_sessions)


@with_storage
@group.command(
    "show",
    help="one conversation's session in full\n\n"
    "SESSION: a conversation key or a session id (from list)",
)
@click.argument("session")
@click.option("--json", is_flag=True, help="as JSON")
def show(**_: object) -> Invocation:
    """``mindroom sessions show``."""
    return invocation(run_sessions)


def _storage(args: Args) -> tuple[Path, Path | str]:
    """The config's path, and the ledger: ``storage.database`` when the config sets it, else
    the SQLite file."""
    config_path = Path(args.config).resolve()
    storage = Path(args.storage).resolve() if args.storage else config_path.parent
    database = load_config(config_path).storage.database if config_path.is_file() else None
    return config_path, ledger_target(database, storage / "mindroom_data")


def _budget(config_path: Path, owner: str) -> int | None:
    """The context size of ``owner``'s model, when the config says it (else None)."""
    if not config_path.is_file():
        return None
    try:
        config = load_config(config_path)
    except MindroomError:
        return None
    if owner not in config.agents:
        return None
    return config.chat_model(config.agent_model(owner)).context_tokens


async def run_sessions(args: Args) -> int:
    """Carry out one ``mindroom sessions`` action."""
    config_path, ledger_path = _storage(args)
    if isinstance(ledger_path, Path) and not ledger_path.is_file():
        print(f"no sessions yet: {ledger_path} does not exist (has mindroom run here?)")
        return 1 if args.action == "show" else 0
    ledger = await Ledger.open(ledger_path)
    try:
        if args.action == "list":
            records = await ledger.sessions.listing(args.agent, max(1, args.limit))
            statuses = [await gather(ledger, r) for r in records]
            return _print_list(statuses, args.json)
        record = await ledger.sessions.get(args.session) or await ledger.sessions.find(args.session)
        if record is None:
            print(f"no conversation or session {args.session!r} (see: mindroom sessions list)")
            return 1
        status = await gather(ledger, record)
    finally:
        await ledger.close()
    if args.json:
        print(json.dumps(status_json(status), indent=2))
    else:
        print(f"conversation {record.key}")
        print(status_text(status, time.time(), _budget(config_path, record.owner)))
    return 0


def _print_list(statuses: list[SessionStatus], as_json: bool) -> int:
    if not statuses:
        print("no conversations yet")
        return 0
    now = time.time()
    for status in statuses:
        print(json.dumps(status_json(status)) if as_json else status_line(status, now))
    return 0
