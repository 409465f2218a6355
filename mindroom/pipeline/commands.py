"""Chat commands (``!help``, ``!new``, ``!agents``): parsing and the text of their answers.

Pure: the bot executes ``!new`` (it owns the session state) and sends what these functions
write. Commands are answered by the router, as notices, in the thread they were sent in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mindroom.config.schema import Config

if TYPE_CHECKING:
    from mindroom.sessions.compaction import Compacted

KNOWN = ("help", "new", "reset", "compact", "status", "agents", "config", "memory")


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


def _sentence(text: str) -> str:
    """``text`` as a sentence: stripped, ending in one full stop (or its own ``!``/``?``)."""
    text = text.strip()
    return text if not text or text[-1] in ".!?" else f"{text}."


def _member_line(config: Config, name: str, user_id: str) -> str | None:
    """``- **Name** (@id): Role.`` for an agent; a team's line also names its members.

    None for a name the config does not know (an account being added or removed by a reload).
    """
    member = config.agents.get(name) or config.teams.get(name)
    if member is None:
        return None
    line = f"- **{member.display_name or name}** ({user_id})"
    if name in config.teams:
        line += f", a team of {', '.join(config.teams[name].agents)}"
    role = _sentence(member.role)
    return f"{line}: {role}" if role else line


def help_text(config: Config, room_agents: Sequence[str], user_ids: Mapping[str, str]) -> str:
    """``!help``: the agents and teams in this room with their roles, and the commands."""
    lines = ["**Agents in this room**"]
    members = [_member_line(config, name, user_ids.get(name, name)) for name in room_agents]
    lines += [line for line in members if line is not None] or ["- (none)"]
    lines += [
        "",
        "Mention an agent to ask it; in a thread, the agent that answered keeps answering. "
        "With no mention the router picks the best agent.",
        "",
        "**Commands**",
        "- `!help`: this message",
        "- `!agents`: every configured agent and team and its rooms",
        "- `!new` (or `!reset`): start a fresh conversation here (forget this room's or "
        "thread's history)",
        "- `!compact [instructions]`: summarize this conversation's older messages now "
        "(optionally saying what the summary must keep)",
        "- `!status`: this conversation's session: age, turns, tokens, compactions, memory flush",
        "- `!config status`: is the config file valid; admins: `!config get|set KEY [VALUE]`",
        "- `!memory list [PAGE]`: what the agents here remember about you (the texts in a "
        "direct message only)",
        "- `!memory forget WORDS`: forget what I remember about you with those words, once you "
        "confirm (react ✅ or `!memory forget confirm`); `!memory undo` brings it back for a day",
        "- `!memory remember TEXT`: remember a fact about you now",
        "- `!memory pending`: memory changes waiting for your confirmation; "
        "`!memory confirm ID` or `!memory reject ID` answers one (or react ✅ / ❌ to its "
        "offer in your direct chat with the agent)",
        "- `!memory link` (in a direct message): a link to read, correct, delete and download "
        "what the companions remember about you",
    ]
    return "\n".join(lines)


def _with_rooms(line: str, rooms: Sequence[str]) -> str:
    where = ", ".join(f"#{room}" for room in rooms) or "none (DM only)"
    separator = "" if line.endswith((".", "!", "?")) else "."
    return f"{line}{separator} Rooms: {where}."


def agents_text(config: Config, user_ids: Mapping[str, str]) -> str:
    """``!agents``: every configured agent and team, its role and rooms."""
    lines = ["**Configured agents**"]
    for name, agent in config.agents.items():
        line = _member_line(config, name, user_ids.get(name, name))
        assert line is not None  # a configured name
        lines.append(_with_rooms(line, agent.rooms))
    if config.teams:
        lines += ["", "**Configured teams**"]
        for name, team in config.teams.items():
            line = _member_line(config, name, user_ids.get(name, name))
            assert line is not None
            lines.append(_with_rooms(line, team.rooms))
    return "\n".join(lines)


def new_session_text(generation: int, in_thread: bool) -> str:
    """``!new``: confirmation."""
    where = "this thread" if in_thread else "this room"
    return f"Started a fresh conversation in {where} (session {generation + 1})."


def no_session_text(in_thread: bool) -> str:
    """``!status`` / ``!compact`` where no agent has talked with the sender yet."""
    where = "this thread" if in_thread else "this room"
    return f"No conversation with an agent in {where} yet."


def compact_text(owner: str, done: Compacted | None, *, team: bool = False) -> str:
    """``!compact``: what was compacted for ``owner``."""
    if team:
        return f"**{owner}**: team conversations are not compacted (they keep recent turns)."
    if done is None:
        return f"**{owner}**: nothing to compact yet (only recent messages here)."
    return (
        f"**{owner}**: compacted: {done.summarized} messages summarized, {done.kept} recent "
        f"ones kept verbatim (compaction {done.generation} of this session)."
    )


def unknown_text(command: Command) -> str:
    """An unknown command: a short hint."""
    name = command.name if len(command.name) <= 40 else f"{command.name[:40]}…"
    return f"Unknown command `!{name}`. Try `!help`."
