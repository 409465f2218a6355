"""The background flush: finished conversations become durable memory, silently."""
