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
    """Print the URL (the token is made when there is none yet, so a later run uses it): the
    running dashboard's port, else ``--port``, else the config's."""
    config_path = Path(args.config).resolve()
    storage = Path(args.storage).resolve() if args.storage else config_path.parent
    config = load_config(config_path)  # ConfigError: "mindroom: ..." and exit 2
    data_dir = storage / "mindroom_data"
    token = dashboard_token(data_dir)
    # the port of a running dashboard (which --dashboard-port may have moved), else the config's
    print(dashboard_url(args.port or running_port(data_dir) or config.dashboard.port, token))
    if not config.dashboard.enabled:
        print(
            "(dashboard.enabled is false in the config: mindroom run does not serve it)",
            file=sys.stderr,
        )
    return 0
