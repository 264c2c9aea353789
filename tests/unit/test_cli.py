"""Command-line parsing and settings precedence: defaults < TOML < env < flags."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pydantic import BaseModel

from spectui.cli import build_parser, main, settings_from, split_extra
from spectui.commands.common import GENERATION_FLAGS
from spectui.commands.launch_options import NOT_FLAG_SETTINGS, add_launch_options
from spectui.commands.stream import StreamOptions
from spectui.config import Settings


def parse(*argv: str):
    own, extra = split_extra(argv)
    args = build_parser().parse_args(own)
    return args, settings_from(args, extra)


def test_options_before_and_after_the_command(tmp_path: Path) -> None:
    _, settings = parse("--model", "a.gguf", "stream", "--prompt", "x")
    assert settings.model == Path("a.gguf")
    _, settings = parse("stream", "--model", "b.gguf", "--prompt", "x")
    assert settings.model == Path("b.gguf")


def test_extra_server_args_after_double_dash() -> None:
    _, settings = parse("stream", "--prompt", "x", "--", "--threads", "2")
    assert settings.server_args == ["--threads", "2"]


def test_precedence_toml_env_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text('spec_type = "ngram-mod"\nn_predict = 99\ntheme = "spectui-light"\n')
    monkeypatch.setenv("SPECTUI_CONFIG", str(config))
    _, settings = parse()
    assert (settings.spec_type, settings.n_predict, settings.theme) == (
        "ngram-mod",
        99,
        "spectui-light",
    )
    monkeypatch.setenv("SPECTUI_N_PREDICT", "50")
    _, settings = parse()
    assert settings.n_predict == 50
    assert settings.spec_type == "ngram-mod"
    _, settings = parse("--n-predict", "7", "--spec-type", "none")
    assert (settings.n_predict, settings.spec_type) == (7, "none")


def test_api_key_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    _, settings = parse("--url", "http://127.0.0.1:1", "--api-key", "hunter2")
    assert settings.api_key is not None
    assert "hunter2" not in repr(settings)
    assert settings.api_key.get_secret_value() == "hunter2"


def test_bad_setting_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SPECTUI_N_PREDICT", "lots")
    assert main(["stream", "--prompt", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "n_predict" in err


def test_broken_toml_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("this is = = not toml")
    monkeypatch.setenv("SPECTUI_CONFIG", str(config))
    assert main(["stream", "--prompt", "x"]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_unknown_builtin_prompt(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECTUI_URL", "http://127.0.0.1:9")
    assert main(["stream", "--builtin", "nope"]) == 2
    assert "table-row" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://[::1", "ftp://host:1"])
@pytest.mark.parametrize("command", [["stream", "--prompt", "x"], ["watch", "--once"]])
def test_an_unusable_url_is_one_line(
    url: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command[0], "--url", url, *command[1:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "URL" in err[0], err
    assert "unexpected" not in err[0] and "Traceback" not in err[0]


def _dests(parser: argparse.ArgumentParser) -> set[tuple[str, str]]:
    """(command, destination) of every flag, subcommands included."""
    found: set[tuple[str, str]] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= {(name, dest) for _, dest in _dests(sub)}
        else:
            found.add((parser.prog, action.dest))
    return found


def test_the_flags_that_are_settings_are_the_server_generation_and_theme_flags() -> None:
    # Settings take every flag whose destination is a Settings field (no second list of names):
    # a command's own flag must not land on a setting's name by accident.
    server = argparse.ArgumentParser()
    add_launch_options(server)
    allowed = {a.dest for a in server._actions} | set(GENERATION_FLAGS) | {"theme", "broadcast"}
    settings = set(Settings.model_fields) - NOT_FLAG_SETTINGS
    named = {dest for _, dest in _dests(build_parser()) if dest in settings}
    assert named <= allowed
    assert settings <= allowed  # and each setting has its flag


def test_a_command_s_options_are_typed_and_absent_flags_take_the_defaults() -> None:
    args, _ = parse("--builtin", "essay", "stream")  # given before the command, then SUPPRESS
    options = StreamOptions.from_namespace(args)
    assert (options.builtin, options.format, options.record, options.prompt) == (
        "essay", "text", None, None,
    )  # fmt: skip
    args, _ = parse("stream", "--format", "jsonl", "--record", "r.jsonl", "--prompt", "x")
    options = StreamOptions.from_namespace(args)
    assert (options.format, options.record, options.prompt) == ("jsonl", Path("r.jsonl"), "x")


def test_every_option_field_is_a_flag_of_its_command() -> None:
    # extra names are ignored when a model is built from the namespace, so a field whose flag
    # was renamed would silently keep its default: each field names a flag of its command.
    from spectui.cli import COMMANDS, ROOT

    dests = _dests(build_parser())
    models: dict[str, type[BaseModel]] = {
        "spectui": ROOT.Options,
        **{command.NAME: command.Options for command in COMMANDS},
    }
    for command, model in models.items():
        flags = {dest for name, dest in dests if name == command}
        fields = {field.alias or name for name, field in model.model_fields.items()}
        assert fields - {"given"} <= flags, command
