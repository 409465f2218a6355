"""Everything about one person across every store: list, export and erase; while the bot runs,
the gate that keeps its work from overlapping an erasure (:mod:`mindroom.people.erasure`); and
the chat commands a person reads and corrects what is remembered about them with
(:mod:`mindroom.people.memory_chat`)."""
