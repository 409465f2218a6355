"""``mindroom appservice registration``: the file a homeserver loads to let mindroom act as
its agents (``matrix.mode: appservice``, see :mod:`mindroom.adapters.matrix.appservice`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mindroom.adapters.matrix.appservice import registration_hint, write_registration
from mindroom.cli.options import Args, Invocation, invocation, with_storage
from mindroom.config.load import load_config


@click.group("appservice", help="mindroom as the homeserver's application service")
def group() -> None:
    """``mindroom appservice``."""


@with_storage
@group.command(
    "registration", help="write the registration file for the homeserver; print its path"
)
def registration(**_: object) -> Invocation:
    """``mindroom appservice registration``."""
    return invocation(run_registration)


def run_registration(args: Args) -> int:
    """Write ``mindroom_data/appservice-registration.yaml`` (the tokens are made once and kept)
    from ``matrix.appservice``; its path on stdout, what to do with it on stderr."""
    config_path = Path(args.config).resolve()
    storage = Path(args.storage).resolve() if args.storage else config_path.parent
    config = load_config(config_path)  # ConfigError: "mindroom: ..." and exit 2
    path = write_registration(storage / "mindroom_data", config.matrix.appservice)
    print(path)
    print(registration_hint(path), file=sys.stderr)
    if config.matrix.mode != "appservice":
        print(
            "(matrix.mode is not appservice in the config: mindroom run logs its agents in "
            "as before)",
            file=sys.stderr,
        )
    return 0
