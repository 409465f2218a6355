"""A finding of ``mindroom doctor``: what was checked, whether it is fine, how to fix it.

Plain data shared by the probes in :mod:`mindroom.adapters.matrix.probe` and
:mod:`mindroom.adapters.agno.probe`
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
    warning: bool = False  # fine to run, but something a person should know or act on

    @property
    def status(self) -> str:
        """``FAIL`` (the doctor exits non-zero), ``WARN`` or ``ok``."""
        if not self.ok:
            return "FAIL"
        return "WARN" if self.warning else "ok"
