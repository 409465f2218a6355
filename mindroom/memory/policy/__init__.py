"""Who may read and write which memory: the read gate, allowlists, filters and consent."""
