"""Secrets on a command line are masked in every spelling, and an API key that cannot be a
header is refused at start-up in one line that does not show it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.cli import spectui as _spectui
from spectui.config import SettingsError, load_settings
from spectui.core.llama.launch import redacted
from spectui.core.llama.secrets import (
    SECRET_FLAGS,
    ApiKeyError,
    api_key_problem,
    check_api_key,
    is_secret_flag,
    mask_argv,
)
from spectui.core.sessions.file import REDACTED, redact_flags

HELP = Path(__file__).resolve().parent.parent / "fixtures" / "help.txt"
_FLAG_LINE = re.compile(r"^(-\S.*?)(?:\s{2,}|$)")


def help_flags() -> dict[str, str]:
    """Every flag ``--help`` lists, with its value placeholder ('' for a switch)."""
    flags: dict[str, str] = {}
    for line in HELP.read_text().splitlines():
        match = _FLAG_LINE.match(re.sub(r",\s+", ", ", line))
        if match is None:
            continue
        for part in match.group(1).split(","):
            words = part.strip().split(" ", 1)
            if words[0].startswith("-"):
                flags[words[0]] = words[1] if len(words) > 1 else ""
        # the placeholder is on the last spelling: give it to the aliases too
        last = flags[words[0]] if words[0].startswith("-") else ""
        for part in match.group(1).split(","):
            name = part.strip().split(" ", 1)[0]
            if name.startswith("-") and not flags.get(name):
                flags[name] = last
    return flags


def test_every_secret_flag_the_binary_lists_is_masked() -> None:
    flags = help_flags()
    assert {"--api-key", "--hf-token", "-hft", "--api-key-file", "--ssl-key-file"} <= set(flags)
    secret = {name for name, value in flags.items() if value.split(" ")[0] in ("KEY", "TOKEN")}
    assert secret == {"--api-key", "--hf-token", "-hft"}
    assert all(is_secret_flag(name) for name in secret | SECRET_FLAGS)
    # Paths to files holding a secret are not secrets themselves; nothing else is masked.
    others = set(flags) - secret - {"--mcp-servers-json"}
    assert [name for name in sorted(others) if is_secret_flag(name)] == []


def test_both_forms_and_url_credentials() -> None:
    argv = ["llama-server", "-hft", "hf_abc", "--hf-token=hf_def", "-hft=hf_ghi",
            "--api-key", "k1,k2", "--api-key-file", "/keys.txt", "--ssl-key-file=/k.pem",
            "-mu", "https://user:pw@example.org/m.gguf",
            "--mcp-servers-json", '{"t": "x"}']  # fmt: skip
    shown = redacted(argv)
    for secret in ("hf_abc", "hf_def", "hf_ghi", "k1", "pw@", '"t"'):
        assert secret not in shown
    assert "/keys.txt" in shown and "--ssl-key-file=/k.pem" in shown
    assert "https://***@example.org/m.gguf" in shown
    assert redact_flags(["--hf-token", "x"]) == ["--hf-token", REDACTED]


_SECRET_SPELLINGS = sorted(SECRET_FLAGS | {"--upstream-token", "--db-password"})
_secrets = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=6).map(
    lambda s: f"SECRET{s}"
)
_plain = st.sampled_from(["-m", "model.gguf", "--ctx-size", "512", "-t", "2", "--api-key-file",
                          "/k.txt", "--metrics", "x=y", "-"])  # fmt: skip


@st.composite
def command_lines(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    argv: list[str] = ["llama-server"]
    secrets: list[str] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["plain", "space", "equals", "url"]))
        if kind == "plain":
            argv.append(draw(_plain))
            continue
        secret = draw(_secrets)
        secrets.append(secret)
        flag = draw(st.sampled_from(_SECRET_SPELLINGS))
        if kind == "space":
            argv += [flag, secret]
        elif kind == "equals":
            argv.append(f"{flag}={secret}")
        else:
            argv += ["--model-url", f"https://me:{secret}@host/m.gguf"]
    return argv, secrets


@given(command_lines())
def test_no_secret_survives_masking(case: tuple[list[str], list[str]]) -> None:
    argv, secrets = case
    for shown in (redacted(argv), " ".join(redact_flags(argv)), " ".join(mask_argv(argv))):
        assert not [secret for secret in secrets if secret in shown]
    assert len(mask_argv(argv)) == len(argv)  # masking replaces values, never shifts flags


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("sk-x\r", "line break"),
        ("sk-x\n", "line break"),
        ("sk-x\r\n", "line break"),
        (" sk-x", "whitespace"),
        ("sk-x ", "whitespace"),
        ("sk x", "a space"),
        ("sk-\tx", "a tab"),
        ("sk-é", "U+00E9"),
        ("sk-\x00", "U+0000"),
        ("sk-\u200b", "U+200B"),
    ],
)
def test_malformed_key_is_refused_without_repeating_it(key: str, why: str) -> None:
    problem = api_key_problem(key)
    assert problem is not None and why in problem and key.strip() not in problem
    with pytest.raises(ApiKeyError) as caught:
        check_api_key(key, "--api-key")
    assert "sk" not in str(caught.value) and "\n" not in str(caught.value)


def test_good_keys_pass() -> None:
    for key in ("sk-abc123", "k1,k2", "A~!@#$%^&*()_+={}[]|:;'<>?/.`"):
        assert api_key_problem(key) is None
        check_api_key(key)
    check_api_key(None)


def test_settings_refuse_a_malformed_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECTUI_API_KEY", "sk-from-crlf-file\r")
    with pytest.raises(SettingsError, match="line break") as caught:
        load_settings()
    assert "sk-from" not in str(caught.value)
    monkeypatch.setenv("SPECTUI_API_KEY", "")
    assert load_settings().api_key is None


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["proxy", "--url", "http://127.0.0.1:9", "--upstream-api-key", "sk-x\r"], {}),
        (["proxy", "--url", "http://127.0.0.1:9"], {"SPECTUI_API_KEY": "sk-x\r\n"}),
        (["stream", "--url", "http://127.0.0.1:9", "--api-key", " sk-x"], {}),
        (["proxy", "--url", "http://127.0.0.1:9", "--api-key", "sk-x\r"], {}),
        (["proxy", "--url", "http://127.0.0.1:9"], {"SPECTUI_PROXY_API_KEY": "sk-x "}),
    ],
)
def test_cli_refuses_a_malformed_key_at_start(args: list[str], env: dict[str, str]) -> None:
    done = _spectui(*args, env=env)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode != 0
    assert len(lines) == 1, done.stderr
    assert "cannot be used" in lines[0] and "sk-x" not in done.stderr + done.stdout


def test_secret_values_of_the_server_arguments_are_masked_in_sessions() -> None:
    from spectui.app_setup import secrets_of
    from spectui.config import Settings

    settings = Settings(server_args=["-hft", "hf_a", "--api-key=k2", "-mu", "https://u:p@h/m"])
    assert set(secrets_of(settings)) == {"hf_a", "k2", "u:p"}


def test_an_unparseable_setting_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # (pydantic-settings cannot even parse an empty list-valued variable: its own error type,
    # which reached the CLI as "unexpected error" with a crash file)
    monkeypatch.setenv("SPECTUI_SERVER_ARGS", "")
    with pytest.raises(SettingsError, match="server_args") as caught:
        load_settings()
    assert "\n" not in str(caught.value)
