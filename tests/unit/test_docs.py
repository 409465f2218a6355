"""The docs cannot go stale silently: the architecture page names every package of the tree and
nothing that is gone, the README's links lead to files that exist, and no docstring or comment
cites a document the repository does not have. No homeserver: files and the parser only."""

from __future__ import annotations

import ast
import io
import re
import tokenize
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "mindroom"
ARCHITECTURE = REPO / "docs" / "architecture.md"

DOTTED = re.compile(r"\bmindroom(?:\.[A-Za-z_]\w*)+")
# "spec 6", "(issue 17.2)", "Issue 33", "the seeds", "seed 003", "the design says"
# ("--seed 7", a bench's random seed option, is not a citation)
CITATION = re.compile(
    r"\b(?:spec|issue)s? \d+|\bthe seeds?\b|(?<!--)\bseed(?:'s)? \d+"
    r"|\bthe design(?:'s| says| document)",
    re.IGNORECASE,
)


def packages(root: Path) -> list[str]:
    """Every package under ``root`` (a folder with ``__init__.py``), as a dotted name."""
    return sorted(
        ".".join((root.name, *init.parent.relative_to(root).parts))
        for init in root.rglob("__init__.py")
    )


def defines(module: Path, name: str) -> bool:
    """Whether the module file defines or imports ``name`` at its top level."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            found |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
    return name in found


def exists(dotted: str, root: Path) -> bool:
    """Whether ``dotted`` names a package, a module, or a top-level name of a module."""
    parts = dotted.split(".")[1:]
    path = root
    for i, part in enumerate(parts):
        if (path / part / "__init__.py").is_file():
            path = path / part
        elif (path / f"{part}.py").is_file():
            rest = parts[i + 1 :]
            return not rest or (len(rest) == 1 and defines(path / f"{part}.py", rest[0]))
        else:  # a name defined in the package's __init__.py
            rest = parts[i:]
            return len(rest) == 1 and defines(path / "__init__.py", rest[0])
    return True


def test_the_architecture_page_names_every_package() -> None:
    page = ARCHITECTURE.read_text(encoding="utf-8")
    missing = [name for name in packages(PACKAGE) if f"`{name}`" not in page]
    assert missing == [], f"docs/architecture.md does not name {missing}"


def test_every_mindroom_name_on_the_architecture_page_exists() -> None:
    names = set(DOTTED.findall(ARCHITECTURE.read_text(encoding="utf-8")))
    assert len(names) > 20  # the page is read at all
    gone = sorted(name for name in names if not exists(name, PACKAGE))
    assert gone == [], f"docs/architecture.md names what the package does not have: {gone}"


def test_the_checks_catch_a_new_package_and_a_name_that_is_gone(tmp_path: Path) -> None:
    root = tmp_path / "mindroom"
    (root / "memory" / "files").mkdir(parents=True)
    for init in ("__init__.py", "memory/__init__.py", "memory/files/__init__.py"):
        (root / init).write_text("")
    (root / "memory" / "files" / "store.py").write_text("class FileMemory: ...\n")

    assert packages(root) == ["mindroom", "mindroom.memory", "mindroom.memory.files"]
    assert exists("mindroom.memory.files.store", root)
    assert exists("mindroom.memory.files.store.FileMemory", root)
    assert not exists("mindroom.memory.files.store.Gone", root)
    assert not exists("mindroom.memory.flush", root)
    assert not exists("mindroom.memory.files.store.FileMemory.add", root)


def test_the_readme_is_short_and_its_links_lead_somewhere() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert "docs/index.md" in local
    assert [link for link in local if not (REPO / link).exists()] == []


def test_the_test_extra_installs_the_docs_build() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]
    assert "mindroom[docs]" in extras["test"]
    assert {r.split(">")[0].split("=")[0] for r in extras["docs"]} >= {"mkdocs", "mkdocs-material"}


def notes(path: Path) -> Iterator[tuple[int, str]]:
    """Every comment and docstring of a Python file, with its line."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                yield node.body[0].lineno, docstring


def citations(root: Path) -> list[str]:
    """``file:line: words`` for every docstring or comment under ``root`` that cites a document."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, text in notes(path):
            for match in CITATION.finditer(text):
                found.append(f"{path.relative_to(root.parent)}:{line}: {match.group(0)!r}")
    return found


def test_no_docstring_or_comment_cites_a_document_the_repository_does_not_have() -> None:
    assert citations(PACKAGE) == []
    assert citations(REPO / "bench") == []


@pytest.mark.parametrize(
    "text",
    [
        '"""The ``memory_query`` tool (spec 6): one call."""',
        '"""Read with bounded work (issue 30.10)."""',
        "x = 1  # Issue 33 adds the room's kind here",
        '"""A session save under 100 ms, as the seeds ask."""',
        "def f():\n    '''Bands follow what the design says.'''",
    ],
)
def test_the_citation_check_catches_a_citation(tmp_path: Path, text: str) -> None:
    root = tmp_path / "mindroom"
    root.mkdir()
    (root / "cited.py").write_text(text + "\n")
    assert len(citations(root)) == 1


def test_the_citation_check_leaves_ordinary_words_alone(tmp_path: Path) -> None:
    root = tmp_path / "mindroom"
    root.mkdir()
    text = '"""An Ed25519 key from its 32-byte seed; see issue_id 7 and spec_version."""\n'
    (root / "plain.py").write_text(text + 'ISSUE = "spec 6"  # a string, not a note\n')
    assert citations(root) == []
