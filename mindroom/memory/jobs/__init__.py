"""Memory maintenance jobs: consolidation, lifecycle (TTL), insights, and their scheduler."""
