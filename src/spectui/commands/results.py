"""What `compare` and `tune` share about their results file: the flags (``--json``,
``--markdown``, ``--resume``, ``--trust-checkers``, ...), the flags refused outright or on
``--resume``, where results are written, and the setup a resumed file was measured with."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Self

from spectui.commands.options import CommandOptions
from spectui.core.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.config import Settings
    from spectui.core.compare.setup import CompareSetup
    from spectui.core.compare.store import CompareDocument, ServerOptions

    class SetupFactory(Protocol):
        """`app_setup.compare_setup`'s signature."""

        def __call__(
            self,
            settings: Settings,
            *,
            binary: Path | None = None,
            model: Path | None = None,
            server: ServerOptions | None = None,
        ) -> CompareSetup: ...


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


def resumed_setup(
    settings: Settings, document: CompareDocument, source: Path, compare_setup: SetupFactory
) -> CompareSetup:
    """The binary, model and server arguments ``document`` (read from ``source``) was measured
    with (refused if they changed); ``compare_setup`` is `app_setup.compare_setup` (the
    command's own name for it)."""
    from spectui.core.compare.store import check_same_setup

    setup = compare_setup(
        settings,
        binary=Path(document.binary.path),
        model=settings.model or Path(document.model.path),
        server=document.server.with_secrets(settings.server_args, source),
    )
    check_same_setup(document, setup.binary_info, setup.model_info)
    return setup
