"""Logins for homeservers where password registration is off: an agent configured
with an access token and a device ID runs without a password; ``doctor`` says which login each
account uses, and why one failed."""

from __future__ import annotations

import json

import nio
import pytest

from mindroom.cli.doctor import run_doctor
from mindroom.config import parse_config
from tests.support.harness import BotHarness, Human, config_text, joined, unique
from tests.support.scripted_model import ScriptedModel, last_user_text


async def token_of(synapse, name: str) -> tuple[str, str, str]:  # noqa: ANN001
    """A user made as an identity provider would: its ID, an access token and its device."""
    user_id = await synapse.register_user(name, "not-known-to-mindroom")
    client = nio.AsyncClient(
        synapse.url, name, config=nio.AsyncClientConfig(encryption_enabled=False)
    )
    try:
        login = await client.login("not-known-to-mindroom", device_name="issued by the IdP")
        assert isinstance(login, nio.LoginResponse), login
    finally:
        await client.close()
    return user_id, login.access_token, login.device_id


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_an_agent_with_an_access_token_answers_without_a_password(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    user_id, token, device = await token_of(synapse, unique("oidcbot"))
    config = config_text(
        model.base_url,
        {"general": {"rooms": [], "streaming": False}},
        matrix={"logins": {"general": {"access_token": token, "device_id": device}}},
    )
    await bot.start(config)
    assert bot.bot is not None
    account = bot.bot.agents["general"]
    created = await human.client.room_create(invite=[user_id], is_direct=True)
    assert isinstance(created, nio.RoomCreateResponse), created
    await human.wait_for(joined(user_id, created.room_id))
    asked = await human.send(created.room_id, "hello token")
    reply = await human.wait_for_reply(created.room_id, asked)
    checks = await run_doctor(bot.storage / "config.yaml", bot.storage, synapse.url)
    saved = json.loads((bot.storage / "mindroom_data" / "credentials.json").read_text())

    assert account.user_id == user_id  # the configured account, not a registered mindroom_ one
    assert account.client.device_id == device
    assert reply["sender"] == user_id
    assert reply["content"]["body"] == "echo: hello token"
    [login] = [c for c in checks if c.name == "login general"]
    assert login.ok
    assert "access token" in login.detail
    assert device in login.detail
    assert token not in json.dumps(saved)  # the token stays in the config's environment
    [entries] = saved.values()
    assert entries["mindroom_general.token"]["device_id"] == device
    password_login = entries.get("mindroom_general")  # from earlier tests, when they ran
    assert password_login is None or password_login["password"]  # never overwritten
    others = [c for c in checks if c.name == "login router"]
    assert others
    assert "password" in others[0].detail  # the control: other accounts say their own path


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_doctor_says_why_a_token_login_fails(
    bot: BotHarness, model: ScriptedModel, synapse
) -> None:
    config = config_text(
        model.base_url,
        {"general": {"rooms": []}},
        matrix={"logins": {"general": {"access_token": "syt_revoked", "device_id": "GONE"}}},
    )
    path = bot.write_config(config)

    checks = await run_doctor(path, bot.storage, synapse.url)

    [login] = [c for c in checks if c.name == "login general"]
    assert not login.ok
    assert "access token" in login.detail
    assert "M_UNKNOWN_TOKEN" in login.detail
    assert "matrix.logins.general" in login.fix


def test_a_login_for_an_account_mindroom_does_not_run_is_refused_with_its_key() -> None:
    text = config_text(
        "http://127.0.0.1:9/v1",
        {"general": {}},
        matrix={"logins": {"genral": {"access_token": "x", "device_id": "D"}}},
    )
    with pytest.raises(Exception, match="matrix.logins.genral"):
        parse_config(text, "config.yaml")
