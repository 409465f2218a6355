"""Memory files: the markdown people edit, their write protocol, history and archive."""
