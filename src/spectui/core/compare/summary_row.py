"""One config × prompt of a comparison: medians, ranges, the paired speedup with its interval,
the memory price, and the verdict (the shape every report and `tune` reads)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from spectui.core.compare.outcomes import SpeedCall, Unsettled, Verdict


class SummaryRow(BaseModel):
    """One config × prompt: medians and ranges over the counted runs, and the verdict."""

    model_config = ConfigDict(frozen=True)

    config: str
    """Config name."""
    prompt: str
    """Prompt key."""
    runs: int
    """Counted runs that succeeded."""
    planned: int
    """Counted runs planned."""
    failed: int
    """Counted runs that failed."""
    median_tokens_per_second: float | None = None
    """Median decode rate."""
    min_tokens_per_second: float | None = None
    """Slowest decode rate."""
    max_tokens_per_second: float | None = None
    """Fastest decode rate."""
    median_ttft_ms: float | None = None
    """Median time to first token."""
    min_ttft_ms: float | None = None
    """Shortest time to first token."""
    max_ttft_ms: float | None = None
    """Longest time to first token."""
    median_total_ms: float | None = None
    """Median time to the complete answer."""
    min_total_ms: float | None = None
    """Shortest time to the complete answer."""
    max_total_ms: float | None = None
    """Longest time to the complete answer."""
    median_acceptance: float | None = None
    """Median accepted / drafted."""
    median_mean_acceptance_length: float | None = None
    """Median tokens per verification step."""
    drafted: int = 0
    """Draft tokens proposed over the counted runs."""
    accepted: int = 0
    """Draft tokens accepted over the counted runs."""
    median_peak_rss_bytes: float | None = None
    """Median of the runs' peak RSS."""
    median_peak_rss_minus_shared_bytes: float | None = None
    """Median of the runs' peak RSS minus shared."""
    median_peak_gpu_bytes: float | None = None
    """Median of the runs' peak GPU memory (None without NVML)."""
    speedup_vs_baseline: float | None = None
    """Median over rounds of (this run's tokens per second of wall time ÷ the baseline's, same
    round): end to end, TTFT included; equals baseline time ÷ this time for equal lengths."""
    speedup_min: float | None = None
    """Smallest paired speedup."""
    speedup_max: float | None = None
    """Largest paired speedup."""
    decode_speedup_vs_baseline: float | None = None
    """Median over rounds of the paired decode-rate ratio (TTFT excluded)."""
    ttft_ratio_vs_baseline: float | None = None
    """Median over rounds of this TTFT ÷ the baseline's (above 1: slower first token)."""
    pairs: int = 0
    """Rounds where both this config and the baseline produced a run."""
    speedup_low: float | None = None
    """Low end of the 95 % bootstrap interval of the median paired speedup."""
    speedup_high: float | None = None
    """High end of that interval."""
    noise_floor: float | None = None
    """The typical round-to-round change of every config's runs in this comparison, pooled over
    configs and prompts (0.03: ±3 %); None until two rounds are in. Speed calls must clear it."""
    config_noise: float | None = None
    """This config's own round-to-round change on this prompt (None: fewer than two rounds).
    Above `stats.TOO_NOISY` here or in the baseline's row of the prompt: too noisy to call."""
    ttft_low: float | None = None
    """Low end of the bootstrap interval of the paired TTFT ratio (above 1: slower first token)."""
    ttft_high: float | None = None
    """High end of that interval."""
    ttft_noise_floor: float | None = None
    """The round-to-round TTFT change (as ``noise_floor``, for the first token)."""
    speed_call: SpeedCall | None = None
    """What the interval says against the noise floor (None for the baseline or no pairs)."""
    rounds_needed: int | None = None
    """Extra rounds likely to settle an unclear speed call (None: settled, or a tie)."""
    memory_extra_bytes: float | None = None
    """Extra median peak memory over the baseline (VRAM where the server uses a GPU, else RSS)."""
    memory_extra_fraction: float | None = None
    """That extra as a fraction of the baseline's peak."""
    memory_budget_bytes: int | None = None
    """The budget that extra is held to (None: unknown total for a percentage budget)."""
    memory_kind: Literal["RSS", "VRAM"] = "RSS"
    """Which peak the memory price is about."""
    identical: int = 0
    """Runs whose text equals the baseline's."""
    compared: int = 0
    """Runs compared with the baseline."""
    first_divergence: str | None = None
    """Where the first differing run diverged, in one line."""
    near_tie_changes: int = 0
    """Changed answers that diverged at a near-tie of the baseline's (and no checker vouched for
    them): a caveat, not a drop (unless the plan asks for identical answers)."""
    divergent_changes: int = 0
    """Changed answers that diverged where the baseline was sure, or were not probed, and no
    checker vouched for them: they drop the config."""
    vouched_changes: int = 0
    """Changed answers the prompt's checker passed: correct by the prompt's own test."""
    divergence_note: str | None = None
    """The caveat shown with the verdict for a changed answer that does not drop the config:
    "answer differs from token 112, at a near-tie 0.41/0.40 — read both"."""
    check_failures: int = 0
    """Runs whose checker did not pass."""
    checked: int = 0
    """Runs a checker looked at (a skipped, untrusted Python checker did not)."""
    verdict: Verdict = Verdict.PENDING
    """keep / drop / inconclusive / failed / baseline / pending (runs still to come)."""
    unsettled: Unsettled | None = None
    """Why an inconclusive verdict is not settled (None: not inconclusive, or no paired run)."""
    reason: str = ""
    """Why, in one line."""
