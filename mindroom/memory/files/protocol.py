"""The write protocol of memory files: people edit them while mindroom writes them.

Every change mindroom makes to a memory file (an agent's or a team mirror's ``MEMORY.md``,
daily files, topic files) goes through :func:`edit_file`, which applies a pure edit
``text -> new text`` like this:

1. **Lock.** Take the file's lock (an ``flock`` on a lock file in the scope's state dir, keyed
   by the file's real path), so threads, the bot and the CLI never interleave their own writes.
   Waiting for the lock has a deadline; past it the call fails with :class:`MemoryStoreError`.
2. **Read a stable version.** Read the bytes and ``fstat`` the open file before and after the
   read; the version counts only if nothing moved (same size, mtime and ctime, and the path
   still names that inode) *and* the file has been quiet for :data:`QUIET_SECONDS` (its mtime
   is that old) -- unless it is exactly the version mindroom itself wrote last -- *and*, where
   the kernel can tell (Linux leases), nobody has it open for writing. A file an in-place
   editor is saving (truncate, then write in chunks) keeps moving or stays open, so its
   half-written state is never taken as the truth; mindroom waits and reads again.
3. **Edit.** Apply the edit to that text and remember the SHA-256 of the bytes it saw.
4. **Swap, then check what was swapped out.** The new text goes to a fsynced temp file
   (:mod:`mindroom.atomic`), which is *exchanged* with the file in one atomic step
   (``renameat2(RENAME_EXCHANGE)``); the temp name then holds the version that was displaced.
   If nobody has it open for writing and its hash is the one the edit was based on, it is
   deleted: done. If not, a person saved between the read and the swap (an editor that renames
   over the file, or one that rewrites it in place, or appends, through a handle opened
   earlier, whose write may still be on its way): their version is exchanged back, ours is
   dropped, and the protocol starts again from step 2 -- re-read, re-apply. (Should yet another
   save land between the two swaps, the newest save gets the file name and the one before it
   is kept beside it as ``<name>.conflict-<time>.md``.) So a version mindroom did not see is
   never thrown away, whatever the timing. Where the platform has no
   exchange (not Linux, or a filesystem without it) the hash is compared just before an
   ``os.replace``: the same check with a window of microseconds instead of none. A new file
   is created with ``link()``, which fails if a person created the file meanwhile.
5. **Bound.** Steps 2-4 retry until :data:`OPERATION_SECONDS` have passed, then fail with a
   :class:`MemoryStoreError` ("kept changing; try again"): never a hang.

Callers get ``(old, new)``: the text the edit was applied to and the text written, and build
their answer from ``new`` itself, never from a re-read that a later writer could have changed.

What this cannot see: where leases are not available (not Linux, a file another user owns, a
filesystem without them), an in-place editor that pauses longer than :data:`QUIET_SECONDS` in
the middle of writing one save. Leftover temp files of a crashed writer are removed by
:func:`clean_temp_files` when a scope is opened (only names of :data:`mindroom.atomic.TEMP_NAME_RE`,
and only while holding the target's lock, so a live writer's temp file is never touched).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import logging
import os
import secrets
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mindroom.atomic import (
    TEMP_NAME_RE,
    acquire_lock,
    atomic_write,
    fsync_dir,
    release_lock,
    write_temp,
)
from mindroom.errors import MemoryStoreError

__all__ = [
    "atomic_write",
    "clean_temp_files",
    "create_file",
    "edit_file",
    "file_lock",
    "read_text",
]

logger = logging.getLogger(__name__)

OPERATION_SECONDS = 20.0  # the bound of one edit (lock wait included)
QUIET_SECONDS = 0.2  # a file written this recently by someone else may be mid-save
_POLL_SECONDS = 0.02

_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _load_renameat2() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    c_int, c_path = ctypes.c_int, ctypes.c_char_p
    function.argtypes = [c_int, c_path, c_int, c_path, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


_renameat2 = _load_renameat2()


def _exchange(a: Path, b: Path) -> int:
    """Atomically swap the files at ``a`` and ``b``; 0 or an errno (ENOSYS: no exchange here)."""
    if _renameat2 is None:
        return errno.ENOSYS
    result = _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return 0 if result == 0 else ctypes.get_errno()


# the (inode, size, mtime) of the version this process wrote last, per real path: a file that is
# still exactly that needs no quiet wait (mindroom's own burst of writes does not slow itself)
_written: dict[str, tuple[int, int, int]] = {}
_written_lock = threading.Lock()


def _key(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


@contextlib.contextmanager
def file_lock(lock_dir: Path, target: Path, timeout: float | None = None) -> Iterator[None]:
    """Exclusive lock for ``target`` (threads and processes); MemoryStoreError after ``timeout``
    seconds (default :data:`OPERATION_SECONDS`)."""
    timeout = OPERATION_SECONDS if timeout is None else timeout
    lock_dir.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:24]
    try:
        fd = acquire_lock(lock_dir / f"{name}.lock", timeout)
    except TimeoutError:
        raise MemoryStoreError(
            f"{target.name} is busy: another writer held it for {timeout:.0f} s"
        ) from None
    try:
        yield
    finally:
        release_lock(fd)


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryStoreError(
            f"{name} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None


def read_text(path: Path, name: str | None = None) -> str:
    """The file's text, or '' when it does not exist. Keeps line endings as they are.

    ``name`` is how errors name the file (default: its file name; never an absolute path).
    """
    try:
        fd = _open_regular(path, name or path.name)
    except FileNotFoundError:
        return ""
    try:
        return _decode(_read_all(fd), name or path.name)
    finally:
        os.close(fd)


def _open_regular(path: Path, name: str) -> int:
    """Open ``path`` for reading, refusing anything but a regular file (a FIFO named like a
    memory file would block a reader forever)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise MemoryStoreError(f"{name} is not a regular file")
    return fd


