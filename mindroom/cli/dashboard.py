"""``mindroom dashboard url``: the dashboard's address with its token, for this config."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from mindroom.config.load import load_config
from mindroom.dashboard.access import dashboard_token, dashboard_url
from mindroom.dashboard.person import running_port


def add_dashboard_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    common: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Register ``mindroom dashboard`` and its actions."""
    dashboard = sub.add_parser("dashboard", help="the web dashboard mindroom run serves")
    actions = dashboard.add_subparsers(dest="action", required=True)
    url = actions.add_parser("url", help="print the dashboard's URL with its token")
    common(url)
    url.add_argument("--port", type=int, help="this port (default: the running dashboard's)")
    url.set_defaults(func=run_url)


def run_url(args: argparse.Namespace) -> int:
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
