"""The command registry: every command is a module of one list that exports its parser, its
options model and `run`; the command line is built from the list and dispatched without a
branch per command, so adding a command is naming its module there."""

from __future__ import annotations

import argparse
import ast
import inspect
from pathlib import Path

import pytest

from spectui import cli
from spectui.cli import COMMANDS, ROOT, build_parser, main
from spectui.commands.command import Command, Runnable
from spectui.commands.options import CommandOptions
from spectui.commands.stream import StreamOptions

from . import dummy_command

EVERY: list[Runnable] = [*COMMANDS, ROOT]
"""Every command, the root (the live TUI) included."""


def _name(command: Runnable) -> str:
    return getattr(command, "__name__", "?").rsplit(".", 1)[-1]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_registered_command_is_in_the_help_with_its_own_parser() -> None:
    text = build_parser().format_help()
    subparsers = _subparsers(build_parser())
    names = [command.NAME for command in COMMANDS]
    assert len(set(names)) == len(names)
    assert list(subparsers) == names  # in the list's order, nothing registered elsewhere
    for command in COMMANDS:
        assert f"\n    {command.NAME} " in text, command.NAME
        assert subparsers[command.NAME].prog == f"spectui {command.NAME}"


@pytest.mark.parametrize("command", EVERY, ids=_name)
def test_each_command_exports_its_parser_options_and_run(command: Runnable) -> None:
    # (mypy checks the same of every module in the list; this is the check at run time)
    parser = "add_arguments" if command is ROOT else "add_parser"
    assert callable(getattr(command, parser))
    assert issubclass(command.Options, CommandOptions)
    assert list(inspect.signature(command.run).parameters) == ["options", "invocation"]


def _field_docstrings(model: type[CommandOptions]) -> set[str]:
    """The fields of ``model`` and its bases that have a docstring right under them."""
    documented: set[str] = set()
    for cls in model.__mro__:
        if not (isinstance(cls, type) and issubclass(cls, CommandOptions)):
            continue
        (node,) = ast.parse(inspect.getsource(cls)).body
        assert isinstance(node, ast.ClassDef)
        for field, after in zip(node.body, [*node.body[1:], None], strict=True):
            if (
                isinstance(field, ast.AnnAssign)
                and isinstance(field.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                documented.add(field.target.id)
    return documented


@pytest.mark.parametrize("command", EVERY, ids=_name)
def test_every_options_field_has_a_docstring(command: Runnable) -> None:
    model = command.Options
    assert set(model.model_fields) <= _field_docstrings(model)


def test_the_dispatch_names_no_command() -> None:
    # cli.py knows the commands only through the list: no command's name is a string there.
    tree = ast.parse(Path(cli.__file__).read_text(encoding="utf-8"))
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert not strings & {command.NAME for command in COMMANDS}


def test_a_command_is_added_by_naming_its_module_in_the_list(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    registered: tuple[Command, ...] = (*COMMANDS, dummy_command)
    help_text = build_parser(registered).format_help()
    assert "dummy" in help_text and "a command added by naming its module" in help_text
    dummy_command.RAN.clear()
    # A command that never asks for the settings runs even where they are broken.
    monkeypatch.setenv("SPECTUI_N_PREDICT", "lots")
    assert main(["dummy", "--times", "3"], commands=registered) == 3
    assert [(o.times, o.settings) for o in dummy_command.RAN] == [(3, False)]
    # One that asks gets the usual one line and exit status.
    assert main(["dummy", "--settings"], commands=registered) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spectui: ") and "n_predict" in err
    with pytest.raises(SystemExit):
        main(["dummy"])  # not in the shipped list: unknown there


def test_options_before_the_command_reach_it() -> None:
    # The subparsers SUPPRESS their defaults, so a flag given before the command survives.
    args = build_parser().parse_args(["--builtin", "essay", "stream"])
    options = cli.chosen(args).Options.from_namespace(args)
    assert isinstance(options, StreamOptions) and options.builtin == "essay"
    assert cli.chosen(build_parser().parse_args([])) is ROOT
