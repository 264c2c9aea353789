"""The tune document: what was searched, every run (as a compare document), and the results.

Written whole and atomically after every run (like compare's): the embedded compare document
holds the plan — which candidates ran in which round — and every run, so ``--resume`` continues
the race exactly where it stopped. The rest (leaderboard, winners, curves) is recomputed from it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from spectui import __version__
from spectui.core.compare.costmodel import CostModel, PredictedSpeedup
from spectui.core.compare.outcomes import Unsettled, Verdict
from spectui.core.compare.store import CompareDocument
from spectui.core.tune.space import Candidate, Skipped

FORMAT: Literal["spectui-tune/1"] = "spectui-tune/1"
"""Identifies the document format."""


class PromptResult(BaseModel):
    """One candidate on one prompt (or overall): the speedup and the verdict of the rule."""

    model_config = ConfigDict(frozen=True)

    speedup: float | None = None
    """Median paired end-to-end speedup over the baseline."""
    low: float | None = None
    """Low end of its 95 % bootstrap interval."""
    high: float | None = None
    """High end of that interval."""
    rounds: int = 0
    """Paired rounds measured."""
    verdict: Verdict = Verdict.PENDING
    """keep / drop / inconclusive / failed / pending (compare's decision rule, `judge`)."""
    unsettled: Unsettled | None = None
    """Why an inconclusive verdict is not settled: one round, too noisy, a tie, ... (None: not
    inconclusive, or no paired run)."""
    reason: str = ""
    """The verdict in one sentence, with its evidence."""
    ttft_ratio: float | None = None
    """Median paired TTFT ratio (above 1: a slower first token)."""
    peak_rss_bytes: float | None = None
    """Median peak RSS of the server."""
    memory_extra_bytes: float | None = None
    """Extra peak memory over the baseline (the price)."""
    acceptance: float | None = None
    """Median accepted / drafted."""
    mean_acceptance_length: float | None = None
    """Median tokens per verification step."""
    net_loss: bool = False
    """Clearly slower than no speculation."""
    predicted: PredictedSpeedup | None = None
    """The speedup the cost model predicts from the first run's acceptance (`tune.predict`)."""


class CandidateResult(BaseModel):
    """One candidate: its config, the llama-server arguments, and its results."""

    model_config = ConfigDict(frozen=True)

    config: str
    """The config as `compare --config` reads it."""
    label: str
    """Short label."""
    type: str
    """Its spec type."""
    knobs: dict[str, float] = Field(default_factory=dict)
    """Knob flag -> value."""
    args: list[str]
    """The llama-server arguments it adds (spec flags only)."""
    rounds: int = 0
    """Counted rounds it ran in."""
    out_after: int | None = None
    """The round after which the race left it out (None: still in, or a finalist)."""
    results: dict[str, PromptResult] = Field(default_factory=dict)
    """Prompt key -> its result there."""
    overall: PromptResult = PromptResult()
    """Every prompt's paired speedups pooled."""
    predicted_from: str | None = None
    """The longer-draft candidate whose runs predicted this one in round one (None: its own)."""

    @property
    def predicted(self) -> PredictedSpeedup | None:
        """The overall predicted speedup."""
        return self.overall.predicted


class Winner(BaseModel):
    """The config to run for a prompt (or overall)."""

    model_config = ConfigDict(frozen=True)

    config: str
    """The config."""
    args: list[str]
    """The exact llama-server command line to copy (model and launch options included)."""
    speedup: float | None
    """Its median paired speedup."""
    verdict: Verdict
    """Its verdict ('keep')."""


class CurvePoint(BaseModel):
    """Best speedup seen at one value of one knob."""

    model_config = ConfigDict(frozen=True)

    value: float
    """The knob's value."""
    speedup: float
    """The best overall speedup among candidates with that value."""
    config: str
    """That candidate."""


class Curve(BaseModel):
    """Speedup against one knob of one type (e.g. draft-simple against --spec-draft-n-max)."""

    model_config = ConfigDict(frozen=True)

    type: str
    """Spec type."""
    knob: str
    """Knob flag."""
    points: list[CurvePoint]
    """One point per value, in value order."""


class Prediction(BaseModel):
    """What round one predicted for one candidate."""

    model_config = ConfigDict(frozen=True)

    overall: PredictedSpeedup | None = None
    """Over every prompt."""
    prompts: dict[str, PredictedSpeedup] = Field(default_factory=dict)
    """Prompt key -> there."""


class ReplicaCheck(BaseModel):
    """A drafter replica (`core.drafters`) against the real runs of its type in round one."""

    model_config = ConfigDict(frozen=True)

    type: str
    """The spec type."""
    runs: int
    """Real runs with the baseline's answer, replayed to check the replica."""
    exact: int
    """Of them, those whose drafted and accepted counts the replay matched exactly."""
    used: bool
    """Whether its replays predict the type's other candidates (every checked run exact)."""


class TuneDocument(BaseModel):
    """Everything about one tune: the space, every run, and the findings."""

    model_config = ConfigDict(extra="ignore")

    format: Literal["spectui-tune/1"] = FORMAT
    """Document format."""
    spectui_version: str = __version__
    """spectui that wrote it."""
    created_at: datetime
    """When the tune began (UTC)."""
    updated_at: datetime
    """When this file was last written (UTC)."""
    complete: bool = False
    """True once the race is over: every finalist settled, or the round cap reached."""
    stopped: str = ""
    """Why the last session stopped: 'finished', 'budget', 'interrupted' ('' while running)."""
    budget_s: float
    """The wall-clock budget (seconds, over every session)."""
    elapsed_s: float = 0.0
    """Wall-clock time spent so far, over every session."""
    launch: list[str] = Field(default_factory=list)
    """The llama-server command line every candidate shares (binary, model, ctx size, extras)."""
    skipped: list[Skipped] = Field(default_factory=list)
    """Spec types left out of the space, and why."""
    space: list[Candidate] = Field(default_factory=list)
    """Every candidate of the space, in the order they first ran."""
    candidates: list[CandidateResult] = Field(default_factory=list)
    """Each candidate's config, arguments and per-prompt results."""
    winners: dict[str, Winner | None] = Field(default_factory=dict)
    """Prompt key -> the config to run there (None: nothing beats the baseline), plus 'overall'."""
    curves: list[Curve] = Field(default_factory=list)
    """Speedup against each knob."""
    hints: list[str] = Field(default_factory=list)
    """Advice from the winners' per-position acceptance, one line each."""
    settled: list[str] = Field(default_factory=list)
    """Per prompt, what is settled and what is not, one line each."""
    cost_model: CostModel | None = None
    """The step cost fitted on every run (a copy of the compare document's, for readers)."""
    prompt_tokens: dict[str, list[int]] = Field(default_factory=dict)
    """Prompt key -> the prompt's token ids as the server read it: with the baseline's answers,
    what the drafter replicas replay (`core.drafters`). Asked once, after round one."""
    predictions: dict[str, Prediction] = Field(default_factory=dict)
    """Config -> what round one predicted, as the race was picked from it: kept as it was when
    the cost model is refitted on later runs. Empty until round one ends (the findings then show
    the current model's prediction)."""
    replicas: list[ReplicaCheck] = Field(default_factory=list)
    """Each drafter replica checked against its type's real runs, and whether it was used."""
    ranked_by: Literal["prediction", "timings"] = "timings"
    """How round one was ranked: by predicted speedup (the cost model explains the runs) or, as
    before, by the measured one."""
    compare: CompareDocument
    """The runs and the race's plan (which candidates ran in which round): what --resume uses."""
