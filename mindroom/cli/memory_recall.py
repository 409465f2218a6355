"""``mindroom memory recall``: the memory block a new turn gets, printed.

Split from :mod:`mindroom.cli.memory`, which registers it beside the other memory actions.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import click

from mindroom.cli.index_progress import build_search_indexes, quiet_blas
from mindroom.cli.options import Args, invocation, storage_params
from mindroom.config import Config, load_config
from mindroom.memory.registry import MemoryRegistry

# opens the memory of ``--agent`` and ``--user`` from the config already read
Opener = Callable[[Args, Config], tuple[Any, MemoryRegistry]]


def add_recall_command(group: click.Group, opener: Opener) -> None:
    """Register ``mindroom memory recall`` in ``group``; ``opener`` checks ``--agent`` and
    ``--user`` and opens the memory as every memory action does."""
    group.add_command(
        click.Command(
            "recall",
            callback=lambda **_: invocation(partial(run_recall, opener=opener)),
            params=[
                click.Option(["--agent"], required=True, help="agent name"),
                click.Option(
                    ["--user"], help="Matrix ID: who is asking (a private companion's memory)"
                ),
                click.Argument(["message"]),
                *storage_params(),
            ],
            help="show the memory a new turn of the agent gets for a message\n\n"
            "MESSAGE: the message the turn answers",
        )
    )


def run_recall(args: Args, opener: Opener) -> int:
    """``mindroom memory recall``: print exactly the memory block a new turn of the agent gets
    for the message (nothing at all when it gets none), from the files as they are now.

    The block comes from :func:`mindroom.memory.search.recall.agent_recall`, the function the
    runtime
    calls for every turn, so what this prints is what the model sees.
    """
    from mindroom.memory.search.recall import agent_recall

    quiet_blas()

    config_path = Path(args.config).resolve()
    storage = Path(args.storage).resolve() if args.storage else config_path.parent
    config = load_config(config_path)
    if args.agent in config.agents and config.agent_memory_backend(args.agent) == "none":
        # no memory of its own, but the memory of its teams is still recalled
        registry = MemoryRegistry(config, storage, config_path.parent)
    else:
        _, registry = opener(args, config)  # checks the agent and --user like every memory action
    try:
        memories = [registry.for_agent(args.agent, args.user)]
        memories += [registry.for_team(config.teams[t].agents) for t in config.teams_of(args.agent)]
        build_search_indexes(memories)  # the first call embeds here, with a bar on stderr
        _, block = agent_recall(
            registry.config, registry, args.agent, args.message, args.user, count=False
        )
    finally:
        registry.close()
    if block:
        print(block)
    return 0
