"""``mindroom config ...``: show, check and edit config.yaml without losing a comment.

Thin: every edit goes through :func:`mindroom.config.store.edit_config` (round-trip, under the
config lock, validated as a whole before the file is replaced).
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import click

from mindroom.cli.options import Args, Invocation, config_param, invocation
from mindroom.config.load import load_config
from mindroom.config.store import ConfigDocument, dump_value, edit_config, parse_value
from mindroom.invocation import invoked_as


@click.group("config", help="show, check and edit config.yaml")
def group() -> None:
    """``mindroom config``."""


def _action(name: str, help_text: str, *params: click.Parameter) -> click.Command:
    """A ``mindroom config`` action on the file ``--config`` names (run by :func:`run_config`)."""
    command = click.Command(
        name,
        callback=lambda **_: invocation(run_config),
        params=[*params, config_param()],
        help=help_text,
    )
    group.add_command(command)
    return command


_action("show", "print the config file")
_action("validate", "check the config file")
_action("get", "print one value\n\nKEY: dotted key, e.g. agents.general", click.Argument(["key"]))
_action(
    "set",
    "set one value (validated before the file is replaced)\n\n"
    "VALUE: a YAML value: text, 3, true, [a, b], {k: v}",
    click.Argument(["key"]),
    click.Argument(["value"]),
)
_action("unset", "remove one key", click.Argument(["key"]))
_action(
    "add-agent",
    "add an agent",
    click.Argument(["name"]),
    click.Option(["--role"], default=""),
    click.Option(["--model"]),
    click.Option(["--room"], multiple=True, help="a room (repeatable)"),
)


@group.command("init", help="write a starter config.yaml, agents/, mind_template/")
@click.option("--path", default=".", help="folder (default: here)")
def init(**_: object) -> Invocation:
    """``mindroom config init``."""
    return invocation(run_init)


def run_config(args: Args) -> int:
    """Carry out one ``mindroom config`` action."""
    path = Path(args.config)
    if args.action == "show":
        print(path.read_text(encoding="utf-8"), end="")
        return 0
    if args.action == "validate":
        config = load_config(path)
        print(
            f"{path}: valid ({len(config.agents)} agents, {len(config.teams)} teams, "
            f"rooms: {', '.join(config.room_names) or 'none'})"
        )
        return 0
    if args.action == "get":
        print(dump_value(ConfigDocument(path).get(args.key)))
        return 0
    # load, edit and save under one lock: concurrent commands take turns and all land; a change
    # by a writer that takes no lock (an editor) between load and save is refused, not overwritten
    with edit_config(path) as doc:
        if args.action == "set":
            doc.set(args.key, parse_value(args.value))
        elif args.action == "unset":
            doc.unset(args.key)
        elif args.action == "add-agent":
            doc.add_agent(args.name, role=args.role, model=args.model, rooms=list(args.room))
        written = doc.save()
    print(f"{path}: {'updated' if written else 'unchanged'}")
    return 0


def run_init(args: Args) -> int:
    """Write a starter install into ``--path``; never overwrites an existing file."""
    target = Path(args.path)
    target.mkdir(parents=True, exist_ok=True)
    starter = resources.files("mindroom.config") / "starter"
    created, kept = [], []

    def place(source: object, destination: Path) -> None:
        if destination.exists():
            kept.append(destination)
            return
        destination.parent.mkdir(parents=True, exist_ok=True)
        with resources.as_file(source) as real:  # type: ignore[arg-type]
            shutil.copyfile(real, destination)
        created.append(destination)

    place(starter / "config.yaml", target / "config.yaml")
    place(starter / "agents_README.md", target / "agents" / "README.md")
    template = starter / "mind_template"
    for item in ("MEMORY.md", "memory/README.md"):
        place(template.joinpath(*item.split("/")), target / "mind_template" / item)
    for path in created:
        print(f"created {path}")
    for path in kept:
        print(f"kept    {path} (exists)")
    print(
        f"next: {invoked_as()} run --local"
        + (f" --config {target / 'config.yaml'}" if args.path != "." else "")
    )
    return 0
