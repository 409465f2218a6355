"""What the model is given for a file sent to an agent (issue 17.2).

* An image goes to the model as image input (Agno's ``images``: a vision model sees it); the
  caption, if any, is the message.
* A text file (plain text, markdown, CSV, JSON, source code) or a PDF is read and its text
  given with the message, cut to ``media.max_text_chars`` (the cut is said).
* A voice message is transcribed when ``media.speech_to_text`` names an OpenAI-compatible
  transcription endpoint (:mod:`mindroom.agents.speech`), and the transcript is the message.
* Anything else (voice without speech-to-text, videos, other documents), a file over
  ``media.max_bytes`` or one that cannot be fetched or read gets a notice saying why, never
  silence.

The file is read for the turn and passes into the conversation like any message: a private
companion's conversation with a person is that person's alone, so is what they sent.
"""

from __future__ import annotations

import asyncio
import io
import logging
from dataclasses import dataclass
from pathlib import PurePosixPath

from mindroom.config.schema import MediaConfig
from mindroom.errors import ModelError
from mindroom.matrix.client import MatrixAccount
from mindroom.matrix.events import Attachment
from mindroom.matrix.media import MediaError

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset(
    {".txt", ".md", ".markdown", ".csv", ".tsv", ".json", ".yaml", ".yml", ".toml", ".log",
     ".py", ".js", ".ts", ".html", ".xml", ".ini", ".cfg", ".rst", ".sql", ".sh"}
)  # fmt: skip
TEXT_TYPES = ("text/", "application/json", "application/x-yaml", "application/xml")


@dataclass(frozen=True)
class TurnInput:
    """What a turn is given for a message with a file, or why it cannot be."""

    text: str = ""
    images: tuple[bytes, ...] = ()
    problem: str | None = None  # a notice to post instead of answering


def _is_text(attachment: Attachment) -> bool:
    suffix = PurePosixPath(attachment.name.lower()).suffix
    return suffix in TEXT_SUFFIXES or attachment.mimetype.startswith(TEXT_TYPES)


def _is_pdf(attachment: Attachment) -> bool:
    return attachment.mimetype == "application/pdf" or attachment.name.lower().endswith(".pdf")


def pdf_text(data: bytes) -> str:
    """The text of a PDF's pages (blocking: call it in a thread)."""
    from pypdf import PdfReader  # imported on the first PDF only

    reader = PdfReader(io.BytesIO(data))
    return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()


def with_file_text(caption: str, name: str, text: str, limit: int) -> str:
    """The message as the model reads it: the caption, then the file's text (cut, and said)."""
    cut = len(text) > limit
    note = f", cut to its first {limit:,} characters" if cut else ""
    header = f"[{name!r} is attached; its text follows{note}]"
    return "\n\n".join(part for part in (caption, header, text[:limit]) if part)


async def read_attachment(
    account: MatrixAccount, attachment: Attachment, caption: str, media: MediaConfig
) -> TurnInput:
    """The turn input of a message carrying ``attachment`` (see the module docstring)."""
    what = f"**{attachment.name}**"
    if attachment.kind == "audio" and media.speech_to_text is not None:
        return await _voice(account, attachment, caption, media)
    if attachment.kind in ("audio", "video"):
        kind = "videos"
        if attachment.kind == "audio":
            kind = "voice messages (no speech-to-text is configured)"
        return TurnInput(problem=f"I cannot listen to or watch {kind} ({what}): please "
                                 "write it, or send a transcript as a text file.")  # fmt: skip
    readable = attachment.kind == "image" or _is_text(attachment) or _is_pdf(attachment)
    if not readable:
        kind = attachment.mimetype or "this kind of file"
        return TurnInput(problem=f"I cannot read {what} ({kind}): send text, markdown, a PDF "
                                 "or an image.")  # fmt: skip
    try:
        data = await account.download(attachment, media.max_bytes)
    except MediaError as exc:
        logger.warning("cannot fetch %s (%s): %s", attachment.url, attachment.name, exc)
        return TurnInput(problem=f"I could not fetch {what}: {exc}.")
    if attachment.kind == "image":
        return TurnInput(caption or f"[The person sent the image {attachment.name!r}.]", (data,))
    try:
        if _is_pdf(attachment):
            text = await asyncio.to_thread(pdf_text, data)
        else:
            text = data.decode("utf-8", errors="replace")
    except Exception as exc:  # a broken file: say so, never crash the turn
        logger.warning("cannot read %s: %s", attachment.name, exc)
        return TurnInput(problem=f"I could not read {what}: it looks damaged ({exc}).")
    if not text.strip():
        return TurnInput(problem=f"I found no text in {what} (a scanned PDF has only images).")
    return TurnInput(with_file_text(caption, attachment.name, text, media.max_text_chars))


async def _voice(
    account: MatrixAccount, attachment: Attachment, caption: str, media: MediaConfig
) -> TurnInput:
    """A voice message, transcribed (``media.speech_to_text``)."""
    from mindroom.agents.speech import transcribe  # the transcription client: on first use

    assert media.speech_to_text is not None
    what = f"**{attachment.name}**"
    try:
        audio = await account.download(attachment, media.max_bytes)
        spoken = await transcribe(media.speech_to_text, audio, attachment.name)
    except (MediaError, ModelError) as exc:
        logger.warning("cannot transcribe %s: %s", attachment.name, exc)
        return TurnInput(problem=f"I could not transcribe {what}: {exc}.")
    if not spoken:
        return TurnInput(problem=f"I heard no words in {what}.")
    header = f"[A voice message, transcribed: {attachment.name!r}]"
    return TurnInput("\n\n".join(part for part in (caption, header, spoken) if part))
