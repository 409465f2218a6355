"""``memory.categories`` and ``memory.allowlists``: how memory is sorted and who may see what.

Every entry has a category (written in its marker, see :mod:`mindroom.memory.files.fields`; an
entry that names none is in ``categories.default``). A category's ``context`` says how it
reaches a conversation: ``all`` puts its entries in every turn's memory block (a profile),
``rag`` only the ones relevant to the message, at most ``rag_length`` per turn.

``allowlists`` maps an agent (or team) to the categories it may read and write; one that is
not listed may use every category. The check happens in the store for every path (tools,
recall, the CLI with ``--agent``, the flush), see :mod:`mindroom.memory.policy.access`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mindroom.config.strict import Strict as _Strict
from mindroom.memory.files.fields import CATEGORY_RE, DEFAULT_CATEGORY

ContextMode = Literal["all", "rag"]


class CategoryConfig(_Strict):
    """One category: its name, how it reaches a conversation, and how many per turn (rag)."""

    name: str = Field(description="lowercase letters, digits, `_` and `-`, starting with a letter")
    context: ContextMode = Field(
        default="rag",
        description="`all`: its entries are in every turn (a profile); `rag`: only the relevant "
        "ones",
    )
    rag_length: int = Field(
        default=5, ge=0, le=100, description="with `rag`: entries of it a turn gets, at most"
    )
    description: str = Field(default="", description="what belongs in it (shown to the model)")

    @model_validator(mode="after")
    def _name(self) -> CategoryConfig:
        if not CATEGORY_RE.fullmatch(self.name):
            raise ValueError(
                f"category name {self.name!r}: use lowercase letters, digits, '_' and '-', "
                "starting with a letter (at most 40)"
            )
        return self


def _system() -> list[CategoryConfig]:
    return [
        CategoryConfig(name=DEFAULT_CATEGORY, description="anything not sorted elsewhere"),
        CategoryConfig(name="profile", context="all", description="who the person is"),
        CategoryConfig(name="preferences", description="likes, dislikes, how they want things"),
        CategoryConfig(name="goals", description="what they are working towards"),
        CategoryConfig(name="event", rag_length=5, description="things that happened"),
        CategoryConfig(name="activity", rag_length=5, description="what they did recently"),
        CategoryConfig(name="tasks", description="things to do, open or done"),
        CategoryConfig(
            name="relationship_dynamic",
            rag_length=2,
            description="insights about how the person relates (written in the background)",
        ),
        CategoryConfig(
            name="procedural",
            rag_length=0,
            description="how-to steps; fetched only through memory_query, never recalled",
        ),
    ]


class CategoriesConfig(_Strict):
    """``memory.categories``: the system set (defaults above), custom ones, the default."""

    system: list[CategoryConfig] = Field(default_factory=_system)
    custom: list[CategoryConfig] = Field(default_factory=list)
    default: str = Field(
        default=DEFAULT_CATEGORY, description="the category of an entry that names none"
    )

    @model_validator(mode="after")
    def _consistent(self) -> CategoriesConfig:
        names = [c.name for c in [*self.system, *self.custom]]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"memory.categories: defined more than once: {', '.join(twice)}")
        if self.default not in names:
            raise ValueError(
                f"memory.categories.default: {self.default!r} is not a defined category "
                f"(defined: {', '.join(names)})"
            )
        return self

    @property
    def by_name(self) -> dict[str, CategoryConfig]:
        """Every category by name, system first."""
        return {c.name: c for c in [*self.system, *self.custom]}


def check_allowlists(
    allowlists: dict[str, list[str]], categories: CategoriesConfig, owners: set[str]
) -> None:
    """Raise ValueError naming the first allowlist that names an unknown agent or category."""
    known = categories.by_name
    for owner, allowed in allowlists.items():
        if owner not in owners:
            raise ValueError(
                f"memory.allowlists.{owner}: not a configured agent or team "
                f"(configured: {', '.join(sorted(owners)) or 'none'})"
            )
        unknown = [name for name in allowed if name not in known]
        if unknown:
            raise ValueError(
                f"memory.allowlists.{owner}: unknown categories {', '.join(unknown)} "
                f"(defined: {', '.join(known)}; add custom ones under memory.categories.custom)"
            )
