"""The ``mindroom`` command and its subcommands. Printing happens only here."""
