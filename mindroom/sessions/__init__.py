"""Conversation sessions: which Agno session a conversation is in, and its life.

* :mod:`~mindroom.sessions.freshness`: when a conversation outside a thread goes stale (pure);
* :mod:`~mindroom.sessions.book`: the session book, one row per conversation (its current
  session, when it started and was last active, its usage), in the ledger database;
* :mod:`~mindroom.sessions.overflow`: context-overflow errors of model providers (pure);
* :mod:`~mindroom.sessions.status`: what ``!status`` and ``mindroom sessions`` show;
* :mod:`~mindroom.sessions.keeper`: the session of each turn (begin, compact, rotate, count);
* :mod:`~mindroom.sessions.summaries`: compaction summaries' instructions, chunks and notes
  (pure; the model calls are :mod:`mindroom.adapters.agno.summaries`);
* :mod:`~mindroom.sessions.transcripts`: past conversations into the session index
  (``memory.sources: [memory, sessions]``).

Control state, like the ledger: losing it starts conversations afresh, it loses no memory.
"""
