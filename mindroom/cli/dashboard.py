"""``mindroom dashboard url``: the dashboard's address with its token, for this config."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mindroom.cli.options import Args, Invocation, invocation, with_storage
from mindroom.config.load import load_config
from mindroom.dashboard.access import dashboard_token, dashboard_url
from mindroom.dashboard.person import running_port


@click.group("dashboard", help="the web dashboard mindroom run serves")
def group() -> None:
    """``mindroom dashboard``."""


@with_storage
@group.command("url", help="print the dashboard's URL with its token")
@click.option("--port", type=int, help="this port (default: the running dashboard's)")
def url(**_: object) -> Invocation:
    """``mindroom dashboard url``."""
    return invocation(run_url)


def run_url(args: Args) -> int:
    """Print the URL (the token is made when there is none yet, so a later run uses it):
    ``--port``, else the running dashboard's (checked live: a stale record of a stopped or
    crashed run is ignored), else the config's, said on stderr not to be served now."""
    config_path = Path(args.config).resolve()
    storage = Path(args.storage).resolve() if args.storage else config_path.parent
    config = load_config(config_path)  # ConfigError: "mindroom: ..." and exit 2
    data_dir = storage / "mindroom_data"
    token = dashboard_token(data_dir)
    # the port of a running dashboard (--dashboard-port or a taken port moved it), else the config's
    running = None if args.port else running_port(data_dir)
    print(dashboard_url(args.port or running or config.dashboard.port, token))
    if not args.port and running is None and config.dashboard.enabled:
        print(
            "(no dashboard runs on this storage now: mindroom run serves it here, or on the "
            "next free port when this one is taken)",
            file=sys.stderr,
        )
    if not config.dashboard.enabled:
        print(
            "(dashboard.enabled is false in the config: mindroom run does not serve it)",
            file=sys.stderr,
        )
    return 0
