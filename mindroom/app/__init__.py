"""The running bot: the composition root, its lifecycle, background tasks and hot reload."""
