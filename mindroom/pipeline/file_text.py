"""The text of a file a person sent, read with bounded work.

A PDF is untrusted input whose cost has nothing to do with its size: a few kilobytes of
compressed content streams shared by every page keep pypdf busy for minutes, and a pure-Python
call cannot be interrupted in a thread. So a PDF is never read in the bot's process. Each one is
read by a child process (``python -m mindroom.pipeline.file_text``) that

* reads at most :attr:`ReadLimits.pages` pages and stops once it has :attr:`ReadLimits.chars`
  characters (the first part is used, and :attr:`FileText.cut` says which limit cut it),
* runs under a memory limit (:data:`WORKER_MEMORY_BYTES`) and a CPU limit, at a lower
  priority than the bot,
* is killed when it runs past :attr:`ReadLimits.seconds` (:class:`FileRefused`).

At most :data:`CONCURRENT_READS` files are read at once per bot process (:class:`ReadSlots`);
the others wait in an asyncio queue holding no thread, so asyncio's default executor, which
recall and the memory tools share, never carries this work.

A plain text file is decoded in the bot's process (linear in its size, which the download
already bounds) and cut to the same character limit.

It does not do OCR, nor read other document kinds (see :mod:`mindroom.pipeline.attachments`).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mindroom.errors import MindroomError
from mindroom.tasks import within

logger = logging.getLogger(__name__)

# files read at once by one bot process; the rest queue (each read is a process on a core)
CONCURRENT_READS = 2
# the address space a reading process may use: a decompression bomb fails, not the machine
WORKER_MEMORY_BYTES = 1024 * 1024 * 1024
_WORKER = "mindroom.pipeline.file_text"


class FileRefused(MindroomError):
    """A file whose text was not read; the message says why, for the person who sent it."""


@dataclass(frozen=True)
class ReadLimits:
    """How much of one file is read (``media.max_pdf_pages``, ``media.max_text_chars`` and
    ``media.read_seconds`` in config.yaml)."""

    pages: int
    chars: int
    seconds: float


@dataclass(frozen=True)
class FileText:
    """The text read from a file: the whole of it unless ``cut`` names the limit that cut it
    (``"pages"`` or ``"chars"``: the first part is given)."""

    text: str
    cut: str | None = None
    pages_read: int = 0
    pages_total: int = 0


class ReadSlots:
    """At most ``limit`` reads at once in this process; the others wait their turn.

    A waiting read holds no thread, only its place in the semaphore's queue.
    """

    def __init__(self, limit: int = CONCURRENT_READS) -> None:
        self._semaphore = asyncio.Semaphore(limit)
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """Reads queued behind the running ones."""
        return self._waiting

    @contextlib.asynccontextmanager
    async def slot(self, name: str) -> AsyncIterator[None]:
        """Hold one slot while reading ``name`` (waiting for it first, if all are taken)."""
        if self._semaphore.locked():
            logger.info("reading %s waits for a free slot (%d waiting)", name, self._waiting + 1)
        self._waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self._waiting -= 1
        try:
            yield
        finally:
            self._semaphore.release()


def text_of_plain(data: bytes, limits: ReadLimits) -> FileText:
    """The text of a plain text file (UTF-8, broken bytes replaced), cut to ``limits.chars``."""
    text = data.decode("utf-8", errors="replace")
    if len(text) > limits.chars:
        return FileText(text[: limits.chars], cut="chars")
    return FileText(text)


async def text_of_pdf(data: bytes, limits: ReadLimits, slots: ReadSlots, name: str) -> FileText:
    """The text of a PDF, read by a child process within ``limits``.

    Raises :class:`FileRefused` when the reader ran out of time (the process is killed) or the
    file cannot be read; cancelling the caller kills the process too.
    """
    limits_argument = json.dumps([limits.pages, limits.chars, limits.seconds])
    command = [sys.executable, "-m", _WORKER, limits_argument]
    pipe = asyncio.subprocess.PIPE
    async with slots.slot(name):
        try:
            process = await asyncio.create_subprocess_exec(
                *command, stdin=pipe, stdout=pipe, stderr=pipe, env=_worker_env()
            )
        except OSError as exc:
            logger.error("cannot start a process to read %s: %s", name, exc)
            raise FileRefused("no reader could be started (see the bot's log)") from exc
        logger.debug("reading %s in process %d", name, process.pid)
        try:
            out, err = await within(process.communicate(data), limits.seconds)
        except TimeoutError:
            logger.warning(
                "reading %s took over %g s: process %d killed", name, limits.seconds, process.pid
            )
            raise FileRefused(
                f"reading it took longer than {limits.seconds:g} seconds, so I stopped"
            ) from None
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    return _answer_of(out, err, process.returncode, name)


def _worker_env() -> dict[str, str]:
    """The environment of a reading process: this process's own ``mindroom`` comes first."""
    source = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([source, path] if path else [source])}


def _answer_of(out: bytes, err: bytes, status: int | None, name: str) -> FileText:
    try:
        answer = json.loads(out)
    except ValueError:
        # killed by the CPU or memory limit, or crashed: the reason is in its stderr
        reason = err[-2000:].decode(errors="replace")
        logger.warning("reading %s failed (exit %s): %s", name, status, reason)
        raise FileRefused("it could not be read within the memory and time allowed") from None
    if "error" in answer:
        logger.warning("cannot read %s: %s", name, answer["error"])
        raise FileRefused(f"it looks damaged ({answer['error']})")
    return FileText(answer["text"], answer["cut"], answer["pages_read"], answer["pages_total"])


def read_pdf(data: bytes, max_pages: int, max_chars: int) -> dict[str, Any]:
    """What a reading process answers: the first pages' text within the limits (blocking)."""
    from pypdf import PdfReader  # only in the reading process

    reader = PdfReader(io.BytesIO(data))
    total = len(reader.pages)
    parts: list[str] = []
    size = read = 0
    for number in range(min(total, max_pages)):
        text = (reader.pages[number].extract_text() or "").strip()
        read += 1
        if text:
            parts.append(text)
            size += len(text) + 2
        if size > max_chars:
            break
    text = "\n\n".join(parts)
    cut = None
    if len(text) > max_chars:
        text, cut = text[:max_chars], "chars"
    elif read < total:
        cut = "pages"
    return {"text": text, "cut": cut, "pages_read": read, "pages_total": total}


def _limit_self(seconds_of_cpu: int) -> None:
    """Bound this reading process's memory and CPU (a backstop to the parent's kill), and
    let the bot's own work go first on a busy machine."""
    import resource

    os.nice(10)
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds_of_cpu, seconds_of_cpu))


def main() -> None:
    """A reading process: the PDF on stdin, ``[max_pages, max_chars, seconds]`` as the argument, the
    answer (or ``{"error": ...}``) as JSON on stdout."""
    max_pages, max_chars, seconds = json.loads(sys.argv[1])
    _limit_self(int(seconds) + 5)
    data = sys.stdin.buffer.read()
    try:
        answer = read_pdf(data, max_pages, max_chars)
    except MemoryError:
        answer = {"error": "it needs too much memory to read"}
    except Exception as exc:  # pypdf raises many kinds for a broken file: all mean "damaged"
        answer = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
