"""Scheduled maintenance: jobs (memory consolidation) that run on their own, with no cron.

The schedule lives in SQLite, ``mindroom_data/maintenance.db`` (:mod:`.store`): each job's
``next_due_at``, last run and lease, and an audit row per run. config.yaml
(``memory.maintenance.jobs``) defines the jobs and ``mindroom maintenance config`` overrides
fields of one (:mod:`.jobs`). A running bot checks at start, every ``tick_seconds`` and after
each memory flush cycle (:mod:`.loop`); ``mindroom maintenance tick`` and ``daemon`` check from
the terminal (:mod:`.cli`). A job whose due time passed (the machine slept, the bot was down)
runs once at the next check, then waits for its next window (:mod:`.schedule`). A lease claimed
atomically in SQLite keeps one job from running twice at once, across processes too.

Jobs run through a registry of job types (:mod:`.runner`); this package knows nothing of what a
job does to memory (``consolidation`` is :mod:`mindroom.memory.jobs.consolidate`, imported on first
use). The database is control state: deleting it forgets due times and the audit, no memory.
"""
