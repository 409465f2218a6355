"""``mindroom keys recovery-key``: the recovery key of the encryption key backup.

The key backup (:mod:`mindroom.adapters.matrix.key_backup`) is readable only with this key; the
copy in
``mindroom_data/crypto/`` goes with the key stores it would restore, so a person keeps one off
the machine and gives it back as ``MINDROOM_RECOVERY_KEY`` after a re-install.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from mindroom.adapters.matrix.key_backup import RECOVERY_ENV, recovery_key


def add_keys_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    common: Callable[[argparse.ArgumentParser], None],
) -> None:
    """Register ``mindroom keys`` and its actions."""
    keys = sub.add_parser("keys", help="the encryption key backup's recovery key")
    actions = keys.add_subparsers(dest="action", required=True)
    show = actions.add_parser(
        "recovery-key", help=f"print the recovery key (keep a copy; give it back as {RECOVERY_ENV})"
    )
    common(show)
    show.set_defaults(func=run_recovery_key)


def run_recovery_key(args: argparse.Namespace) -> int:
    """Print the recovery key on stdout (where it came from on stderr); 1 when there is none."""
    config_path = Path(args.config).resolve()
    storage = Path(args.storage).resolve() if args.storage else config_path.parent
    found = recovery_key(storage / "mindroom_data", create=False)  # ConfigError when malformed
    if found is None:
        print(
            "no recovery key yet: mindroom makes one at its first start with encryption",
            file=sys.stderr,
        )
        return 1
    print(found.text)
    print(
        f"(from {found.source}; give it back as {RECOVERY_ENV} after a re-install)", file=sys.stderr
    )
    return 0
