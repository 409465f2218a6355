"""``mindroom keys recovery-key``: the recovery key of the encryption key backup.

The key backup (:mod:`mindroom.adapters.matrix.key_backup`) is readable only with this key; the
copy in
``mindroom_data/crypto/`` goes with the key stores it would restore, so a person keeps one off
the machine and gives it back as ``MINDROOM_RECOVERY_KEY`` after a re-install.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mindroom.adapters.matrix.key_backup import RECOVERY_ENV, recovery_key
from mindroom.cli.options import Args, Invocation, invocation, with_storage


@click.group("keys", help="the encryption key backup's recovery key")
def group() -> None:
    """``mindroom keys``."""


@with_storage
@group.command(
    "recovery-key", help=f"print the recovery key (keep a copy; give it back as {RECOVERY_ENV})"
)
def recovery_key_command(**_: object) -> Invocation:
    """``mindroom keys recovery-key``."""
    return invocation(run_recovery_key)


def run_recovery_key(args: Args) -> int:
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
