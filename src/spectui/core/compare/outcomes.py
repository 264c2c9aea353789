"""The outcomes compare and tune report, as enums: a run's status, the speed call, the verdict,
and why a verdict is not settled yet.

They are `StrEnum`s, so a results file holds their plain values ("keep", "failed") exactly as
it did when they were strings, an older file loads unchanged, and a value compares equal to its
string.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """Whether a run gave a usable result."""

    OK = "ok"
    FAILED = "failed"


class Verdict(StrEnum):
    """The decision rule's verdict on a config (per prompt, pooled, per level or class)."""

    BASELINE = "baseline"
    """The reference itself (no speculation)."""
    KEEP = "keep"
    """Faster beyond the noise in enough rounds, correct, within the memory budget."""
    DROP = "drop"
    """Slower beyond the noise, wrong answers, failed runs, or over the memory budget."""
    INCONCLUSIVE = "inconclusive"
    """Not settled (see `Unsettled` for why)."""
    FAILED = "failed"
    """Every run failed."""
    PENDING = "pending"
    """Runs still to come."""


class SpeedCall(StrEnum):
    """What the interval of paired speedups says against the noise floor."""

    FASTER = "faster"
    SLOWER = "slower"
    UNCLEAR = "unclear"
    """Not clear of the noise band yet (more rounds may settle it), or too noisy."""
    TIE = "tie"
    """Inside the noise band: no number of rounds turns it into a gain worth having."""


class Unsettled(StrEnum):
    """Why an inconclusive verdict is not a keep or a drop (what the verdict cell says)."""

    ONE_ROUND = "one round"
    """Fewer than two paired rounds: the spread is not known yet."""
    TOO_NOISY = "too noisy"
    """The runs swing more than `stats.TOO_NOISY` between rounds: too close to call."""
    TIE = "a tie"
    """Within the noise floor, and more rounds would not change that."""
    MORE_ROUNDS = "more rounds"
    """Not clear of the noise yet: more rounds would likely settle it."""
    FEW_ROUNDS = "few rounds"
    """Faster beyond the noise, in fewer rounds than a keep needs."""
    SYNTHETIC = "synthetic"
    """Forced acceptance: it shows what acceptance would buy, not what the type does."""
