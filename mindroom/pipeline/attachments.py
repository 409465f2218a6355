"""What the model is given for a file sent to an agent.

* An image goes to the model as image input (Agno's ``images``: a vision model sees it); the
  caption, if any, is the message.
* A text file (plain text, markdown, CSV, JSON, source code) or a PDF is read and its text
  given with the message. The work is bounded (:mod:`mindroom.pipeline.file_text`): a PDF is read
  in a
  child process, at most ``media.max_pdf_pages`` pages and ``media.max_text_chars``
  characters, killed after ``media.read_seconds``, a few at a time. A file cut by a limit is
  answered from its first part and the person gets a notice saying so; one that ran out of
  time or cannot be read is refused with a notice saying why.
* A voice message is transcribed when ``media.speech_to_text`` names an OpenAI-compatible
  transcription endpoint (:mod:`mindroom.adapters.agno.speech`), and the transcript is the message.
* Anything else (voice without speech-to-text, videos, other documents), a file over
  ``media.max_bytes`` or one that cannot be fetched or read gets a notice saying why, never
  silence.

The file is read for the turn and passes into the conversation like any message: a private
companion's conversation with a person is that person's alone, so is what they sent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import PurePosixPath

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.events import Attachment
from mindroom.adapters.matrix.media import MediaError
from mindroom.config.schema import MediaConfig, SpeechEndpoint
from mindroom.errors import ModelError
from mindroom.pipeline.file_text import (
    FileRefused,
    FileText,
    ReadLimits,
    ReadSlots,
    text_of_pdf,
    text_of_plain,
)

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset(
    {
        ".txt",
        ".md",
        ".markdown",
        ".csv",
        ".tsv",
        ".json",
        ".yaml",
        ".yml",
        ".toml",
        ".log",
        ".py",
        ".js",
        ".ts",
        ".html",
        ".xml",
        ".ini",
        ".cfg",
        ".rst",
        ".sql",
        ".sh",
    }
)
TEXT_TYPES = ("text/", "application/json", "application/x-yaml", "application/xml")


@dataclass(frozen=True)
class TurnInput:
    """What a turn is given for a message with a file, or why it cannot be."""

    text: str = ""
    images: tuple[bytes, ...] = ()
    problem: str | None = None  # a notice to post instead of answering
    cut: str | None = None  # a notice to post before answering from the file's first part


def _is_text(attachment: Attachment) -> bool:
    suffix = PurePosixPath(attachment.name.lower()).suffix
    return suffix in TEXT_SUFFIXES or attachment.mimetype.startswith(TEXT_TYPES)


def _is_pdf(attachment: Attachment) -> bool:
    return attachment.mimetype == "application/pdf" or attachment.name.lower().endswith(".pdf")


def limits_of(media: MediaConfig) -> ReadLimits:
    """How much of one file is read, as ``media`` configures it."""
    return ReadLimits(media.max_pdf_pages, media.max_text_chars, media.read_seconds)


def with_file_text(caption: str, name: str, read: FileText, limits: ReadLimits) -> str:
    """The message as the model reads it: the caption, then the file's text (cut, and said)."""
    note = ""
    if read.cut == "chars":
        note = f", cut to its first {limits.chars:,} characters"
    elif read.cut == "pages":
        note = f", only its first {read.pages_read} of {read.pages_total} pages"
    header = f"[{name!r} is attached; its text follows{note}]"
    return "\n\n".join(part for part in (caption, header, read.text) if part)


def cut_notice(what: str, read: FileText, limits: ReadLimits) -> str | None:
    """What the person is told when only the first part of their file is used."""
    if read.cut == "pages":
        return (
            f"ℹ️ {what} has {read.pages_total} pages: I read only the first {read.pages_read} "
            f"(the limit per file is {limits.pages}) and answer from those."
        )
    if read.cut == "chars":
        return (
            f"ℹ️ {what} is long: I read only its first {limits.chars:,} characters (the limit "
            "per file) and answer from those."
        )
    return None


async def read_attachment(
    account: MatrixAccount,
    attachment: Attachment,
    caption: str,
    media: MediaConfig,
    slots: ReadSlots,
    *,
    speech: SpeechEndpoint | None = None,
) -> TurnInput:
    """The turn input of a message carrying ``attachment`` (see the module docstring); PDFs
    are read one of ``slots`` at a time, voice messages transcribed by ``speech`` (the
    resolved ``media.speech_to_text``; None: they are not)."""
    what = f"**{attachment.name}**"
    if attachment.kind == "audio" and speech is not None:
        return await _voice(account, attachment, caption, media, speech)
    if attachment.kind in ("audio", "video"):
        kind = "videos"
        if attachment.kind == "audio":
            kind = "voice messages (no speech-to-text is configured)"
        return TurnInput(
            problem=f"I cannot listen to or watch {kind} ({what}): please "
            "write it, or send a transcript as a text file."
        )
    readable = attachment.kind == "image" or _is_text(attachment) or _is_pdf(attachment)
    if not readable:
        kind = attachment.mimetype or "this kind of file"
        return TurnInput(
            problem=f"I cannot read {what} ({kind}): send text, markdown, a PDF or an image."
        )
    try:
        data = await account.download(attachment, media.max_bytes)
    except MediaError as exc:
        logger.warning("cannot fetch %s (%s): %s", attachment.url, attachment.name, exc)
        return TurnInput(problem=f"I could not fetch {what}: {exc}.")
    if attachment.kind == "image":
        return TurnInput(caption or f"[The person sent the image {attachment.name!r}.]", (data,))
    limits = limits_of(media)
    try:
        if _is_pdf(attachment):
            read = await text_of_pdf(data, limits, slots, attachment.name)
        else:
            read = text_of_plain(data, limits)
    except FileRefused as exc:
        return TurnInput(problem=f"I could not read {what}: {exc}.")
    if not read.text.strip():
        return TurnInput(problem=f"I found no text in {what} (a scanned PDF has only images).")
    return TurnInput(
        with_file_text(caption, attachment.name, read, limits),
        cut=cut_notice(what, read, limits),
    )


async def _voice(
    account: MatrixAccount,
    attachment: Attachment,
    caption: str,
    media: MediaConfig,
    speech: SpeechEndpoint,
) -> TurnInput:
    """A voice message, transcribed (``media.speech_to_text``)."""
    from mindroom.adapters.agno.speech import transcribe  # the transcription client: on first use

    what = f"**{attachment.name}**"
    try:
        audio = await account.download(attachment, media.max_bytes)
        spoken = await transcribe(speech, audio, attachment.name)
    except (MediaError, ModelError) as exc:
        logger.warning("cannot transcribe %s: %s", attachment.name, exc)
        return TurnInput(problem=f"I could not transcribe {what}: {exc}.")
    if not spoken:
        return TurnInput(problem=f"I heard no words in {what}.")
    header = f"[A voice message, transcribed: {attachment.name!r}]"
    return TurnInput("\n\n".join(part for part in (caption, header, spoken) if part))
