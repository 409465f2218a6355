"""Two writers, one file: people's editors and mindroom writing the same memory files.

Real files, real threads and real processes: a rename-style editor and an in-place editor save
while mindroom writes; a file replaced at the worst moment; a writer killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mindroom.errors import MemoryStoreError
from mindroom.memory.files import protocol as files
from mindroom.memory.files import store as store_module
from mindroom.memory.files.markdown import MemoryEntry, parse_entries
from mindroom.memory.files.protocol import file_lock, read_text
from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import MemoryScope
from tests.support.waiting import wait_until_sync

REPO = Path(__file__).resolve().parents[2]
QUIET = getattr(files, "QUIET_SECONDS", 0.2)
FACT_ID = re.compile(r"<!-- (m-[0-9a-f]{8})(?: [^<>]*)? -->")


@pytest.fixture
def scope(tmp_path: Path) -> MemoryScope:
    root = tmp_path / "workspace"
    root.mkdir()
    return MemoryScope("agent_test", root, tmp_path / "state")


@pytest.fixture
def memory(scope: MemoryScope) -> Iterator[FileMemory]:
    mem = FileMemory(scope)
    yield mem
    mem.close()


# -- item 8: editor saves while mindroom writes ------------------------------------------------


def rename_save(path: Path, text: str) -> None:
    """How vim/VS Code save by default: a new file renamed over the old one."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def in_place_save(path: Path, text: str) -> None:
    """How nano/gedit-like editors save: truncate, then write the buffer in chunks."""
    size = max(1, len(text) // 4)
    with path.open("w", encoding="utf-8") as handle:
        for start in range(0, len(text), size):
            handle.write(text[start : start + size])
            handle.flush()
            os.fsync(handle.fileno())


def run_editor_against_writers(memory: FileMemory, save: Callable[[Path, str], None]) -> dict:
    """20 editor saves while 4 threads add and append_unique memories; returns the counts."""
    path = memory.scope.entrypoint
    path.write_text("# Notes\n- hand line 0\n", encoding="utf-8")
    stop = threading.Event()
    written: list[str] = []
    errors: list[BaseException] = []

    def writer(number: int) -> None:
        count = 0
        while not stop.is_set():
            count += 1
            try:
                if count % 2:
                    entry = memory.add_sync(f"tool fact {number}-{count}", actor="tool")
                else:
                    entry = memory.append_unique_sync(
                        f"flush fact {number}-{count}", actor="flush", path="MEMORY.md"
                    )
                if entry is not None:
                    written.append(entry.id)
            except Exception as exc:  # reported by the test
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    saved: list[str] = []
    deleted_by_mindroom: set[str] = set()
    try:
        for number in range(1, 21):
            # save only after mindroom wrote since the last save: the two really interleave
            seen = len(written)
            wait_until_sync(lambda seen=seen: len(written) > seen)
            text = path.read_text(encoding="utf-8")
            line = f"- editor line {number}"
            save(path, text + line + "\n")
            saved.append(line)
            # mindroom's next write must keep this save and every earlier one
            after = len(written)
            wait_until_sync(lambda after=after: len(written) > after + 1)
            now = path.read_text(encoding="utf-8")
            deleted_by_mindroom |= {s for s in saved if s not in now.splitlines()}
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    final = path.read_text(encoding="utf-8").splitlines()
    facts_kept = {m.group(1) for line in final for m in [FACT_ID.search(line)] if m}
    return {
        "saves_kept": sum(1 for s in saved if s in final),
        "saves": len(saved),
        "first_line_kept": "- hand line 0" in final and "# Notes" in final,
        "deleted_by_mindroom": sorted(deleted_by_mindroom),
        "facts_written": len(written),
        "facts_kept": len(facts_kept & set(written)),
        "errors": [repr(e) for e in errors[:3]],
    }


@pytest.mark.timeout(300)
@pytest.mark.parametrize("save", [rename_save, in_place_save], ids=["rename", "in_place"])
def test_every_editor_save_survives_a_burst_of_memory_writes(
    memory: FileMemory, save: Callable[[Path, str], None]
) -> None:
    counts = run_editor_against_writers(memory, save)
    print(f"{save.__name__}: {counts}")  # the numbers for the report (pytest -s)

    assert counts["errors"] == []
    assert counts["saves"] == 20
    assert counts["saves_kept"] == 20
    assert counts["deleted_by_mindroom"] == []
    assert counts["first_line_kept"]
    assert counts["facts_written"] > 20  # the writers really wrote during the saves


def test_a_file_mid_save_by_an_in_place_editor_is_not_taken_as_the_truth(
    memory: FileMemory,
) -> None:
    path = memory.scope.entrypoint
    full = "".join(f"- line {n}\n" for n in range(40))
    path.write_text(full, encoding="utf-8")
    handle = path.open("w", encoding="utf-8")  # an editor starts saving: truncated...
    handle.write(full[:100])
    handle.flush()  # ... and the first chunk is on disk
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(memory.add_sync("x", actor="tool")))
    worker.start()
    try:
        time.sleep(QUIET / 4)  # the editor writes on while mindroom waits
        handle.write(full[100:])
    finally:
        handle.close()
    worker.join(30)

    assert result, "the write did not finish"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[:40] == full.splitlines()  # the whole save, nothing cut
    assert FACT_ID.search(lines[40])


