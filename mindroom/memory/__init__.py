"""File memory: markdown files people read and edit, and what is derived from them.

The rule: the markdown files under a scope's root (``MEMORY.md``, ``memory/*.md``) are the
source of truth, structured fields included (they live in each entry's marker, see
:mod:`mindroom.memory.files.fields`). The search index, the history and the locks under
``mindroom_data/memory/<scope>/`` are derived or control state: deleting the index loses
nothing (it is rebuilt from the files), and no code path trusts the index over the files. So
are the other tables there: ``vectors.db`` and ``relations.db`` (derived), and
``consolidation.db`` (retrievals, conflicts), ``deltas.db`` (threads' revisions),
``consent.db`` (pending proposals), ``events.db`` (operational counts) and
``audience-backfill.json`` (whether old entries still wait for an audience), control state
that can be reset without losing a memory.
This package never imports Matrix or Agno code.
"""