_F_SETLEASE = getattr(fcntl, "F_SETLEASE", None)
_F_SETSIG = getattr(fcntl, "F_SETSIG", None)


def _open_for_writing(fd: int) -> bool:
    """Whether anyone has the file of ``fd`` (opened read-only) open for writing: an in-place
    editor between its truncate and its close. Asked with a read lease, which the kernel grants
    only when nobody has the file open for writing, and given back at once. False where the
    kernel cannot say (no leases, a file another user owns): the quiet wait alone decides then.

    While the lease is held (microseconds) an opener for writing waits for its release, and
    the kernel signals the holder: the signal is set to SIGURG, which is ignored by default,
    rather than SIGIO, which would end the process.
    """
    if _F_SETLEASE is None or _F_SETSIG is None:
        return False
    try:
        fcntl.fcntl(fd, _F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_RDLCK)
    except OSError as exc:
        return exc.errno in (errno.EAGAIN, errno.EBUSY)
    fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_UNLCK)
    return False


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class _Version:
    """One read of a file: its bytes' hash and whether it may be edited as it is."""

    data: bytes
    digest: str
    exists: bool
    settled: bool  # unchanged during the read, and quiet long enough (or our own last write)


def _read_version(path: Path, name: str) -> _Version:
    try:
        fd = _open_regular(path, name)
    except FileNotFoundError:
        return _Version(b"", "", False, True)
    try:
        before = os.fstat(fd)
        data = _read_all(fd)
        after = os.fstat(fd)
        writing = _open_for_writing(fd)
    finally:
        os.close(fd)
    try:
        current = os.stat(path).st_ino
    except FileNotFoundError:
        current = -1
    moved = (
        _key(before) != _key(after) or before.st_ctime_ns != after.st_ctime_ns
    ) or current != after.st_ino
    with _written_lock:
        ours = _written.get(str(path)) == _key(after)
    last_change = max(after.st_mtime_ns, after.st_ctime_ns)
    quiet = ours or time.time_ns() - last_change >= QUIET_SECONDS * 1e9
    settled = quiet and not moved and not writing
    return _Version(data, hashlib.sha256(data).hexdigest(), True, settled)


def _held_for_writing(path: Path) -> bool:
    """Whether anyone has the file at ``path`` open for writing (:func:`_open_for_writing`)."""
    try:
        fd = _open_regular(path, path.name)
    except (FileNotFoundError, MemoryStoreError):
        return False
    try:
        return _open_for_writing(fd)
    finally:
        os.close(fd)


def _digest(path: Path) -> str | None:
    try:
        fd = _open_regular(path, path.name)
    except (FileNotFoundError, MemoryStoreError):
        return None
    try:
        return hashlib.sha256(_read_all(fd)).hexdigest()
    finally:
        os.close(fd)


def _keep_conflict(path: Path, displaced: Path) -> None:
    """A version nobody asked to drop sits at a temp name: keep it beside the file, visibly."""
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    conflict = path.with_name(f"{path.stem}.conflict-{stamp}{path.suffix}")
    os.replace(displaced, conflict)
    logger.warning("kept a concurrently saved version of %s as %s", path.name, conflict.name)


def replace_if_unchanged(path: Path, digest: str, data: str | bytes) -> bool:
    """Put ``data`` in place of the file at ``path`` if it still holds the bytes whose SHA-256
    (hex) is ``digest``; False, nothing written, if it does not. A save that lands while the
    new version is being put in place keeps the file name (the swap is checked, and undone:
    step 4 of the module docstring), where a plain rename would silently drop it. For a file
    outside the memory folders, under its own lock (``config.yaml``)."""
    return _commit(path, _Version(b"", digest, True, True), data)


