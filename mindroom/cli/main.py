"""The ``mindroom`` command: parses the command line and runs what it names. Printing happens
only in :mod:`mindroom.cli`.

The commands are Click commands in their own modules (``run``, ``chat`` and ``doctor`` in
:mod:`mindroom.cli.run`; ``memory`` in :mod:`mindroom.cli.memory`, and so on). A module is
imported only when its command runs or shows its help: :data:`COMMANDS` names each one's
module and one-line help, so ``mindroom --help`` lists them all without importing any (nor
the SDKs they use). Exit codes: what the command returns (0 on success), 2 for a command line
Click cannot parse or a :class:`~mindroom.errors.MindroomError` (a config error, say), 3 when a
command needs the running bot and there is none, 130 on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import click

from mindroom.app.runlock import NOT_RUNNING_EXIT
from mindroom.cli.options import Args, Invocation
from mindroom.errors import MindroomError, NotRunningError
from mindroom.redact import DatabaseDetailFilter

logger = logging.getLogger("mindroom")

# name: (module:attribute of the Click command, its one-line help in ``mindroom --help``)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("mindroom.cli.run:run", "run the agents"),
    "chat": ("mindroom.cli.run:chat", "talk to the agents from the terminal (local user)"),
    "doctor": (
        "mindroom.cli.run:doctor",
        "check config, homeserver, models, storage, encrypted rooms",
    ),
    "memory": ("mindroom.cli.memory:group", "read and edit an agent's memory"),
    "maintenance": (
        "mindroom.cli.maintenance:group",
        "scheduled memory jobs (consolidation): status, run now, configure",
    ),
    "sessions": ("mindroom.cli.sessions:group", "list and show conversation sessions"),
    "keys": ("mindroom.cli.keys:group", "the encryption key backup's recovery key"),
    "appservice": (
        "mindroom.cli.appservice:group",
        "mindroom as the homeserver's application service",
    ),
    "dashboard": ("mindroom.cli.dashboard:group", "the web dashboard mindroom run serves"),
    "config": ("mindroom.cli.config:group", "show, check and edit config.yaml"),
}


class LazyGroup(click.Group):
    """A group whose commands are imported when one is used: ``lazy`` maps each name to
    ``module:attribute`` and its one-line help (what the group's own help lists)."""

    def __init__(self, *args: object, lazy: dict[str, tuple[str, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.lazy)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return None
        module, _, attribute = self.lazy[cmd_name][0].partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, short) in self.lazy.items()])


@click.group(
    "mindroom",
    cls=LazyGroup,
    lazy=COMMANDS,
    help="AI agents in Matrix rooms.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option("-v", "--verbose", is_flag=True, help="debug logging")
def cli(verbose: bool) -> None:
    """The ``mindroom`` group (its subcommands return an :class:`Invocation`)."""


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``
    and, for an exception, ``exception`` (its traceback), for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def _setup_logging(verbose: bool, log_format: str | None = None) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    if (log_format or os.environ.get("MINDROOM_LOG_FORMAT", "")).lower() == "json":
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonLogFormatter())
    for handler in logging.getLogger().handlers:  # no database error quotes people's words
        handler.addFilter(DatabaseDetailFilter())
    # watchfiles logs every file change at INFO; nio every sync step.
    for noisy in ("nio", "aiosqlite", "sqlalchemy", "watchfiles"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Model HTTP requests (httpx2 is the transport of openai 3.x) are debug output.
    for transport in ("httpx", "httpx2", "openai"):
        logging.getLogger(transport).setLevel(logging.DEBUG if verbose else logging.WARNING)
    # nio warns about every expected error response (an unknown alias, say); Agno logs model
    # failures that mindroom reports itself in one line, with the model's name. Agno resets its
    # loggers' levels on every run, so a filter (which it leaves alone) keeps them quiet.
    logging.getLogger("nio.responses").setLevel(logging.ERROR)
    if not verbose:
        for name in ("agno", "agno-team", "agno-workflow"):
            logging.getLogger(name).addFilter(_only_critical)


def _only_critical(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.CRITICAL


def parse_args(argv: Sequence[str]) -> Args:
    """What a command line means, without running it (click.UsageError when it means nothing,
    as the command would exit 2)."""
    parsed = cli.main(list(argv), prog_name="mindroom", standalone_mode=False)
    if not isinstance(parsed, Invocation):
        raise click.UsageError(f"{' '.join(argv)!r} names no command to run")
    return parsed.args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mindroom`` console script: parse ``argv`` (default: the process's
    arguments), run the command, return its exit code (never raises SystemExit)."""
    try:
        parsed = cli.main(
            list(argv) if argv is not None else None, prog_name="mindroom", standalone_mode=False
        )
    except click.ClickException as exc:  # a usage error: its message, exit 2
        exc.show()
        return exc.exit_code
    except click.Abort:  # Ctrl-C while parsing
        return 130
    if not isinstance(parsed, Invocation):  # --help: Click printed it
        return int(parsed or 0)
    return execute(parsed)


def execute(invocation: Invocation) -> int:
    """Set up logging and the environment, run the command, map mindroom's errors to exit
    codes (the message on stderr)."""
    args = invocation.args
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # progress shows up even when piped
    _setup_logging(args.verbose, getattr(args, "log_format", None))
    if isinstance(getattr(args, "config", None), str):
        from mindroom.config.environment import load_dotenv_beside

        # Once, before anything reads the environment: run, doctor, chat and the rest alike.
        load_dotenv_beside(Path(args.config).resolve())
    os.environ.setdefault("AGNO_TELEMETRY", "false")
    try:
        if inspect.iscoroutinefunction(invocation.function):
            return int(asyncio.run(invocation.function(args)))
        return int(invocation.function(args))
    except NotRunningError as exc:
        print(exc, file=sys.stderr)  # "mindroom is not running for ...": no second prefix
        return NOT_RUNNING_EXIT
    except MindroomError as exc:
        print(f"mindroom: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
