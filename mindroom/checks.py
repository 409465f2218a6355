"""A finding of ``mindroom doctor``: what was checked, whether it is fine, how to fix it.

Plain data shared by the probes in :mod:`mindroom.matrix.probe` and :mod:`mindroom.agents.probe`
and the doctor that renders them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
