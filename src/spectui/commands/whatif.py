"""`spectui whatif RUN.jsonl [--draft-max K,K] [--also RUN2.jsonl] [--cost-model FILE] [--json]`.

From one recorded run (a session file of the TUI, ``stream --record``, ``proxy --record`` or
``compare --record``) at draft max K, of any type that drafts: predicted tokens per step and
tokens/s, each with its interval, at other draft maxima (`core.compare.whatif` states the
model). The step is priced from the run's own decodes (with ``--also``, further runs of the same
server and type help: one at a second draft max separates a step's fixed cost from its
per-token cost), or by a compare or tune file of the same server (``--cost-model``). What the
run cannot tell is said in one line each. ``--json`` prints exactly
``{"cost_model", "step_cost", "recorded", "predictions", "notes"}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Self

from pydantic import Field, ValidationError, field_validator

from spectui.commands.command import Invocation, Subparsers
from spectui.commands.options import CommandOptions
from spectui.core.errors import SpectuiError

if TYPE_CHECKING:
    from spectui.core.compare.whatif import WhatIf
    from spectui.core.sessions.file import Session

NAME = "whatif"

DEFAULT_DRAFT_MAX = (2, 4, 8, 16)
"""The draft maxima predicted when none are given."""


class WhatIfUsageError(SpectuiError):
    """Options that cannot be used."""

    title = "Bad whatif options"
    exit_code = 2


class WhatIfOptions(CommandOptions):
    """`spectui whatif`'s options, typed (nothing downstream reads the argparse namespace)."""

    file: Path
    """The recorded session file."""
    draft_max: tuple[int, ...] = DEFAULT_DRAFT_MAX
    """Draft maxima to predict at, in the order given."""
    cost_model: Path | None = None
    """A compare or tune JSON whose fitted cost model to use (else: fitted on the run)."""
    also: tuple[Path, ...] = ()
    """Further recorded runs of the same server and type whose steps help price a step."""
    json_out: bool = Field(default=False, alias="json")
    """--json: print the JSON object instead of the table."""

    @field_validator("draft_max", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("draft_max")
    @classmethod
    def _positive(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(v < 1 or v > 256 for v in value):
            raise ValueError("draft maxima are whole numbers from 1 to 256")
        return value

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> Self:
        """The options from the parsed command line; one clear line when they are wrong."""
        flags = vars(args)
        raw = {
            "file": flags["file"],
            "draft_max": flags.get("draft_max") or DEFAULT_DRAFT_MAX,
            "cost_model": flags.get("cost_model"),
            "also": tuple(flags.get("also") or ()),
            "json_out": bool(flags.get("json")),
        }
        try:
            return cls.model_validate(raw)
        except ValidationError as error:
            first = error.errors()[0]
            where = str(first["loc"][0]) if first["loc"] else "options"
            text = str(first["msg"]).removeprefix("Value error, ")
            flag = {"draft_max": "--draft-max", "cost_model": "--cost-model"}.get(where, where)
            raise WhatIfUsageError(f"{flag}: {text} (e.g. --draft-max 2,4,8,16)") from None


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """Register `spectui whatif`."""
    parser = commands.add_parser(
        NAME, help="predict tokens/s at other draft lengths from one recorded run"
    )
    parser.add_argument("file", type=Path, metavar="RUN.jsonl", help="recorded session file")
    parser.add_argument(
        "--draft-max", dest="draft_max", metavar="K,K", help="draft maxima (default 2,4,8,16)"
    )
    parser.add_argument(
        "--cost-model",
        dest="cost_model",
        type=Path,
        metavar="FILE",
        help="take the step cost from a compare or tune JSON of the same server",
    )
    parser.add_argument(
        "--also",
        action="append",
        type=Path,
        metavar="RUN2.jsonl",
        help="another recorded run of the same server and type (e.g. at a second draft max), "
        "or its baseline: its decodes help tell a step's fixed cost from its per-token cost",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


def _load_cost_model(path: Path) -> object:
    from spectui.core.compare.costmodel import CostModel
    from spectui.core.errors import read_bytes

    raw = read_bytes(path, "cost model file", WhatIfUsageError)
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise WhatIfUsageError(f"{path} is not JSON") from None
    if isinstance(data, dict) and isinstance(data.get("compare"), dict):
        data = data["compare"]  # a tune document embeds its compare document
    found = data.get("cost_model") if isinstance(data, dict) else None
    if not isinstance(found, dict):
        raise WhatIfUsageError(f"{path} holds no fitted cost_model (a compare or tune file)")
    try:
        return CostModel.model_validate(found)
    except ValidationError:
        raise WhatIfUsageError(f"{path}: its cost_model is not one this spectui reads") from None


def _session(path: Path) -> Session:
    from spectui.core.sessions.file import read_session

    session = read_session(path)
    if session.problem:
        print(f"spectui: {session.problem}", file=sys.stderr)
    return session


Options = WhatIfOptions


def run(options: WhatIfOptions, invocation: Invocation) -> int:
    """Run `spectui whatif` (no settings: it reads files only); returns the exit status."""
    from spectui.core.compare.costmodel import CostModel
    from spectui.core.compare.whatif import what_if

    if options.also and options.cost_model:
        raise WhatIfUsageError("--also and --cost-model are two ways to price a step: give one")
    model = _load_cost_model(options.cost_model) if options.cost_model else None
    session = _session(options.file)
    also = [_session(path) for path in options.also]
    result = what_if(
        session, options.draft_max, model if isinstance(model, CostModel) else None, also
    )
    if options.json_out:
        print(result.model_dump_json(indent=1))
        return 0
    _print(result)
    return 0


def _print(result: WhatIf) -> None:
    rec, cost = result.recorded, result.step_cost
    print(
        f"recorded: {rec.spec}, draft max {rec.draft_max}, {rec.tokens} tokens, {rec.steps} steps"
    )
    measured = f"{rec.tokens_per_second:.1f}" if rec.tokens_per_second else "?"
    print(f"  measured {measured} tok/s, model {rec.predicted_tokens_per_second:.1f} tok/s")
    where = {"run": "this run's", "runs": "these runs'", "cost-model": "the cost model's"}
    split = (
        f"{cost.fixed_ms(cost.per_token_ms):.3g} ms + {cost.per_token_ms:.3g} ms per drafted token"
        if cost.separable
        else f"{cost.anchor_ms:.3g} ms at {cost.anchor_drafted:.3g} drafted, "
        f"{cost.per_token_low:.3g} to {cost.per_token_high:.3g} ms of it per drafted token"
    )
    print(f"step cost ({where[cost.source]} {cost.steps} steps): {split}")
    print(f"{'draft max':>9}  {'tok/step':>8}  {'tok/s':>8}  {'interval':>17}  {'vs run':>6}")
    for p in result.predictions:
        mark = "  extrapolated" if p.extrapolated else ""
        span = f"{p.low:.1f}-{p.high:.1f}"
        print(
            f"{p.draft_max:>9}  {p.tokens_per_step:>8.2f}  {p.tokens_per_second:>8.1f}  "
            f"{span:>17}  {p.speedup_vs_recorded:>5.2f}x{mark}"
        )
    for note in result.notes:
        print(f"note: {note}")
