"""What the ``mindroom`` commands share: the options naming the config and the storage, a
command line parsed into one :class:`Args`, and the :class:`Invocation` a command returns.

Parsing and running are apart: a command's Click callback only returns what to run with which
arguments; :func:`mindroom.cli.main.main` sets up logging and the environment and runs it. So
a command line can be parsed without running anything (:func:`mindroom.cli.main.parse_args`).
This module imports Click and nothing heavy: every command module imports it, and
``mindroom --help`` imports no command module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import click

DEFAULT_CONFIG = "config.yaml"


class Args(SimpleNamespace):
    """A command line, parsed: each option and argument under its name (``--dashboard-port``
    as ``dashboard_port``), ``command`` and ``action`` (the subcommand's words: ``memory``,
    ``add``; ``action`` is None for a command without actions) and ``verbose`` (``-v`` before
    or after the subcommand)."""


@dataclass(frozen=True)
class Invocation:
    """What a command line asks for: the function that carries it out (it returns the exit
    code; a coroutine function runs under ``asyncio.run``) and its arguments."""

    function: Callable[[Args], Any]
    args: Args


def config_param() -> click.Option:
    """``--config``: the config file."""
    return click.Option(["--config"], default=DEFAULT_CONFIG, help="config file (./config.yaml)")


def storage_params() -> list[click.Parameter]:
    """``--config``, ``--storage`` and ``-v`` (accepted after the subcommand too:
    ``mindroom run -v``). Fresh objects for each command."""
    return [
        config_param(),
        click.Option(["--storage"], help="storage root (default: the config file's folder)"),
        click.Option(["-v", "--verbose"], is_flag=True, help="debug logging"),
    ]


def with_storage(command: click.Command) -> click.Command:
    """Add :func:`storage_params` to a command (the outermost decorator, above Click's)."""
    command.params.extend(storage_params())
    return command


def args_of(ctx: click.Context) -> Args:
    """Every parameter of ``ctx`` and of its parents (the groups above), by name."""
    chain: list[click.Context] = []
    at: click.Context | None = ctx
    while at is not None:
        chain.append(at)
        at = at.parent
    chain.reverse()
    values: dict[str, Any] = {}
    for level in chain:
        values.update(level.params)
    words = [level.info_name for level in chain[1:]]
    values["verbose"] = any(level.params.get("verbose") for level in chain)
    values["command"] = words[0] if words else None
    values["action"] = words[1] if len(words) > 1 else None
    return Args(**values)


def invocation(function: Callable[[Args], Any]) -> Invocation:
    """What the command being parsed returns: ``function`` with the parsed arguments."""
    return Invocation(function, args_of(click.get_current_context()))


def switch(on: str, off: str, dest: str, help: str) -> list[click.Option]:
    """``--on`` / ``--off`` that set ``dest`` to True / False (None when neither is given); both
    on one command line is a usage error (exit 2), as it was before Click, never "the last one
    wins"."""

    def given(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        ctx.params.setdefault(dest, None)
        if not value:
            return
        if ctx.params[dest] is not None:
            raise click.UsageError(f"{on} and {off} exclude each other: give one", ctx=ctx)
        ctx.params[dest] = param.name == "_on"

    return [
        click.Option([on, "_on"], is_flag=True, expose_value=False, callback=given, help=help),
        click.Option(
            [off, "_off"], is_flag=True, expose_value=False, callback=given, help=f"not {on}"
        ),
    ]
