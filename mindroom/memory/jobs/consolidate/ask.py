"""How the consolidation judge reaches a model: an ``ask(system, user) -> answer`` function.

``ask`` blocks (the judge runs in a worker thread), makes exactly one attempt and raises
:class:`ModelError` with a message for people when it fails: the judge counts a failed call
against its budget and decides itself whether to go on, so nothing here retries.

:func:`model_ask` asks a configured model (``memory.maintenance.consolidation.model``, else
``defaults.model``) through its OpenAI-compatible chat-completions endpoint (providers
``openai`` and ``ollama``), at the endpoint and with the key the agents' client uses:
``base_url``, else ``OPENAI_BASE_URL``, else api.openai.com; ``api_key``, else
``OPENAI_API_KEY``. It is one JSON POST made with the standard library, because the memory
package never imports the model SDKs (``mindroom.adapters.agno`` owns them, see
tests/unit/test_architecture.py) and one non-streaming request needs none of their machinery. The
timeout bounds the connection and each read, as the openai client's does. ``anthropic``
models are not supported here (a :class:`ConfigError` when the ask is built): name an
OpenAI-compatible model or give the job an ``llm_command``.

:func:`command_ask` runs a job's ``llm_command`` (an argv list, no shell): the prompt (system
text, a blank line, the user text) on its stdin, its stdout is the answer. A command still
running at the timeout is killed together with everything it started (its own process group).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shlex
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from mindroom.config.schema import Config
from mindroom.errors import ConfigError, ModelError
from mindroom.redact import redact_text

Ask = Callable[[str, str], str]

_OLLAMA_URL = "http://localhost:11434/v1"
_OPENAI_URL = "https://api.openai.com/v1"
_TAIL = 400  # characters of a failing command's stderr or an error body quoted in the error
_REAP_S = 5.0  # after the kill: how long to wait for the pipes to close


def _tail(data: bytes | str | None) -> str:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data or ""
    text = " ".join(text.split())
    if len(text) > _TAIL:
        text = "..." + text[-_TAIL:]
    return redact_text(text)


# -- a configured model -------------------------------------------------------------------


def model_ask(
    config: Config,
    model_key: str | None,
    timeout: float | None = None,
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> Ask:
    """An ``ask`` for configured model ``model_key`` (None: the consolidation model, else the
    default model). ``timeout`` (seconds) is capped by the model's ``timeout_seconds``;
    ``temperature`` (default: the model's) and ``max_tokens`` bound a budgeted call.

    Raises :class:`ConfigError` when the model is not configured or not OpenAI-compatible.
    """
    setting = config.memory.maintenance.consolidation.model
    key = model_key or setting or config.defaults.model
    if key not in config.models:
        which = "memory.maintenance.consolidation.model" if key == setting else "defaults.model"
        known = ", ".join(sorted(config.models)) or "none defined"
        raise ConfigError(f"{which}: unknown model {key!r} (models: {known})")
    model = config.chat_model(key)
    if model.provider == "anthropic":
        raise ConfigError(
            f"models.{key}: memory consolidation asks OpenAI-compatible models only, not "
            "anthropic; set memory.maintenance.consolidation.model to an openai or ollama "
            "model, or give the job an llm_command"
        )
    if model.provider == "ollama":
        base = model.base_url or _OLLAMA_URL
        api_key: str | None = model.api_key or "ollama"
    else:
        base = model.base_url or os.environ.get("OPENAI_BASE_URL") or _OPENAI_URL
        api_key = model.api_key or os.environ.get("OPENAI_API_KEY")
    url = base.rstrip("/") + "/chat/completions"
    seconds = model.timeout_seconds if timeout is None else min(timeout, model.timeout_seconds)
    where = f"model {key} ({model.id} at {redact_text(base)})"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"

    def ask(system: str, user: str) -> str:
        body: dict[str, Any] = {
            "model": model.id,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "stream": False,
        }
        chosen = temperature if temperature is not None else model.temperature
        if chosen is not None:
            body["temperature"] = chosen
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        request = urllib.request.Request(
            url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
        )
        return _answer(_post(request, seconds, where), where)

    return ask


def _post(request: urllib.request.Request, timeout: float, where: str) -> bytes:
    """The body of the answer to ``request``; :class:`ModelError` for every failure."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as exc:
        detail = ""
        with contextlib.suppress(OSError, http.client.HTTPException):
            detail = _error_detail(exc.read())
        raise ModelError(f"{where} answered HTTP {exc.code}: {detail or exc.reason}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise ModelError(f"{where} did not answer within {timeout:g} s") from None
        raise ModelError(f"{where} could not be reached: {exc.reason}") from None
    except TimeoutError:
        raise ModelError(f"{where} did not answer within {timeout:g} s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise ModelError(f"{where} failed: {exc}") from None


def _error_detail(raw: bytes) -> str:
    """An OpenAI-shaped error body's message, else the body's end."""
    try:
        message = json.loads(raw)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return _tail(raw)
    return _tail(str(message))


def _answer(raw: bytes, where: str) -> str:
    """The assistant text of a chat completion."""
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ModelError(f"{where} sent no chat completion: {_tail(raw)!r}") from None
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str) or not content.strip():
        raise ModelError(f"{where} returned an empty answer")
    return content


# -- an external command ------------------------------------------------------------------


def command_ask(argv: Sequence[str], timeout: float) -> Ask:
    """An ``ask`` that runs ``argv`` (no shell) per prompt: prompt on stdin, answer on stdout.

    A non-zero exit, a command that cannot start, or one still running after ``timeout``
    seconds (it is killed, with its children) raises :class:`ModelError` quoting the end of
    its stderr.
    """
    command = list(argv)
    if not command:
        raise ConfigError("llm_command is empty")
    name = redact_text(shlex.join(command))

    def ask(system: str, user: str) -> str:
        prompt = f"{system}\n\n{user}\n".encode()
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: the kill reaches its children
            )
        except OSError as exc:
            raise ModelError(f"llm_command {name} could not start: {exc}") from None
        try:
            out, err = process.communicate(prompt, timeout=timeout)
        except subprocess.TimeoutExpired:
            err = _kill(process)
            stderr = _tail(err)
            raise ModelError(
                f"llm_command {name} did not answer within {timeout:g} s and was killed"
                + (f"; stderr: {stderr}" if stderr else "")
            ) from None
        except BaseException:  # interrupted: never leave the command running
            _kill(process)
            raise
        if process.returncode != 0:
            stderr = _tail(err)
            raise ModelError(
                f"llm_command {name} exited with {process.returncode}"
                + (f"; stderr: {stderr}" if stderr else "")
            )
        return out.decode("utf-8", errors="replace")

    return ask


def _kill(process: subprocess.Popen[bytes]) -> bytes:
    """Kill ``process`` and its process group; what it wrote to stderr so far."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:  # pragma: no cover - not POSIX
            process.kill()
    try:
        _, err = process.communicate(timeout=_REAP_S)
    except subprocess.TimeoutExpired:  # a child that left the group still holds the pipes
        process.kill()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        process.wait()
        return b""
    return err or b""
