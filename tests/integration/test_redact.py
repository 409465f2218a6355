"""Unit tests for hiding secrets in what the bot posts: config values, errors, any text."""

from __future__ import annotations

import pytest

from mindroom.adapters.matrix.send import edit_content, message_content, notice_content
from mindroom.errors import MemoryStoreError
from mindroom.memory.tools import guard
from mindroom.redact import REDACTED, is_secret_key, redact_config_value, redact_text
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.scripted_model import Reply, ScriptedModel

# -- is_secret_key --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "OPENAI_API_KEY",
        "models.default.api_key",
        "access_token",
        "token",
        "password",
        "db_passwd",
        "client_secret",
        "registration_shared_secret",
        "aws_access_key_id",
        "private_key",
        "credentials",
        "authToken",
        "X-Api-Key",
    ],
)
def test_secret_key_names_are_recognised(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "context_tokens",
        "max_tokens",
        "authorization",  # the config section of who may talk and who is admin
        "admins",
        "allowed_users",
        "id",
        "base_url",
        "private",
        "role",
        "models.default.id",
        "secretary",
        "tokenizer",
        "keyboard",
    ],
)
def test_ordinary_key_names_are_not_secret(key: str) -> None:
    assert not is_secret_key(key)


# -- redact_config_value --------------------------------------------------------------------------


def test_a_secret_key_has_its_value_hidden() -> None:
    assert redact_config_value("models.default.api_key", "hunter2-not-a-key") == REDACTED


def test_a_non_secret_key_keeps_its_value() -> None:
    assert redact_config_value("models.default.id", "gpt-5") == "gpt-5"


def test_secrets_inside_a_subtree_are_hidden_and_the_rest_is_kept() -> None:
    value = {
        "default": {"id": "gpt-5", "api_key": "abc123", "timeout_seconds": 20},
        "local": {"id": "llama", "base_url": "http://127.0.0.1:1/v1"},
    }
    shown = redact_config_value("models", value)
    assert shown == {
        "default": {"id": "gpt-5", "api_key": REDACTED, "timeout_seconds": 20},
        "local": {"id": "llama", "base_url": "http://127.0.0.1:1/v1"},
    }
    assert value["default"]["api_key"] == "abc123"  # the input is not changed


def test_a_secret_key_over_a_mapping_hides_everything_under_it() -> None:
    shown = redact_config_value("credentials", {"user": "bob", "nested": ["x", {"y": "z"}]})
    assert "bob" not in repr(shown)
    assert "z" not in repr(shown)


def test_an_environment_reference_is_shown_because_it_is_not_the_secret() -> None:
    assert redact_config_value("api_key", "${OPENAI_API_KEY}") == "${OPENAI_API_KEY}"
    assert redact_config_value("api_key", "${KEY:-literal}") == REDACTED


def test_a_secret_looking_value_under_any_key_is_hidden() -> None:
    shown = redact_config_value("agents.general.role", "sk-proj-0123456789abcdefABCDEF")
    assert "0123456789abcdef" not in shown


def test_empty_and_non_string_secrets() -> None:
    assert redact_config_value("api_key", None) is None  # nothing to hide
    assert redact_config_value("api_key", "") == ""
    assert redact_config_value("token", 12345) == REDACTED


