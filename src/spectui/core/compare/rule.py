"""The decision rule (shared by `compare` and `tune`):

- **Speed**: each round, a config's run of a prompt is paired with the baseline's run of that
  prompt in the same round; "faster" or "slower" only when the bootstrap interval of those paired
  speedups clears the noise floor measured in the same comparison on every config's runs (see
  `stats`). Otherwise the verdict is "inconclusive", with how many more rounds would settle it;
  "too noisy to call" when the config's own runs or the baseline's on that prompt change more
  than `TOO_NOISY` between rounds. A keep needs at least `MIN_KEEP_ROUNDS` paired rounds.
- **Memory** is a price, always shown ("+99 MiB, +28 %"); a config is dropped for it only when
  its extra peak exceeds the memory budget (`budget`).
- **Correctness**: a failed checker or a server error drops it. A changed answer at temperature
  0 is judged by the prompt's checker when it passes it; otherwise by the baseline's odds at the
  divergent token (`divergence`): at a near-tie it is a caveat shown with the verdict ("answer
  differs from token 112, at a near-tie 0.41/0.40 — read both"), where the baseline was sure (or
  unprobed) it drops the config. ``identical_answers`` (``--identical-answers``) restores the
  strict rule: any changed answer drops it.
- **TTFT** is judged apart: a config that wins overall but delays the first token beyond the
  noise says so in its verdict.
"""

from __future__ import annotations

from typing import Literal

from spectui.core.compare.budget import MemoryBudget, fmt_bytes
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.stats import TOO_NOISY, rounds_to_settle
from spectui.core.compare.summary_row import SummaryRow, Verdict

MIN_KEEP_ROUNDS = 3
"""A keep needs at least this many paired rounds: two lucky rounds are not a finding."""
MEMORY_SLACK_BYTES = 8 * 2**20
"""Peak memory within this of the baseline's is allocator noise: shown as 'no extra memory'."""


def with_verdicts(plan: ComparePlan, rows: list[SummaryRow]) -> list[SummaryRow]:
    """Rows with verdict and reason, each config × prompt judged against the baseline's row."""
    baseline = plan.baseline.name
    base_rows = {r.prompt: r for r in rows if r.config == baseline}
    synthetic = {config.name for config in plan.configs if config.spec.synthetic}
    out = []
    for row in rows:
        base = None if row.config == baseline else base_rows[row.prompt]
        row = _with_memory(row, base, plan.memory_budget)
        row = _with_speed_call(row, base)
        verdict, reason = judge(row, base, strict=plan.identical_answers)
        if row.config in synthetic and verdict == "keep":
            # Forced acceptance shows what acceptance would buy, not what the type does.
            verdict, reason = "inconclusive", f"synthetic acceptance, not a result: {reason}"
        out.append(row.model_copy(update={"verdict": verdict, "reason": reason}))
    return out


def _with_memory(row: SummaryRow, base: SummaryRow | None, budget: MemoryBudget) -> SummaryRow:
    """The memory price over the baseline: VRAM where the server used a GPU, else peak RSS."""
    if base is None:
        return row
    gpu = row.median_peak_gpu_bytes is not None and base.median_peak_gpu_bytes is not None
    mine, theirs = (
        (row.median_peak_gpu_bytes, base.median_peak_gpu_bytes)
        if gpu
        else (row.median_peak_rss_bytes, base.median_peak_rss_bytes)
    )
    if mine is None or theirs is None:
        return row
    extra = mine - theirs
    return row.model_copy(
        update={
            "memory_extra_bytes": extra,
            "memory_extra_fraction": extra / theirs if theirs else None,
            "memory_budget_bytes": budget.limit(gpu=gpu),
            "memory_kind": "VRAM" if gpu else "RSS",
        }
    )


