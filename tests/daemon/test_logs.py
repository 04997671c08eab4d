"""hdsp.daemon.logs: JSON off a terminal, console on one, context, redaction, stdlib."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import re
import uuid
from typing import Any

import anyio
import msgspec
import pytest
import structlog

from hdsp.daemon.logs import (
    REDACTED,
    configure_logging,
    get_logger,
    is_secret_key,
    redact_value,
    register_secret,
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


#: Every test leaves the process's logging as it found it (conftest.py).
pytestmark = pytest.mark.usefixtures("restore_logging")


def unique_secret() -> str:
    """A secret no other test registered, so tests do not depend on each other."""
    return f"s3cr3t-{uuid.uuid4().hex}"


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_when_not_a_tty() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    log = get_logger("hdsp.daemon.test")

    log.info("task started", mode="code", count=3)
    log.warning("second", path="multi\nline")

    first, second = json_lines(stream)
    assert first["event"] == "task started"
    assert first["level"] == "info"
    assert first["logger"] == "hdsp.daemon.test"
    assert first["mode"] == "code"
    assert first["count"] == 3
    # ISO 8601, UTC.
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", first["timestamp"])
    assert list(first)[:4] == ["timestamp", "level", "logger", "event"]
    assert second["level"] == "warning"
    assert second["path"] == "multi\nline"


def test_level_filters_structlog_and_stdlib() -> None:
    stream = io.StringIO()
    configure_logging(level="warning", stream=stream)

    get_logger("hdsp.test").info("hidden")
    logging.getLogger("jupyter_client").info("hidden too")
    get_logger("hdsp.test").error("shown")

    assert [line["event"] for line in json_lines(stream)] == ["shown"]


def test_unknown_level_or_format_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="debug, info, warning, error, critical"):
        configure_logging(level="verbose", stream=io.StringIO())
    with pytest.raises(ValueError, match="auto, json or console"):
        configure_logging(fmt="xml", stream=io.StringIO())  # type: ignore[arg-type]


def test_console_output_on_a_real_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    master, slave = os.openpty()
    try:
        with open(slave, "w", encoding="utf-8", closefd=True) as tty:
            assert tty.isatty()
            configure_logging(stream=tty)
            structlog.contextvars.bind_contextvars(task_id="task-on-tty")
            get_logger("hdsp.daemon.tty").info("hello terminal", rows=12)
            tty.flush()
            raw = b""
            while b"\n" not in raw:
                raw += os.read(master, 4096)
    finally:
        os.close(master)

    text = raw.decode("utf-8")
    assert "\x1b[" in text, "a terminal gets colours"
    plain = _ANSI.sub("", text).strip()
    assert not plain.startswith("{")
    assert "hello terminal" in plain
    assert "[info" in plain
    assert "[hdsp.daemon.tty]" in plain
    assert "rows=12" in plain
    assert "task_id=task-on-tty" in plain


def test_console_forced_off_a_tty_has_no_colours() -> None:
    stream = io.StringIO()
    configure_logging(fmt="console", stream=stream)
    get_logger("hdsp.test").info("plain", a=1)
    text = stream.getvalue()
    assert "\x1b[" not in text
    assert "plain" in text and "a=1" in text


def test_json_forced_is_json() -> None:
    stream = io.StringIO()
    configure_logging(fmt="json", stream=stream)
    get_logger("hdsp.test").info("forced")
    assert json_lines(stream)[0]["event"] == "forced"


def test_bound_contextvars_appear_in_structlog_and_stdlib_lines() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    structlog.contextvars.bind_contextvars(task_id="t-42", client_id="c-7")

    get_logger("hdsp.daemon.tasks").info("step")
    logging.getLogger("jupyter_client.manager").warning("kernel %s restarted", "k-1")

    ours, library = json_lines(stream)
    for line in (ours, library):
        assert line["task_id"] == "t-42"
        assert line["client_id"] == "c-7"
    assert library["event"] == "kernel k-1 restarted"
    assert library["logger"] == "jupyter_client.manager"
    assert library["level"] == "warning"


async def test_context_stays_with_its_own_async_task() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    log = get_logger("hdsp.daemon.tasks")

    async def run(task_id: str) -> None:
        structlog.contextvars.bind_contextvars(task_id=task_id)
        await anyio.lowlevel.checkpoint()
        log.info("running", expected=task_id)

    async with anyio.create_task_group() as tg:
        for task_id in ("a", "b", "c"):
            tg.start_soon(run, task_id)

    lines = json_lines(stream)
    assert len(lines) == 3
    assert all(line["task_id"] == line["expected"] for line in lines)


def test_stdlib_exceptions_are_rendered_as_text() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    try:
        raise RuntimeError("kernel died")
    except RuntimeError:
        logging.getLogger("asyncio").exception("task failed")

    (line,) = json_lines(stream)
    assert line["logger"] == "asyncio"
    assert line["level"] == "error"
    assert "RuntimeError: kernel died" in line["exception"]


def test_secret_keys_are_redacted_at_any_depth() -> None:
    stream = io.StringIO()
    configure_logging(stream=stream)
    profile = {
        "provider": "openai",
        "apiKey": "not-registered-key",
        "headers": {"Authorization": "whatever", "x-api-key": "k", "Accept": "json"},
        "accounts": [{"user": "ana", "password": "hunter2hunter2"}],
        "secret_ref": "keyring:hdsp/openai",
    }

    get_logger("hdsp.daemon.config").info(
        "profile loaded", api_key="plain", profile=profile, max_tokens=4096, access_token="t"
    )

    (line,) = json_lines(stream)
    assert line["api_key"] == REDACTED
    assert line["access_token"] == REDACTED
    assert line["max_tokens"] == 4096
    logged = line["profile"]
    assert logged["apiKey"] == REDACTED
    assert logged["headers"] == {"Authorization": REDACTED, "x-api-key": REDACTED, "Accept": "json"}
    assert logged["accounts"] == [{"user": "ana", "password": REDACTED}]
    assert logged["secret_ref"] == "keyring:hdsp/openai"
    # The caller's own objects are not touched.
    assert profile["apiKey"] == "not-registered-key"


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("api_key", True),
        ("apiKey", True),
        ("OPENAI_API_KEY", True),
        ("x-api-key", True),
        ("Authorization", True),
        ("proxy-authorization", True),
        ("token", True),
        ("refreshToken", True),
        ("client_secret", True),
        ("password", True),
        ("private_key", True),
        ("curve_secret_key", True),
        ("Set-Cookie", True),
        ("max_tokens", False),
        ("input_tokens", False),
        ("token_count", False),
        ("secret_ref", False),
        ("public_key", False),
        ("cache_key", False),
        ("key", False),
        ("event", False),
    ],
)
def test_which_keys_name_secrets(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_registered_secrets_are_redacted_inside_strings() -> None:
    secret = unique_secret()
    register_secret(secret)
    stream = io.StringIO()
    configure_logging(stream=stream)

    get_logger("hdsp.daemon.llm").warning(
        f"request failed with key {secret}",
        detail={"body": [f"echo: {secret}!", 3, None]},
        pair=("x", secret),
    )
    logging.getLogger("openai").error("retrying with %s", secret)

    text = stream.getvalue()
    assert secret not in text
    ours, library = json_lines(stream)
    assert ours["event"] == f"request failed with key {REDACTED}"
    assert ours["detail"] == {"body": [f"echo: {REDACTED}!", 3, None]}
    assert ours["pair"] == ["x", REDACTED]
    assert library["event"] == f"retrying with {REDACTED}"


def test_registered_secret_in_a_traceback_is_redacted() -> None:
    secret = unique_secret()
    register_secret(secret)
    stream = io.StringIO()
    configure_logging(stream=stream)
    try:
        raise PermissionError(f"invalid key {secret}")
    except PermissionError:
        get_logger("hdsp.daemon.llm").exception("provider refused")

    assert secret not in stream.getvalue()
    (line,) = json_lines(stream)
    assert f"PermissionError: invalid key {REDACTED}" in line["exception"]


def test_registered_secret_in_an_objects_repr_is_redacted() -> None:
    secret = unique_secret()
    register_secret(secret)

    class Profile:
        def __repr__(self) -> str:
            return f"Profile(key={secret!r})"

    assert redact_value(Profile()) == f"Profile(key='{REDACTED}')"
    harmless = object()
    assert redact_value(harmless) is harmless


def test_records_with_secret_fields_are_shown_without_them() -> None:
    @dataclasses.dataclass
    class Profile:
        provider: str
        api_key: str

    class WireProfile(msgspec.Struct):
        model: str
        authorization: str

    assert (
        redact_value(Profile("openai", "abc"))
        == f"Profile(provider='openai', api_key={REDACTED!r})"
    )
    assert redact_value(WireProfile("gpt", "Basic x")) == (
        f"WireProfile(model='gpt', authorization={REDACTED!r})"
    )


def test_short_values_are_not_registered() -> None:
    register_secret("abc")  # would blank out every "abc" in the logs
    register_secret("       ")
    assert redact_value("abc def") == "abc def"


def test_surrounding_whitespace_of_a_secret_read_from_a_file_is_ignored() -> None:
    secret = unique_secret()
    register_secret(f"{secret}\n")
    assert redact_value(f"key={secret};") == f"key={REDACTED};"


def test_credential_shapes_are_redacted_without_registration() -> None:
    openai_key = "sk-proj-" + "A1b2C3d4" * 4
    anthropic_key = "sk-ant-api03-" + "x9Y8z7" * 5
    text = (
        f"keys {openai_key} and {anthropic_key}; "
        "header Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig; "
        "url https://ana:pa55word@example.invalid/v1"
    )
    redacted = redact_value(text)
    assert openai_key not in redacted
    assert anthropic_key not in redacted
    assert "eyJhbGci" not in redacted
    assert "pa55word" not in redacted
    assert f"Bearer {REDACTED}" in redacted
    assert f"https://{REDACTED}@example.invalid/v1" in redacted  # the user too: it may be a token
    # Words that merely contain the letters are left alone.
    assert redact_value("task-0123456789abcdefghij") == "task-0123456789abcdefghij"


def test_self_referencing_values_do_not_recurse_forever() -> None:
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    redacted = redact_value(loop)
    assert redacted["name"] == "loop"


def test_configuring_again_replaces_the_handler_and_keeps_others() -> None:
    other = logging.StreamHandler(io.StringIO())
    logging.getLogger().addHandler(other)
    first, second = io.StringIO(), io.StringIO()
    try:
        configure_logging(stream=first)
        log = get_logger("hdsp.test")
        log.info("one")
        configure_logging(stream=second)
        log.info("two")
    finally:
        logging.getLogger().removeHandler(other)

    assert [line["event"] for line in json_lines(first)] == ["one"]
    assert [line["event"] for line in json_lines(second)] == ["two"]