@pytest.mark.parametrize("leases", [True, False], ids=["leases", "control_without_leases"])
def test_an_in_place_editor_pausing_past_the_quiet_wait_is_waited_for_while_the_file_is_open(
    memory: FileMemory, monkeypatch: pytest.MonkeyPatch, leases: bool
) -> None:
    """The quiet wait alone cannot see an editor that pauses mid-save (a slow disk, a loaded
    machine); the file being open for writing can. The control, with the kernel's answer taken
    away, shows the test would see the save cut."""
    if not leases:
        monkeypatch.setattr(files, "_open_for_writing", lambda fd: False)
    path = memory.scope.entrypoint
    full = "".join(f"- line {n}\n" for n in range(40))
    path.write_text(full, encoding="utf-8")
    quiet_reads: list[bool] = []  # reads of the file once quiet: whether each was settled
    real_read = files._read_version

    def read(real: Path, name: str) -> object:
        quiet = time.time_ns() - os.stat(real).st_mtime_ns >= QUIET * 1e9  # before the read
        version = real_read(real, name)
        if quiet:
            quiet_reads.append(version.settled)
        return version

    monkeypatch.setattr(files, "_read_version", read)
    handle = path.open("w", encoding="utf-8")  # an editor starts saving: truncated...
    handle.write(full[:100])
    handle.flush()  # ... the first chunk is on disk, and the editor stalls
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(memory.add_sync("x", actor="tool")))
    worker.start()
    try:
        if leases:  # mindroom has looked at the stalled file after the quiet wait
            wait_until_sync(lambda: bool(quiet_reads) or not worker.is_alive(), timeout=30)
        else:  # mindroom wrote while the editor stalled
            wait_until_sync(lambda: not worker.is_alive(), timeout=30)
        handle.write(full[100:])
    finally:
        handle.close()
    worker.join(30)

    assert result, "the write did not finish"
    lines = path.read_text(encoding="utf-8").splitlines()
    if leases:
        assert quiet_reads[0] is False  # quiet, but open: not taken as the truth
        assert lines[:40] == full.splitlines()  # the whole save, nothing cut
        assert FACT_ID.search(lines[40])
    else:
        assert quiet_reads[0] is True  # the control: quiet alone let mindroom write...
        assert lines[:40] != full.splitlines()  # ... and the rest of the save was lost


def save_once_at(monkeypatch: pytest.MonkeyPatch, name: str, path: Path, line: str) -> None:
    """Make a person save ``path`` (rename-style) just before mindroom's first call of ``name``."""
    real = getattr(files, name)
    calls = []

    def person_saves_first(*args: object, **kwargs: object) -> object:
        if not calls:
            calls.append(1)
            rename_save(path, path.read_text(encoding="utf-8") + line + "\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(files, name, person_saves_first)


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "no_exchange"])
@pytest.mark.parametrize("moment", ["write_temp", "_digest"])
def test_a_save_after_mindroom_read_the_file_is_kept_and_the_edit_reapplied(
    memory: FileMemory, monkeypatch: pytest.MonkeyPatch, exchange: bool, moment: str
) -> None:
    path = memory.scope.entrypoint
    path.write_text("- line one\n", encoding="utf-8")
    if not exchange:  # a platform without renameat2: the hash check before os.replace
        monkeypatch.setattr(files, "_exchange", lambda a, b: errno.ENOSYS)
    save_once_at(monkeypatch, moment, path, "- saved meanwhile")

    entry = memory.add_sync("Alice likes tea", actor="tool")

    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == [
        "- line one",
        "- saved meanwhile",
        f"- Alice likes tea <!-- {entry.id} created={entry.fields.created} -->",
    ]


def assert_kept_with_no_other_file(memory: FileMemory, saved: str, entry: MemoryEntry) -> None:
    """The file holds its first line, the person's ``saved`` line and mindroom's ``entry``, in
    that order, and nothing was left beside it."""
    lines = memory.scope.entrypoint.read_text(encoding="utf-8").splitlines()
    assert lines == [
        "- line one",
        saved,
        f"- {entry.text} <!-- {entry.id} created={entry.fields.created} -->",
    ]
    assert sorted(p.name for p in memory.scope.root.iterdir()) == ["MEMORY.md"]


