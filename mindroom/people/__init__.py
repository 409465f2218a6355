"""Everything about one person across every store: list, export and erase; and the chat
commands a person reads and corrects what is remembered about them with
(:mod:`mindroom.people.memory_chat`)."""