def _spread(row: SummaryRow, base: SummaryRow | None) -> float | None:
    """The largest round-to-round change behind this row: the comparison's floor, this config's
    own on the prompt, the baseline's own on the prompt."""
    values = [row.noise_floor, row.config_noise, base.config_noise if base else None]
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _with_speed_call(row: SummaryRow, base: SummaryRow | None = None) -> SummaryRow:
    """Faster / slower / tie / unclear, from the interval against the noise floor."""
    if row.speedup_vs_baseline is None or row.speedup_low is None or row.speedup_high is None:
        return row
    noise = row.noise_floor
    if noise is None or row.pairs < 2:
        # One round (or no measured noise) says nothing about the spread.
        need = max(2 - row.pairs, 1)
        return row.model_copy(update={"speed_call": "unclear", "rounds_needed": need})
    if noise > TOO_NOISY:
        # Other load came and went: no interval means anything over runs this unsteady.
        return row.model_copy(update={"speed_call": "unclear", "rounds_needed": None})
    if row.speedup_low > 1 + noise:
        return row.model_copy(update={"speed_call": "faster"})
    if row.speedup_high < 1 / (1 + noise):
        return row.model_copy(update={"speed_call": "slower"})
    spread = _spread(row, base)
    if spread is not None and spread > TOO_NOISY:
        # This config's own runs (or the baseline's on this prompt) swing too much for more
        # rounds to settle anything: an interval that still clears the band despite them is a
        # call (faster or slower in every round), one that does not is noise, not a ratio.
        return row.model_copy(update={"speed_call": "unclear", "rounds_needed": None})
    # The median stands in for every value: only its distance from the band and n matter.
    values = [row.speedup_vs_baseline] * row.pairs
    extra = rounds_to_settle(values, (row.speedup_low, row.speedup_high), noise)
    call: Literal["unclear", "tie"] = "tie" if extra is None else "unclear"
    return row.model_copy(update={"speed_call": call, "rounds_needed": extra})


def judge(row: SummaryRow, base: SummaryRow | None, *, strict: bool = False) -> tuple[Verdict, str]:
    """The verdict for one config × prompt and its one-sentence reason (``base``: the baseline's
    row, None when ``row`` is the baseline's own). ``row`` carries its speed call and memory
    price (`with_verdicts` fills them in). ``strict``: any changed answer drops it."""
    if base is None:
        return _judge_baseline(row)
    done = row.runs + row.failed >= row.planned and base.runs + base.failed >= base.planned
    if row.runs == 0 and row.failed:
        return "failed", f"all {row.failed} runs failed"
    if not done:
        return "pending", f"{row.runs + row.failed} of {row.planned} runs done"
    faults = _faults(row, base, strict)
    speed = speed_text(row)
    price = memory_text(row)
    if faults:
        return "drop", "; ".join(faults) + f" ({speed}, {price})"
    verdict, reason = _judge_speed(row, base, speed, price)
    note = row.divergence_note
    if note and note not in reason:  # a keep names it in place of "same answers"
        reason += f"; {note}"
    return verdict, reason


def _answers(row: SummaryRow) -> str:
    if not row.compared:
        return "answers not compared"
    if row.identical == row.compared:
        return "same answers"
    return row.divergence_note or "answers differ"


def _judge_speed(row: SummaryRow, base: SummaryRow, speed: str, price: str) -> tuple[Verdict, str]:
    """The verdict of a correct config: memory, then speed."""
    over = _over_budget(row)
    if over:
        return "drop", f"{speed}, but {over}"
    call = row.speed_call
    if call == "slower":
        return "drop", f"{speed}, {price}"
    if call == "faster":
        tail = f"{price}, {_answers(row)}" + _ttft_note(row)
        if row.pairs < MIN_KEEP_ROUNDS:
            more = MIN_KEEP_ROUNDS - row.pairs
            return "inconclusive", (
                f"{speed} for {tail}; needs {more} more round{'s' if more > 1 else ''} "
                f"(a keep needs {MIN_KEEP_ROUNDS})"
            )
        return "keep", f"{speed} for {tail}"
    if call == "tie":
        return "inconclusive", f"a tie: {speed}, {price}"
    noisy = _noisy_text(row, base)
    if call == "unclear" and noisy:
        return "inconclusive", f"too noisy to call: {speed}, {price} — {noisy}"
    if call == "unclear":
        more = row.rounds_needed or 1
        return "inconclusive", (
            f"{speed}, {price} — needs about {more} more round{'s' if more > 1 else ''}"
        )
    return "inconclusive", f"{speed}, {price}"


