"""The only package that imports Agno: model providers, agent building, sessions, turns."""
