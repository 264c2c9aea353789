"""The decision rule: every verdict of `compare` and `tune` comes from here.

Compare judges each config × prompt (`with_verdicts` over `summary.summarise`'s rows), each
concurrency level (`levels`) and each content class (`by_content`); tune's per-prompt results are
compare's rows, and its overall result is every prompt pooled (`judge_pooled`), judged by the same
rule. Reports format the `Judgement`; they do not re-derive it.

- **Speed**: each round, a config's run of a prompt is paired with the baseline's run of that
  prompt in the same round; "faster" or "slower" only when the bootstrap interval of those paired
  speedups clears the noise floor measured in the same comparison on every config's runs (see
  `stats`). Otherwise the verdict is "inconclusive", with how many more rounds would settle it
  (one round settles nothing: the spread is not known yet); "too noisy to call" when the runs, the
  config's own or the baseline's, change more than `TOO_NOISY` between rounds. A keep needs at
  least `MIN_KEEP_ROUNDS` paired rounds.
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
- **Pooled** results (several prompts as one row) are held to their parts as well: a fault on
  any prompt drops the pool, a prompt still pending keeps it pending, and a prompt where the
  config is clearly slower is named ("net loss on b").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from spectui.core.compare.budget import MemoryBudget, fmt_bytes
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.outcomes import SpeedCall, Unsettled, Verdict
from spectui.core.compare.stats import TOO_NOISY, rounds_to_settle
from spectui.core.compare.summary_row import SummaryRow

MIN_KEEP_ROUNDS = 3
"""A keep needs at least this many paired rounds: two lucky rounds are not a finding."""
MEMORY_SLACK_BYTES = 8 * 2**20
"""Peak memory within this of the baseline's is allocator noise: shown as 'no extra memory'."""


class Judgement(NamedTuple):
    """The rule's outcome for one row."""

    verdict: Verdict
    """keep / drop / inconclusive / failed / baseline / pending."""
    reason: str
    """Why, in one sentence, with its evidence."""
    unsettled: Unsettled | None = None
    """Why an inconclusive verdict is not settled (None otherwise, or with no paired run)."""


def with_verdicts(plan: ComparePlan, rows: Sequence[SummaryRow]) -> list[SummaryRow]:
    """Rows with verdict and reason, each config's row judged against the baseline's row of the
    same name (a prompt, a level, a content class)."""
    baseline = plan.baseline.name
    base_rows = {r.prompt: r for r in rows if r.config == baseline}
    synthetic = {config.name for config in plan.configs if config.spec.synthetic}
    out = []
    for row in rows:
        base = None if row.config == baseline else base_rows[row.prompt]
        row = _with_memory(row, base, plan.memory_budget)
        row = _with_speed_call(row, base)
        outcome = judge(row, base, strict=plan.identical_answers)
        if row.config in synthetic and outcome.verdict == Verdict.KEEP:
            # Forced acceptance shows what acceptance would buy, not what the type does.
            outcome = Judgement(
                Verdict.INCONCLUSIVE,
                f"synthetic acceptance, not a result: {outcome.reason}",
                Unsettled.SYNTHETIC,
            )
        out.append(row.model_copy(update=outcome._asdict()))
    return out


def judge_pooled(
    plan: ComparePlan, pooled: Sequence[SummaryRow], parts: Sequence[SummaryRow]
) -> list[SummaryRow]:
    """``pooled`` (one row per config over several prompts, all named alike) judged by the rule,
    then held to ``parts`` (those prompts' judged rows): a fault on any prompt (failed runs, a
    failed checker, a changed answer, over the memory budget) drops the pool, a prompt still
    pending keeps it pending, and prompts where the config is clearly slower are named."""
    out = []
    for row in with_verdicts(plan, pooled):
        mine = [p for p in parts if p.config == row.config and p.config != plan.baseline.name]
        faults = [
            p
            for p in mine
            if p.verdict in (Verdict.DROP, Verdict.FAILED) and p.speed_call != SpeedCall.SLOWER
        ]
        waiting = [p for p in mine if p.verdict == Verdict.PENDING]
        losses = [p.prompt for p in mine if p.speed_call == SpeedCall.SLOWER]
        if row.verdict == Verdict.FAILED:
            outcome = Judgement(row.verdict, row.reason)
        elif faults:
            outcome = Judgement(Verdict.DROP, f"on {faults[0].prompt}: {faults[0].reason}")
        elif waiting and row.verdict != Verdict.PENDING:
            outcome = Judgement(Verdict.PENDING, f"on {waiting[0].prompt}: {waiting[0].reason}")
        else:
            outcome = Judgement(row.verdict, row.reason, row.unsettled)
        if losses and outcome.verdict != Verdict.DROP:
            outcome = outcome._replace(reason=f"{outcome.reason}; net loss on {', '.join(losses)}")
        out.append(row.model_copy(update=outcome._asdict()))
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


