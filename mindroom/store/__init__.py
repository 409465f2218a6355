"""The storage layer: the control-state database (:mod:`~mindroom.store.database`, the ledger's
tables), versioned migrations for the SQLite stores (:mod:`~mindroom.store.migrations`) and
the registry of every SQLite store and derived index (:mod:`~mindroom.store.schemas`)."""