def test_a_save_between_the_check_and_the_swap_is_swapped_back(
    memory: FileMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = memory.scope.entrypoint
    path.write_text("- line one\n", encoding="utf-8")
    save_once_at(monkeypatch, "_exchange", path, "- saved at the last moment")

    entry = memory.add_sync("Bob likes coffee", actor="tool")

    assert_kept_with_no_other_file(memory, "- saved at the last moment", entry)


def test_an_append_through_a_handle_opened_before_the_swap_is_kept(
    memory: FileMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person's append opened the file just before mindroom's swap and writes after it: the
    displaced version is still open for writing, so it is swapped back, not dropped (a flaky
    team-mirror test lost such an append under load)."""
    path = memory.scope.entrypoint
    path.write_text("- line one\n", encoding="utf-8")
    real_exchange, real_read = files._exchange, files._read_version
    handle: list[object] = []
    reads: list[int] = []
    done = threading.Event()

    def person_opens_first(a: Path, b: Path) -> int:
        if not handle:
            handle.append(path.open("a", encoding="utf-8"))  # on the version about to go
        return real_exchange(a, b)

    def counted(*args: object, **kwargs: object) -> object:
        reads.append(1)
        return real_read(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(files, "_exchange", person_opens_first)
    monkeypatch.setattr(files, "_read_version", counted)

    def person_writes() -> None:
        # once mindroom is done (the append would land in a dropped file) or reads again
        wait_until_sync(lambda: done.is_set() or (handle and len(reads) >= 2), "a moment")
        opened = handle[0]
        opened.write("- appended meanwhile\n")  # type: ignore[attr-defined]
        opened.close()  # type: ignore[attr-defined]

    person = threading.Thread(target=person_writes)
    person.start()
    try:
        entry = memory.add_sync("Dana likes mate", actor="tool")
    finally:
        done.set()
        person.join()

    assert_kept_with_no_other_file(memory, "- appended meanwhile", entry)


def test_saves_before_both_swaps_keep_the_newest_as_the_file_and_the_other_beside_it(
    memory: FileMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = memory.scope.entrypoint
    path.write_text("- line one\n", encoding="utf-8")
    real = files._exchange
    calls: list[int] = []

    def two_saves(a: Path, b: Path) -> int:
        calls.append(1)
        if len(calls) <= 2:  # before mindroom's swap, and before it swaps back
            rename_save(path, path.read_text(encoding="utf-8") + f"- save {len(calls)}\n")
        return real(a, b)

    monkeypatch.setattr(files, "_exchange", two_saves)

    entry = memory.add_sync("Carol likes cocoa", actor="tool")

    # the second save was made on the file as it briefly was (with mindroom's entry): it is
    # the newest version and keeps the name; the first save, which it replaced, is kept beside
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == [
        "- line one",
        f"- Carol likes cocoa <!-- {entry.id} created={entry.fields.created} -->",
        "- save 2",
    ]
    conflicts = list(memory.scope.root.glob("MEMORY.conflict-*.md"))
    assert len(conflicts) == 1
    assert conflicts[0].read_text(encoding="utf-8").splitlines() == ["- line one", "- save 1"]


# -- item 9: a bound on every operation ----------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.asyncio
async def test_a_file_replaced_between_the_write_and_the_answer_never_hangs_the_call(
    memory: FileMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_edit = store_module.edit_file

    def edit_then_person_replaces(path: Path, *args: object, **kwargs: object):
        result = real_edit(path, *args, **kwargs)  # type: ignore[arg-type]
        rename_save(path, "- a person's own version\n")  # the new entry is gone again
        return result

    monkeypatch.setattr(store_module, "edit_file", edit_then_person_replaces)

    try:
        outcome: object = await asyncio.wait_for(memory.add("coffee at 9", actor="t"), 20)
    except MemoryStoreError as exc:
        outcome = exc
    assert outcome is not None  # it answered (an entry or a clear error), it did not hang
    memory.scope.entrypoint.write_text("- Z <!-- m-0000000a -->\n", encoding="utf-8")
    try:
        updated: object = await asyncio.wait_for(memory.update("m-0000000a", "Y", actor="t"), 20)
    except MemoryStoreError as exc:
        updated = exc
    assert updated is not None


@pytest.mark.timeout(60)
def test_a_lock_held_forever_fails_the_write_with_a_clear_error(
    memory: FileMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "OPERATION_SECONDS", 0.5)
    outcome: list[object] = []
    with file_lock(memory.scope.state_dir / "locks", memory.scope.entrypoint, timeout=1):

        def write() -> None:
            try:
                outcome.append(memory.add_sync("tea", actor="t"))
            except MemoryStoreError as exc:
                outcome.append(exc)

        worker = threading.Thread(target=write, daemon=True)
        worker.start()
        worker.join(30)
    assert len(outcome) == 1
    assert isinstance(outcome[0], MemoryStoreError)
    assert "busy" in str(outcome[0])
    assert memory.add_sync("tea", actor="t").text == "tea"  # free again: works (control)


# -- item 16 (b, c): a writer killed with SIGKILL ------------------------------------------------

KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from mindroom.memory.files import protocol as files
    from mindroom.memory.scope import MemoryScope
    from mindroom.memory.files.store import FileMemory

    root, state, where = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    memory = FileMemory(MemoryScope("agent_test", root, state))

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    def after(real):
        def call(*args, **kwargs):
            result = real(*args, **kwargs)
            die()
            return result
        return call

    exchange = getattr(files, "_exchange", None)
    if where == "before_swap":  # the temp file is written, the swap has not happened
        files._exchange = die
        os.replace = die
    else:  # the file is swapped in, nothing after it ran
        files._exchange = after(exchange) if exchange else None
        os.replace = after(os.replace)
    memory.add_sync("killed mid-write", actor="tool")
    """
)


def kill_a_writer(scope: MemoryScope, where: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(scope.root), str(scope.state_dir), where],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()


def test_temp_files_of_a_killed_writer_are_removed_when_the_scope_opens(
    scope: MemoryScope,
) -> None:
    (scope.root / "MEMORY.md").write_text("- hand line\n", encoding="utf-8")
    users_own = [scope.root / ".notes.tmp", scope.root / ".MEMORY.md.swp"]
    for path in users_own:
        path.write_text("mine", encoding="utf-8")

    kill_a_writer(scope, "before_swap")
    leftovers = [p.name for p in scope.root.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 2  # the writer's temp file is there (and the user's own)

    memory = FileMemory(scope)
    try:
        remaining = sorted(p.name for p in scope.root.iterdir())
        assert remaining == [".MEMORY.md.swp", ".notes.tmp", "MEMORY.md"]
        assert (scope.root / "MEMORY.md").read_text() == "- hand line\n"
    finally:
        memory.close()


def test_a_writer_killed_right_after_the_file_change_leaves_the_history_record(
    scope: MemoryScope,
) -> None:
    (scope.root / "MEMORY.md").write_text("- hand line\n", encoding="utf-8")

    kill_a_writer(scope, "after_swap")

    entries = parse_entries((scope.root / "MEMORY.md").read_text(), "MEMORY.md")
    written = [e for e in entries if e.id.startswith("m-")]
    assert [e.text for e in written] == ["killed mid-write"]  # the file change happened
    memory = FileMemory(scope)
    try:
        records = memory.history_of(written[0].id)
        assert [(r.op, r.new) for r in records] == [("add", "killed mid-write")]  # no abort
        assert list((scope.state_dir / "intents").iterdir()) == []
    finally:
        memory.close()


def test_a_writer_killed_before_the_file_change_leaves_no_fact_and_its_record_is_aborted(
    scope: MemoryScope,
) -> None:
    (scope.root / "MEMORY.md").write_text("- hand line\n", encoding="utf-8")

    kill_a_writer(scope, "before_swap")
    memory = FileMemory(scope)  # opening settles what the killed writer announced
    try:
        records = memory.history_of()
    finally:
        memory.close()

    assert (scope.root / "MEMORY.md").read_text() == "- hand line\n"
    assert [r.op for r in records] == ["add", "abort"]
    assert records[0].id == records[1].id
    assert list((scope.state_dir / "intents").iterdir()) == []


WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from mindroom.memory.scope import MemoryScope
    from mindroom.memory.files.store import FileMemory

    root, state, worker = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    memory = FileMemory(MemoryScope("agent_test", root, state))
    (state.parent / f"ready-{worker}").touch()
    deadline = time.monotonic() + 30
    while not (state.parent / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.002)
    for n in range(25):
        memory.add_sync(f"process {worker} fact {n}", actor=f"p{worker}")
    memory.close()
    """
)


def test_four_processes_adding_concurrently_lose_and_duplicate_nothing(
    scope: MemoryScope, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(scope.root), str(scope.state_dir), str(w)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for w in range(4)
    ]
    deadline = time.monotonic() + 30
    while not all((tmp_path / f"ready-{w}").exists() for w in range(4)):
        assert time.monotonic() < deadline, "workers did not start"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.005)
    (tmp_path / "go").touch()
    results = [p.communicate(timeout=60) for p in procs]

    assert [p.returncode for p in procs] == [0, 0, 0, 0], results
    entries = parse_entries(read_text(scope.entrypoint), "MEMORY.md")
    expected = {f"process {w} fact {n}" for w in range(4) for n in range(25)}
    assert len(entries) == 100
    assert {e.text for e in entries} == expected
    memory = FileMemory(scope)
    try:
        assert len(memory.history_of()) == 100
        assert len(memory.list_sync(limit=1000)) == 100
    finally:
        memory.close()