# -- redact_text ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "secret",
    [
        "sk-0123456789abcdefghijklmnop",
        "sk-proj-AbCdEf0123456789_xyz-QRS",
        "sk-ant-api03-AbCdEf0123456789xyz",
        "ghp_0123456789abcdefghijABCDEFGHIJ0123",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "AKIAIOSFODNN7EXAMPLE",
        "AIzaSyA-0123456789abcdefghijklmnopqrstu",
        "syt_bWluZHJvb21fZ2VuZXJhbA_AbCdEfGhIjKlMnOpQrSt_0AbCdE",
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "glpat-AbCdEfGhIjKlMnOpQrSt",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ],
)
def test_well_known_secret_formats_are_hidden_anywhere_in_text(secret: str) -> None:
    text = f"Error code: 401 - invalid credential {secret} (check it)"
    shown = redact_text(text)
    assert secret not in shown
    assert secret[-8:] not in shown
    assert shown.startswith("Error code: 401 - invalid credential ")
    assert shown.endswith(" (check it)")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("    api_key: hunter2\n    id: gpt", "hunter2"),
        ('{"api_key": "hunter2", "id": "gpt"}', "hunter2"),
        ("{'password': 'hunter2', 'id': 'gpt'}", "hunter2"),
        ("OPENAI_API_KEY=hunter2 python run.py", "hunter2"),
        ("GET https://h/x?access_token=hunter2&limit=1", "hunter2"),
        ("Authorization: Bearer hunter2", "hunter2"),
        ("connect to postgres://bob:hunter2@db.example/x", "hunter2"),
    ],
)
def test_values_assigned_to_secret_keys_are_hidden_in_text(text: str, secret: str) -> None:
    shown = redact_text(text)
    assert secret not in shown
    assert REDACTED in shown


def test_text_without_secrets_is_unchanged() -> None:
    text = (
        "config.yaml: models.default.context_tokens (line 7): Input should be greater than 256\n"
        "Note: the task-list has 3 tokens: a, b, c. See https://example.org/a?b=1 and the "
        "authorization: section; a private: companion; sk-short"
    )
    assert redact_text(text) == text


def test_an_environment_reference_in_text_is_kept() -> None:
    text = "api_key: ${OPENAI_API_KEY}"
    assert redact_text(text) == text
    assert "literal" not in redact_text("api_key: ${KEY:-literal}")


def test_a_private_key_block_is_hidden() -> None:
    text = (
        "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nAAAAb3BlbnNzaC1rZXktdjEAAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----\nok"
    )
    shown = redact_text(text)
    assert "AAAAb3BlbnNzaC1rZXktdjEAAAAA" not in shown
    assert shown.endswith("\nok")


# -- what the bot posts ---------------------------------------------------------------------------


def test_notices_are_posted_without_secrets_and_their_edits_too() -> None:
    text = "⚠️ model failed: Incorrect API key provided: sk-proj-AbCdEf0123456789_xyz"
    for content in (notice_content(text), edit_content("$e", text, msgtype="m.notice")):
        posted = repr(content)
        assert "AbCdEf0123456789" not in posted
        assert "Incorrect API key provided" in posted


def test_agent_replies_keep_their_text() -> None:
    text = "Set `api_key: sk-proj-AbCdEf0123456789_xyz` in your config"
    assert message_content(text)["body"] == text  # the model's answer is the person's to read


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_a_model_error_notice_does_not_show_the_key_it_quotes(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    key = "sk-proj-Zz9Yy8Xx7Ww6Vv5Uu4Tt3"
    room = unique("solo")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    model.push(Reply(status=401, error_message=f"Incorrect API key provided: {key}."))

    asked = await human.send(room_id, "hello")
    reply = await human.wait_for_reply(room_id, asked)

    content = reply["content"]
    assert content["msgtype"] == "m.notice"
    assert "Incorrect API key provided" in content["body"]  # the reason is still shown
    assert key not in content["body"]
    assert key not in content["formatted_body"]
    assert REDACTED in content["body"]  # the key was in the text and was replaced


@pytest.mark.asyncio
@pytest.mark.parametrize("error", [MemoryStoreError, OSError])
async def test_memory_tool_errors_do_not_show_secrets(error: type[Exception]) -> None:
    async def failing() -> str:
        raise error("cannot open sqlite://u:hunter2@h/db with token=abc123def")

    shown = await guard(failing)
    assert shown.startswith("error:")
    assert "cannot open" in shown
    assert "hunter2" not in shown
    assert "abc123def" not in shown
