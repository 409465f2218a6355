"""Chat commands (``!help``, ``!new``, ``!agents``): parsing and the text of their answers.

Pure: the bot executes ``!new`` (it owns the session state) and sends what these functions
write. Commands are answered by the router, as notices, in the thread they were sent in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mindroom.config.schema import Config

KNOWN = ("help", "new", "agents", "config")


@dataclass(frozen=True)
class Command:
    """A parsed command: its name (lowercase) and the rest of the line."""

    name: str
    argument: str = ""

    @property
    def known(self) -> bool:
        """True for a command mindroom understands."""
        return self.name in KNOWN


def parse_command(body: str) -> Command | None:
    """The command in ``body`` (``!name rest``), or None when it is not one."""
    text = body.strip()
    if not text.startswith("!") or len(text) < 2 or text[1].isspace():
        return None
    name, *rest = text[1:].split(maxsplit=1)
    return Command(name.lower(), rest[0].strip() if rest else "")


def _agent_line(config: Config, name: str, user_id: str) -> str:
    agent = config.agents[name]
    role = f": {agent.role}" if agent.role else ""
    return f"- **{agent.display_name or name}** ({user_id}){role}"


def help_text(config: Config, room_agents: Sequence[str], user_ids: Mapping[str, str]) -> str:
    """``!help``: the agents in this room with their roles, and the commands."""
    lines = ["**Agents in this room**"]
    lines += [_agent_line(config, name, user_ids[name]) for name in room_agents] or ["- (none)"]
    lines += [
        "",
        "Mention an agent to ask it; in a thread, the agent that answered keeps answering. "
        "With no mention the router picks the best agent.",
        "",
        "**Commands**",
        "- `!help`: this message",
        "- `!agents`: every configured agent and its rooms",
        "- `!new`: start a fresh conversation here (forget this room's or thread's history)",
        "- `!config status`: is the config file valid; admins: `!config get|set KEY [VALUE]`",
    ]
    return "\n".join(lines)


def agents_text(config: Config, user_ids: Mapping[str, str]) -> str:
    """``!agents``: every configured agent, its role and rooms."""
    lines = ["**Configured agents**"]
    for name, agent in config.agents.items():
        rooms = ", ".join(f"#{room}" for room in agent.rooms) or "no rooms (DM only)"
        lines.append(f"{_agent_line(config, name, user_ids.get(name, name))}; rooms: {rooms}")
    return "\n".join(lines)


def new_session_text(generation: int, in_thread: bool) -> str:
    """``!new``: confirmation."""
    where = "this thread" if in_thread else "this room"
    return f"Started a fresh conversation in {where} (session {generation + 1})."


def unknown_text(command: Command) -> str:
    """An unknown command: a short hint."""
    return f"Unknown command `!{command.name}`. Try `!help`."