def spread(row: SummaryRow, base: SummaryRow | None) -> float | None:
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
        return row.model_copy(update={"speed_call": SpeedCall.UNCLEAR, "rounds_needed": need})
    if noise > TOO_NOISY:
        # Other load came and went: no interval means anything over runs this unsteady.
        return row.model_copy(update={"speed_call": SpeedCall.UNCLEAR, "rounds_needed": None})
    if row.speedup_low > 1 + noise:
        return row.model_copy(update={"speed_call": SpeedCall.FASTER})
    if row.speedup_high < 1 / (1 + noise):
        return row.model_copy(update={"speed_call": SpeedCall.SLOWER})
    swing = spread(row, base)
    if swing is not None and swing > TOO_NOISY:
        # This config's own runs (or the baseline's on this prompt) swing too much for more
        # rounds to settle anything: an interval that still clears the band despite them is a
        # call (faster or slower in every round), one that does not is noise, not a ratio.
        return row.model_copy(update={"speed_call": SpeedCall.UNCLEAR, "rounds_needed": None})
    # The median stands in for every value: only its distance from the band and n matter.
    values = [row.speedup_vs_baseline] * row.pairs
    extra = rounds_to_settle(values, (row.speedup_low, row.speedup_high), noise)
    call = SpeedCall.TIE if extra is None else SpeedCall.UNCLEAR
    return row.model_copy(update={"speed_call": call, "rounds_needed": extra})


def judge(row: SummaryRow, base: SummaryRow | None, *, strict: bool = False) -> Judgement:
    """The verdict for one config × prompt and its one-sentence reason (``base``: the baseline's
    row, None when ``row`` is the baseline's own). ``row`` carries its speed call and memory
    price (`with_verdicts` fills them in). ``strict``: any changed answer drops it."""
    if base is None:
        return _judge_baseline(row)
    done = row.runs + row.failed >= row.planned and base.runs + base.failed >= base.planned
    if row.runs == 0 and row.failed:
        return Judgement(Verdict.FAILED, f"all {row.failed} runs failed")
    if not done:
        return Judgement(Verdict.PENDING, f"{row.runs + row.failed} of {row.planned} runs done")
    faults = _faults(row, base, strict)
    speed = speed_text(row)
    price = memory_text(row)
    if faults:
        return Judgement(Verdict.DROP, "; ".join(faults) + f" ({speed}, {price})")
    outcome = _judge_speed(row, base, speed, price)
    note = row.divergence_note
    if note and note not in outcome.reason:  # a keep names it in place of "same answers"
        outcome = outcome._replace(reason=f"{outcome.reason}; {note}")
    return outcome


def _answers(row: SummaryRow) -> str:
    if not row.compared:
        return "answers not compared"
    if row.identical == row.compared:
        return "same answers"
    return row.divergence_note or "answers differ"


def _rounds(n: int) -> str:
    return f"{n} more round{'s' if n > 1 else ''}"


def _judge_speed(row: SummaryRow, base: SummaryRow, speed: str, price: str) -> Judgement:
    """The verdict of a correct config: memory, then speed."""
    over = _over_budget(row)
    if over:
        return Judgement(Verdict.DROP, f"{speed}, but {over}")
    call = row.speed_call
    if call == SpeedCall.SLOWER:
        return Judgement(Verdict.DROP, f"{speed}, {price}")
    if call == SpeedCall.FASTER:
        tail = f"{price}, {_answers(row)}" + _ttft_note(row)
        if row.pairs < MIN_KEEP_ROUNDS:
            more = _rounds(MIN_KEEP_ROUNDS - row.pairs)
            return Judgement(
                Verdict.INCONCLUSIVE,
                f"{speed} for {tail}; needs {more} (a keep needs {MIN_KEEP_ROUNDS})",
                Unsettled.FEW_ROUNDS,
            )
        return Judgement(Verdict.KEEP, f"{speed} for {tail}")
    if call == SpeedCall.TIE:
        return Judgement(Verdict.INCONCLUSIVE, f"a tie: {speed}, {price}", Unsettled.TIE)
    noisy = _noisy_text(row, base)
    if call == SpeedCall.UNCLEAR and noisy:
        return Judgement(
            Verdict.INCONCLUSIVE,
            f"too noisy to call: {speed}, {price} — {noisy}",
            Unsettled.TOO_NOISY,
        )
    if call == SpeedCall.UNCLEAR:
        more = _rounds(row.rounds_needed or 1)
        why = Unsettled.ONE_ROUND if row.pairs < 2 else Unsettled.MORE_ROUNDS
        return Judgement(Verdict.INCONCLUSIVE, f"{speed}, {price} — needs about {more}", why)
    return Judgement(Verdict.INCONCLUSIVE, f"{speed}, {price}")


def _noisy_text(row: SummaryRow, base: SummaryRow) -> str | None:
    """Whose runs were too unsteady to call, or None."""
    swing = spread(row, base)
    if swing is None or swing <= TOO_NOISY:
        return None
    if swing == row.config_noise:
        whose = "this config's own runs"
    elif swing == base.config_noise:
        whose = "the baseline's runs"
    else:
        whose = "the runs"
    return f"{whose} changed ±{swing:.0%} between rounds (other load on the machine?)"


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
    interval = f"{row.ttft_low:.2f}–{row.ttft_high:.2f}" if row.ttft_high else ""
    return f", but the first token comes {row.ttft_ratio_vs_baseline:.2f}x later ({interval})"


def _judge_baseline(row: SummaryRow) -> Judgement:
    if row.runs == 0 and row.failed:
        return Judgement(Verdict.FAILED, f"all {row.failed} baseline runs failed")
    if row.runs + row.failed < row.planned:
        return Judgement(Verdict.PENDING, f"{row.runs + row.failed} of {row.planned} runs done")
    return Judgement(Verdict.BASELINE, "the reference (no speculation)")


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
    if row.speed_call == SpeedCall.FASTER:
        return text.replace("x (", "x faster (", 1)
    return f"slower: {text}" if row.speed_call == SpeedCall.SLOWER else text


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
