"""The SQL database of mindroom's control state: connection, ledger tables and write helpers."""