def _commit(path: Path, seen: _Version, new: str | bytes) -> bool:
    """Put ``new`` in place of the version ``seen``; False (nothing written) if the file is no
    longer that version. See the module docstring, step 4."""
    tmp = write_temp(path, new)
    written = os.stat(tmp)
    displaced_at_tmp = False  # True while tmp holds a version that is not ours
    try:
        if not seen.exists:
            return _create(tmp, path, written)
        if _digest(path) != seen.digest or _held_for_writing(path):
            return False
        failure = _exchange(tmp, path)
        if failure in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            os.replace(tmp, path)  # no exchange on this platform: checked just above
            return _done(path, written)
        if failure == errno.ENOENT:
            return False  # the file was deleted after our read: read again
        if failure:
            raise OSError(failure, os.strerror(failure), str(path))
        displaced_at_tmp = True
        # Nobody can open the displaced version by its name any more; a handle opened before
        # the swap (an in-place editor, an append) may still write to it. Asked in this order
        # (first no writer, then the bytes), a version that passes both can no longer change.
        if not _held_for_writing(tmp) and _digest(tmp) == seen.digest:
            displaced_at_tmp = False  # exactly what the edit was based on: drop it
            return _done(path, written)
        # someone saved (or is saving) between our read and the swap: give their version back
        # the file name
        _swap(tmp, path)
        if os.stat(tmp).st_ino != written.st_ino:
            # and another save came between the two swaps (it replaced ours): the newest save
            # gets the file name back, the one before it is kept beside it
            _swap(tmp, path)
        displaced_at_tmp = os.stat(tmp).st_ino != written.st_ino
        return False
    finally:
        if displaced_at_tmp:  # another save came between the two swaps (or a swap failed)
            _keep_conflict(path, tmp)
        tmp.unlink(missing_ok=True)
        fsync_dir(path.parent)


def _create(tmp: Path, path: Path, written: os.stat_result) -> bool:
    """Give ``tmp`` the name ``path``, which did not exist when read; False if a person
    created the file meanwhile (nothing written)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    return _done(path, written)


def _swap(tmp: Path, path: Path) -> None:
    """Exchange ``tmp`` and ``path`` (both exist, and exchanging worked once already)."""
    failure = _exchange(tmp, path)
    if failure:
        raise OSError(failure, os.strerror(failure), str(path))


def _done(path: Path, written: os.stat_result) -> bool:
    with _written_lock:
        _written[str(path)] = _key(written)
    return True


def edit_file(
    path: Path,
    lock_dir: Path,
    edit: Callable[[str], str | None],
    *,
    name: str | None = None,
    timeout: float | None = None,
    before_write: Callable[[str, str], None] | None = None,
) -> tuple[str, str]:
    """Apply ``edit`` to the current text of ``path`` by the protocol above; returns (old, new).

    ``edit`` gets the text as it is inside the lock and returns the new text, or None to leave
    the file alone; it may be called again (on a newer text) when a person saved meanwhile.
    Nothing is written when the text does not change. ``name`` names the file in errors.
    ``before_write(old, new)`` runs before each attempt to put a new text in place (the
    history writes its record there). Raises MemoryStoreError when the file stays busy or
    keeps changing for ``timeout`` s (default :data:`OPERATION_SECONDS`).
    """
    name = name or path.name
    timeout = OPERATION_SECONDS if timeout is None else timeout
    deadline = time.monotonic() + timeout
    with file_lock(lock_dir, path, timeout):
        real = path.resolve() if path.is_symlink() else path  # edit the file, keep the link
        while True:
            version = _read_version(real, name)
            if version.settled:
                old = _decode(version.data, name)
                new = edit(old)
                if new is None or new == old:
                    return old, old
                if before_write is not None:
                    before_write(old, new)
                if _commit(real, version, new):
                    return old, new
            if time.monotonic() >= deadline:
                raise MemoryStoreError(
                    f"{name} kept changing (or stayed open for writing) while mindroom "
                    "tried to write it; try again"
                )
            time.sleep(_POLL_SECONDS)


def create_file(path: Path, data: str | bytes) -> bool:
    """Create ``path`` with ``data`` unless it exists (then False, the file untouched): a file
    a person makes at the same moment is never overwritten, and a crash leaves no half file."""
    tmp = write_temp(path, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return True


def clean_temp_files(root: Path, lock_dir: Path) -> int:
    """Remove temp files a crashed writer left under ``root``; returns how many.

    Only names :func:`mindroom.atomic.temp_path` makes for markdown files, each under its
    target's lock (a writer alive right now holds it; it is skipped, not waited for).
    """
    removed = 0
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for file_name in names:
            match = TEMP_NAME_RE.match(file_name)
            if match is None or not match.group("target").endswith(".md"):
                continue
            temp = Path(folder) / file_name
            target = temp.with_name(match.group("target"))
            try:
                with file_lock(lock_dir, target, timeout=0):
                    temp.unlink(missing_ok=True)
                    removed += 1
            except MemoryStoreError:
                continue  # a live writer's temp file
    if removed:
        logger.info("removed %d temp files a crashed write left behind", removed)
    return removed
