"""Files sent to agents: images reach the model as image input, text files and
PDFs as text, and what cannot be read gets a notice. Real Synapse with authenticated media,
the scripted model; the encrypted case with an encrypting client."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import nio
import pytest

from tests.support.harness import DECRYPTED, BotHarness, Human, config_text, joined
from tests.support.scripted_model import ScriptedModel, all_text, last_user_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

PNG = base64.b64decode(  # a 1x1 red pixel
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def pdf_with(text: str) -> bytes:
    """A one-page PDF showing ``text`` (Helvetica), built by hand with a correct xref."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


async def upload(human: Human, data: bytes, mimetype: str, name: str) -> str:
    response, _ = await human.client.upload(
        io.BytesIO(data), content_type=mimetype, filename=name, filesize=len(data)
    )
    assert isinstance(response, nio.UploadResponse), response
    return response.content_uri


async def send_file(
    human: Human,
    room_id: str,
    msgtype: str,
    data: bytes,
    mimetype: str,
    name: str,
    caption: str = "",
) -> str:
    url = await upload(human, data, mimetype, name)
    content: dict[str, Any] = {
        "msgtype": msgtype,
        "body": caption or name,
        "filename": name,
        "url": url,
        "info": {"mimetype": mimetype, "size": len(data)},
    }
    sent = await human.client.room_send(room_id, "m.room.message", content)
    assert isinstance(sent, nio.RoomSendResponse), sent
    return sent.event_id


async def dm_with(bot: BotHarness, human: Human, model: ScriptedModel, **media: Any) -> str:
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    agents = {"general": {"rooms": [], "streaming": False}}
    await bot.start(config_text(model.base_url, agents, **({"media": media} if media else {})))
    assert bot.bot is not None
    agent = bot.bot.agents["general"].user_id
    created = await human.client.room_create(invite=[agent], is_direct=True)
    assert isinstance(created, nio.RoomCreateResponse), created
    await human.wait_for(joined(agent, created.room_id))
    return created.room_id


def image_parts(request: dict) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in request["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


async def test_an_image_with_a_caption_reaches_the_model_as_image_input(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room_id = await dm_with(bot, human, model)
    sent = await send_file(
        human, room_id, "m.image", PNG, "image/png", "red.png", caption="what colour is this?"
    )
    reply = await human.wait_for_reply(room_id, sent)

    [image] = image_parts(model.requests[-1])
    assert base64.b64encode(PNG).decode() in image  # the very bytes, fetched with the token
    assert "what colour is this?" in all_text(model.requests[-1])
    assert reply["content"]["msgtype"] == "m.text"


async def test_a_pdf_and_a_markdown_file_are_read_as_text(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room_id = await dm_with(bot, human, model)
    pdf = await send_file(
        human,
        room_id,
        "m.file",
        pdf_with("Invoice total 4711 EUR"),
        "application/pdf",
        "invoice.pdf",
        caption="sum this up",
    )
    await human.wait_for_reply(room_id, pdf)
    pdf_request = all_text(model.requests[-1])
    notes = await send_file(
        human, room_id, "m.file", b"# Plan\n\n- buy milk\n", "text/markdown", "notes.md"
    )
    await human.wait_for_reply(room_id, notes)
    notes_request = all_text(model.requests[-1])

    assert "Invoice total 4711 EUR" in pdf_request
    assert "sum this up" in pdf_request
    assert "'invoice.pdf' is attached" in pdf_request
    assert "- buy milk" in notes_request


async def test_big_files_voice_and_unknown_types_get_a_notice_never_silence(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room_id = await dm_with(bot, human, model, max_bytes=1000)
    big = await send_file(human, room_id, "m.file", b"x" * 5000, "text/plain", "big.txt")
    voice = await send_file(
        human, room_id, "m.audio", b"OggS" + bytes(100), "audio/ogg", "voice.ogg"
    )
    odd = await send_file(human, room_id, "m.file", b"PK\x03\x04", "application/zip", "a.zip")
    small = await send_file(human, room_id, "m.file", b"fine", "text/plain", "ok.txt")

    notices = {e: (await human.wait_for_reply(room_id, e))["content"] for e in (big, voice, odd)}
    answered = await human.wait_for_reply(room_id, small)  # the control: a small file is read

    assert "over the 1 kB limit" in notices[big]["body"]
    assert "voice messages" in notices[voice]["body"]
    assert "cannot read **a.zip**" in notices[odd]["body"]
    assert all(n["msgtype"] == "m.notice" for n in notices.values())
    assert answered["content"]["msgtype"] == "m.text"
    assert all("x" * 100 not in all_text(r) for r in model.requests)  # the big file never went


async def test_a_file_in_an_encrypted_dm_is_decrypted_and_read(
    bot: BotHarness, model: ScriptedModel, synapse, tmp_path: Path
) -> None:
    person = await Human.create(synapse, keys=tmp_path / "keys")
    try:
        model.set_handler(lambda request: f"echo: {last_user_text(request)}")
        agents = {"general": {"rooms": [], "streaming": False}}
        await bot.start(config_text(model.base_url, agents))
        assert bot.bot is not None
        agent = bot.bot.agents["general"].user_id
        created = await person.client.room_create(
            invite=[agent],
            is_direct=True,
            initial_state=[nio.EnableEncryptionBuilder().as_dict()],
        )
        assert isinstance(created, nio.RoomCreateResponse), created
        await person.wait_for(joined(agent, created.room_id))
        secret = b"the vault code is 0451\n"
        response, keys = await person.client.upload(
            io.BytesIO(secret),
            content_type="text/plain",
            filename="code.txt",
            encrypt=True,
            filesize=len(secret),
        )
        assert isinstance(response, nio.UploadResponse), response
        content = {
            "msgtype": "m.file",
            "body": "code.txt",
            "filename": "code.txt",
            "info": {"mimetype": "text/plain", "size": len(secret)},
            "file": {**keys, "url": response.content_uri},
        }
        sent = await person.client.room_send(
            created.room_id, "m.room.message", content, ignore_unverified_devices=True
        )
        assert isinstance(sent, nio.RoomSendResponse), sent
        reply = await person.wait_for_reply(created.room_id, sent.event_id, timeout=40)
    finally:
        await person.close()

    assert "the vault code is 0451" in all_text(model.requests[-1])
    assert reply.get(DECRYPTED)


async def test_a_voice_message_is_transcribed_when_speech_to_text_is_configured(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    model.transcript = "please book a table for two"
    room_id = await dm_with(
        bot, human, model, speech_to_text={"base_url": model.base_url, "model": "whisper-1"}
    )
    voice = b"OggS" + bytes(200)
    sent = await send_file(human, room_id, "m.audio", voice, "audio/ogg", "voice.ogg")
    reply = await human.wait_for_reply(room_id, sent)

    [upload] = model.transcription_requests
    assert voice in upload  # the audio itself went to the endpoint
    assert b"whisper-1" in upload
    assert "please book a table for two" in all_text(model.requests[-1])
    assert "voice message, transcribed" in all_text(model.requests[-1])
    assert reply["content"]["msgtype"] == "m.text"
