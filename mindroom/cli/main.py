"""The ``mindroom`` command: parses arguments and calls the rest. Printing happens only here."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from mindroom.app.runlock import (
    NOT_RUNNING_EXIT,
)
from mindroom.cli.appservice import add_appservice_parser
from mindroom.cli.config import add_config_parser
from mindroom.cli.dashboard import add_dashboard_parser
from mindroom.cli.keys import add_keys_parser
from mindroom.cli.maintenance import add_maintenance_parser
from mindroom.cli.memory import add_memory_parser
from mindroom.cli.run import DEFAULT_CONFIG, DEFAULT_LOCAL_PORT, _chat, _doctor, _run
from mindroom.cli.sessions import add_sessions_parser
from mindroom.config.load import load_dotenv_beside
from mindroom.errors import MindroomError, NotRunningError

logger = logging.getLogger("mindroom")


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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="mindroom", description="AI agents in Matrix rooms.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", default=DEFAULT_CONFIG, help="config file (./config.yaml)")
        p.add_argument("--storage", help="storage root (default: the config file's folder)")
        # after the subcommand too (mindroom run -v); SUPPRESS keeps a -v given before it
        p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS)

    run = sub.add_parser("run", help="run the agents")
    common(run)
    run.add_argument("--local", action="store_true", help="start an embedded local homeserver")
    run.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"local homeserver port ({DEFAULT_LOCAL_PORT} at first; later runs keep the last one)",
    )
    run.add_argument("--user", default="user", help="local human account name (user)")
    run.add_argument(
        "--dashboard-port", type=int, default=None, help="dashboard port (dashboard.port: 8765)"
    )
    run.add_argument("--no-dashboard", action="store_true", help="do not serve the dashboard")
    run.add_argument("--ops-port", type=int, default=None, help="serve /healthz and /metrics")
    run.add_argument(
        "--agents",
        default=None,
        metavar="A,B",
        help="with storage.database: the agents this process is home to (others run them "
        "only while it is down)",
    )
    run.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=None,
        help="json: one JSON object per log line (MINDROOM_LOG_FORMAT)",
    )
    run.set_defaults(func=_run)

    chat = sub.add_parser("chat", help="talk to the agents from the terminal (local user)")
    common(chat)
    chat.add_argument("--room", default="lobby", help="room name or alias (lobby)")
    chat.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for an answer (60)"
    )
    chat.add_argument("message", nargs="*", help="message to send; none opens a prompt")
    chat.set_defaults(func=_chat)
    doctor = sub.add_parser(
        "doctor", help="check config, homeserver, models, storage, encrypted rooms"
    )
    common(doctor)
    doctor.set_defaults(func=_doctor)

    add_memory_parser(sub, common)
    add_maintenance_parser(sub, common)
    add_sessions_parser(sub, common)
    add_keys_parser(sub, common)
    add_appservice_parser(sub, common)
    add_dashboard_parser(sub, common)
    add_config_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mindroom`` console script."""
    args = build_parser().parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # progress shows up even when piped
    _setup_logging(args.verbose, getattr(args, "log_format", None))
    if isinstance(getattr(args, "config", None), str):
        # Once, before anything reads the environment: run, doctor, chat and the rest alike.
        load_dotenv_beside(Path(args.config).resolve())
    os.environ.setdefault("AGNO_TELEMETRY", "false")
    try:
        if not asyncio.iscoroutinefunction(args.func):
            return int(args.func(args))
        return asyncio.run(args.func(args))
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
