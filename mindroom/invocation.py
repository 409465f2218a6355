"""How the person runs mindroom, so every hint we print is a command they can paste.

``mindroom`` is rarely on PATH: the README installs it into ``.venv/bin``. Hints use the
command as this process was started (``.venv/bin/mindroom``, a path relative to the current
folder when it is below it, or ``python -m mindroom``), and ``.venv/bin/mindroom`` where that
cannot be known (messages shown in a room). Pure; reads only ``sys.argv`` and the cwd.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

README_COMMAND = ".venv/bin/mindroom"


def invoked_as(argv0: str | None = None, cwd: Path | None = None) -> str:
    """The command that started this process, as the person can type it again."""
    arg0 = argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")
    name = Path(arg0).name
    if name in ("__main__.py", "-m", "-c", "") or name.endswith(".py"):
        return f"{Path(sys.executable).name} -m mindroom" if argv0 is None else "python -m mindroom"
    if os.sep not in arg0:  # found on PATH
        return arg0 if shutil.which(arg0) else README_COMMAND
    path = Path(arg0).resolve()
    here = (cwd or Path.cwd()).resolve()
    if here == path or here in path.parents:
        relative = path.relative_to(here).as_posix()
        return relative if "/" in relative else f"./{relative}"
    return str(path)
