"""mindroom: AI agents with memory in Matrix rooms."""

__version__ = "0.1.0"
