"""`spectui whatif`'s answer, as `--json` prints it: the step price, the recorded run, one
prediction per draft max with its interval, and the lines that say what the run could not tell
(`whatif` states the model)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from spectui.core.compare.costmodel import CostModel
from spectui.core.compare.whatif_cost import StepCost


class Recorded(BaseModel):
    """The recorded run, as measured and as the model sees it."""

    model_config = ConfigDict(frozen=True)

    draft_max: int
    """K: the draft maximum it ran with."""
    spec: str
    """Its spec configuration."""
    tokens: int
    """Tokens generated."""
    steps: int
    """Verification steps."""
    singles: int
    """Decodes that tried no draft."""
    drafted: int
    """Draft tokens proposed."""
    accepted: int
    """Draft tokens accepted."""
    accepted_per_position: list[float]
    """P(a step accepts at least j tokens), j = 1..K."""
    tokens_per_step: float | None
    """Tokens per verification step (1 + accepted / steps)."""
    tokens_per_second: float | None
    """Measured decode rate."""
    predicted_tokens_per_second: float | None
    """The model's decode rate for it."""


class Prediction(BaseModel):
    """One draft maximum's prediction, with its interval."""

    model_config = ConfigDict(frozen=True)

    draft_max: int
    """K'."""
    tokens_per_step: float
    """Predicted tokens per verification step."""
    tokens_per_step_low: float
    """Its low end (K' > K: no position past K accepted)."""
    tokens_per_step_high: float
    """Its high end (K' > K: every position past K accepted after K)."""
    tokens_per_second: float
    """Predicted decode rate (the point)."""
    low: float
    """The rate's low end: the worst plausible split and acceptance, less the spread."""
    high: float
    """The rate's high end: the best plausible split and acceptance, plus the spread."""
    speedup_vs_recorded: float
    """The point over the model's rate at the recorded K."""
    extrapolated: bool
    """K' > K: positions past the recorded ones follow the stated geometric model."""
    cost_told: bool = True
    """Whether the run pins this draft max's step cost: every split it leaves plausible moves
    the point by at most `whatif.SPLIT_TOLERANCE` (always at the recorded K)."""


class WhatIf(BaseModel):
    """`spectui whatif --json`: the step price, the recorded run, one prediction per draft max,
    and the lines that say what the run could not tell."""

    model_config = ConfigDict(frozen=True)

    cost_model: CostModel
    """The point's step cost as a cost model (the given one with ``--cost-model``)."""
    step_cost: StepCost
    """The step price with the range of splits of its fixed and per-token cost."""
    recorded: Recorded
    """The run predicted from."""
    predictions: list[Prediction] = Field(default_factory=list)
    """One per draft max asked, in the order asked."""
    notes: list[str] = Field(default_factory=list)
    """One line each: the costs not separable (and which run would separate them), positions
    past K assumed, a chain's steps priced alike."""
