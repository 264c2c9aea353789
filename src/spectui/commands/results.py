"""What `compare` and `tune` share about their results file: the options (``--json``,
``--markdown``, ``--resume``, ``--trust-checkers``, ...), the decision rule's one flag, the flags
refused outright or on ``--resume``, and where results are written. The run around the file is
`commands.runs`."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Self

from spectui.commands.options import CommandOptions
from spectui.core.errors import SpectuiError


def add_identical_answers_flag(group: argparse._ActionsContainer) -> None:
    """``--identical-answers``: the strict rule, the same flag for compare and tune."""
    group.add_argument(
        "--identical-answers",
        action="store_true",
        dest="identical_answers",
        help="drop a config for any answer that differs from the baseline's at temperature 0 "
        "(default: a change at a near-tie of the baseline's is a caveat, and a prompt's "
        "checker decides correctness where it has one); with --resume: re-judge",
    )


class ResultsOptions(CommandOptions):
    """The results-file options of `compare` and `tune`."""

    given: frozenset[str] = frozenset()
    """Every flag the command line gave (its destination), settings included: what the
    refusals look at."""
    json_out: Path | None = None
    """--json: the results file (else a new one in the state dir; with --resume: also)."""
    markdown_out: Path | None = None
    """--markdown: the report as Markdown, rewritten after every run."""
    resume: Path | None = None
    """--resume: continue this results file, as it was planned."""
    trust_checkers: bool = False
    """--trust-checkers: with --resume, run the file's Python checkers (they execute code)."""
    memory_budget: str | None = None
    """--memory-budget: extra peak memory a config may cost (512MiB, 2GiB, 10%)."""
    identical_answers: bool = False
    """--identical-answers: drop a config for any answer that differs from the baseline's."""
    no_chart: bool = False
    """--no-chart: skip the final chart."""
    tui: bool = False
    """--tui: show the run in the TUI."""

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> Self:
        """The options, with the names of every flag given (`given`)."""
        flags = vars(args)
        given = frozenset(name for name, value in flags.items() if value is not None)
        return cls.model_validate({**flags, "given": given})

    def refuse(
        self,
        command: str,
        refused: Mapping[str, str],
        planned: Mapping[str, str],
        error: type[SpectuiError],
    ) -> None:
        """Refuse the flags ``command`` never takes (``refused``: destination -> why), and on
        --resume the ones its plan fixed (``planned``: destination -> flag)."""
        for name, why in refused.items():
            if name in self.given:
                raise error(f"{command} does not take {why}")
        if self.resume is not None:
            dropped = [flag for name, flag in planned.items() if name in self.given]
            if dropped:
                raise error(
                    f"--resume continues {self.resume} as it was planned: drop {', '.join(dropped)}"
                )

    @property
    def trust_code(self) -> bool:
        """Whether Python checkers may run: from a prompt file named on this command line, or
        from a resumed file the user vouches for."""
        return self.resume is None or self.trust_checkers

    def outputs(self, default: Callable[[], Path]) -> list[Path]:
        """Where results are written: the resumed file, else --json or ``default()``; --json
        too when it names another file."""
        first = self.resume if self.resume is not None else self.json_out or default()
        outputs = [first]
        if self.json_out is not None and self.json_out not in outputs:
            outputs.append(self.json_out)
        return outputs
