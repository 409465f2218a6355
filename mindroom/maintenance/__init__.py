"""Scheduled maintenance jobs (memory consolidation): see the modules."""
