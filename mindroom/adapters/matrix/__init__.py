"""Matrix: the homeserver and the client side of mindroom."""
