"""The benches run with the runtime extras only: none of them imports pytest, directly or
through a test support module (``tests/support`` is standard library and mindroom)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Imports every bench script (not as __main__: nothing runs) with pytest made unimportable;
# the control proves the block works: the tests' conftest, which needs pytest, fails.
CHECK = """
import importlib.abc, runpy, sys
from pathlib import Path

class NoPytest(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pytest", "_pytest", "pytest_asyncio", "pytest_timeout"):
            raise ImportError(f"{name} is a test dependency")
        return None

sys.meta_path.insert(0, NoPytest())
repo = Path(sys.argv[1])
sys.path[:0] = [str(repo), str(repo / "bench")]
try:
    import tests.conftest
except ImportError:
    print("control: blocked")
for script in sorted((repo / "bench").glob("*.py")):
    try:
        runpy.run_path(str(script), run_name="bench_import_check")
    except ImportError as error:
        print(f"{script.name}: {error}")
"""


def test_every_bench_imports_without_pytest() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(REPO)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "control: blocked", done.stdout
    assert lines[1:] == [], "\n".join(lines[1:])
