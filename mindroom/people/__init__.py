"""Everything about one person across every store: list, export and erase."""
