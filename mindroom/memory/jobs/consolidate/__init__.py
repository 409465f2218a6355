"""Memory consolidation: duplicates merged, contradictions recorded, facts promoted, originals
archived (never deleted). A scheduled maintenance job runs it per scope; the model is asked
only about the pairs that need judgement, within a budget."""