def _noisy_text(row: SummaryRow, base: SummaryRow) -> str | None:
    """Whose runs were too unsteady to call, or None."""
    spread = _spread(row, base)
    if spread is None or spread <= TOO_NOISY:
        return None
    if spread == row.config_noise:
        whose = "this config's own runs"
    elif spread == base.config_noise:
        whose = "the baseline's runs"
    else:
        whose = "the runs"
    return f"{whose} changed ±{spread:.0%} between rounds (other load on the machine?)"


def _faults(row: SummaryRow, base: SummaryRow, strict: bool = False) -> list[str]:
    """Correctness: errors, failed checkers, changed answers that nothing vouches for (each
    drops the config); ``strict``: every changed answer."""
    faults: list[str] = []
    if row.failed > base.failed:
        faults.append(f"{row.failed} of {row.planned} runs failed")
    if row.check_failures > base.check_failures:
        faults.append(
            f"checker failed on {row.check_failures} of {row.checked} runs "
            f"(baseline: {base.check_failures} of {base.checked})"
        )
    changed = row.compared - row.identical
    if strict and changed:
        faults.append(
            f"{changed} of {row.compared} answers differ from the baseline "
            f"({row.first_divergence}; identical answers asked)"
        )
    elif row.divergent_changes:
        faults.append(
            f"{row.divergent_changes} of {row.compared} answers differ from the baseline "
            f"({row.first_divergence})"
        )
    return faults


def _over_budget(row: SummaryRow) -> str | None:
    if row.memory_extra_bytes is None or row.memory_budget_bytes is None:
        return None
    if row.memory_extra_bytes <= row.memory_budget_bytes:
        return None
    return f"{memory_text(row)} is over the memory budget of {fmt_bytes(row.memory_budget_bytes)}"


def _ttft_note(row: SummaryRow) -> str:
    """', but the first token is 1.40x slower (1.31–1.52)' when beyond the TTFT noise."""
    if row.ttft_low is None or row.ttft_ratio_vs_baseline is None:
        return ""
    noise = row.ttft_noise_floor if row.ttft_noise_floor is not None else 0.05
    if row.pairs < 2 or row.ttft_low <= 1 + noise:
        return ""
    spread = f"{row.ttft_low:.2f}–{row.ttft_high:.2f}" if row.ttft_high else ""
    return f", but the first token comes {row.ttft_ratio_vs_baseline:.2f}x later ({spread})"


def _judge_baseline(row: SummaryRow) -> tuple[Verdict, str]:
    if row.runs == 0 and row.failed:
        return "failed", f"all {row.failed} baseline runs failed"
    if row.runs + row.failed < row.planned:
        return "pending", f"{row.runs + row.failed} of {row.planned} runs done"
    return "baseline", "the reference (no speculation)"


def speed_text(row: SummaryRow) -> str:
    """'2.20x faster (1.98–2.41, 3 rounds, noise ±3 %)': the speed and its evidence."""
    if row.speedup_vs_baseline is None:
        return "no round with both this config and the baseline"
    rounds = f"{row.pairs} round" + ("s" if row.pairs != 1 else "")
    parts = [rounds]
    if row.speedup_low is not None and row.speedup_high is not None and row.pairs > 1:
        parts.insert(0, f"{row.speedup_low:.2f}–{row.speedup_high:.2f}")
    if row.noise_floor is not None:
        parts.append(f"noise ±{row.noise_floor:.0%}")
    text = f"{row.speedup_vs_baseline:.2f}x ({', '.join(parts)})"
    if row.speed_call == "faster":
        return text.replace("x (", "x faster (", 1)
    return f"slower: {text}" if row.speed_call == "slower" else text


def memory_text(row: SummaryRow) -> str:
    """'+99 MiB RSS (+28 %)', 'no extra memory', or 'memory not measured'."""
    extra = row.memory_extra_bytes
    if extra is None:
        return "memory not measured"
    if abs(extra) < MEMORY_SLACK_BYTES:
        return "no extra memory"
    sign = "+" if extra > 0 else "−"
    share = (
        f" ({sign}{abs(row.memory_extra_fraction):.0%})"
        if row.memory_extra_fraction is not None
        else ""
    )
    return f"{sign}{fmt_bytes(abs(extra))} {row.memory_kind}{share}"
