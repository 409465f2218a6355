"""File memory: markdown files people read and edit, and what is derived from them.

The rule: the markdown files under a scope's root (``MEMORY.md``, ``memory/*.md``) are the
source of truth. The search index, the history and the locks under
``mindroom_data/memory/<scope>/`` are derived or control state: deleting the index loses
nothing (it is rebuilt from the files), and no code path trusts the index over the files.
This package never imports Matrix or Agno code.
"""
