"""The path of a message: intake, routing, turns, answers, chat commands and notices."""
