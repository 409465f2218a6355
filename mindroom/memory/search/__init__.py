"""Finding memory: the derived indexes (keyword, vector, past conversations) and recall."""
