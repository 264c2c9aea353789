"""compare's and tune's shared results options: refusals, --resume's fixed plan, where results
go (through the real command line; every refusal comes before any server starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spectui.cli import build_parser, main
from spectui.commands.results import ResultsOptions


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["compare", "--spec-type", "ngram-mod"], "compare does not take --spec-type"),
        (["compare", "--spec-draft-n-max", "4"], "compare does not take --spec-draft-n-max"),
        (["--spec-type", "ngram-mod", "compare"], "compare does not take --spec-type"),
        (["compare", "--resume", "r.json", "--reps", "2"], "as it was planned: drop --reps"),
        (
            ["compare", "--resume", "r.json", "--config", "ngram-mod", "--seed", "3"],
            "drop --config, --seed",
        ),
        (["compare", "--resume", "r.json", "--chat", "--cache-prompt"], "drop --chat, --cache"),
        (["tune", "--url", "http://127.0.0.1:9"], "tune does not take --url"),
        (["tune", "--spec-draft-n-min", "1"], "tune does not take --spec-draft-n-min"),
        (["tune", "--resume", "t.json", "--types", "ngram-mod"], "drop --types"),
        (["tune", "--resume", "t.json", "--memory-budget", "1GiB"], "drop --memory-budget"),
    ],
)
def test_refused_flags_say_so_in_one_line(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert line in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("command", ["compare", "tune"])
def test_resume_takes_a_new_stall_timeout(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The watchdog is the engine's, not the plan's: a comparison that stalled may wait longer.
    missing = tmp_path / "r.json"
    assert main([command, "--resume", str(missing), "--stall-timeout", "90"]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "drop" not in err and "Traceback" not in err


def options(*argv: str) -> ResultsOptions:
    return ResultsOptions.from_namespace(build_parser().parse_args(list(argv)))


def test_outputs_and_trust() -> None:
    default = Path("state/compare-new.json")
    fresh = options("compare")
    assert fresh.outputs(lambda: default) == [default] and fresh.trust_code
    named = options("compare", "--json", "a.json")
    assert named.outputs(lambda: default) == [Path("a.json")]
    resumed = options("compare", "--resume", "r.json", "--json", "b.json")
    assert resumed.outputs(lambda: default) == [Path("r.json"), Path("b.json")]
    assert not resumed.trust_code
    assert options("compare", "--resume", "r.json", "--trust-checkers").trust_code
    same = options("tune", "--resume", "r.json", "--json", "r.json")
    assert same.outputs(lambda: default) == [Path("r.json")]


def test_absent_flags_take_the_defaults() -> None:
    given = options("compare", "--tui")
    assert (given.tui, given.no_chart, given.memory_budget, given.identical_answers) == (
        True, False, None, False,
    )  # fmt: skip
    assert "tui" in given.given and "no_chart" not in given.given
