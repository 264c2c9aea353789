"""Views of a tune document: leaderboard cells (shared by the terminal and Markdown) and the
Markdown report."""

from __future__ import annotations

import shlex

from spectui.core.compare.budget import fmt_bytes
from spectui.core.compare.judge import MIN_KEEP_ROUNDS
from spectui.core.compare.outcomes import Unsettled, Verdict
from spectui.core.compare.stats import TOO_NOISY
from spectui.core.tune.models import CandidateResult, PromptResult, TuneDocument

LEADERBOARD_COLUMNS = (
    "config",
    "speedup (95% CI)",
    "predicted",
    "TTFT",
    "memory",
    "acceptance",
    "len",
    "rounds",
    "verdict",
)
"""Columns of a leaderboard, in the terminal and in Markdown."""


def fmt_speedup(result: PromptResult) -> str:
    """'2.20x (1.98–2.41)'."""
    if result.speedup is None:
        return "–"
    text = f"{result.speedup:.2f}x"
    if result.low is not None and result.high is not None and result.rounds > 1:
        text += f" ({result.low:.2f}–{result.high:.2f})"
    return text


def fmt_predicted(result: PromptResult) -> str:
    """'1.85x (1.70–2.01)': the cost model's speedup from the first run's acceptance."""
    p = result.predicted
    if p is None:
        return "–"
    return f"{p.speedup:.2f}x ({p.low:.2f}–{p.high:.2f})"


def fmt_ttft(result: PromptResult) -> str:
    """'+12%' slower first token, '−5%' faster."""
    if result.ttft_ratio is None:
        return "–"
    change = result.ttft_ratio - 1
    return f"{'+' if change >= 0 else '−'}{abs(change):.0%}"


def fmt_price(result: PromptResult) -> str:
    """'+99 MiB'."""
    extra = result.memory_extra_bytes
    if extra is None:
        return "–"
    return f"{'+' if extra >= 0 else '−'}{fmt_bytes(abs(extra))}"


def leaderboard(
    document: TuneDocument, prompt: str | None
) -> list[tuple[CandidateResult, list[str]]]:
    """The candidates ranked on ``prompt`` (None: overall), with their cells, best first.

    Keeps first, then candidates still in the race, then those it left out, then drops and
    failures; by speedup within each.
    """
    order = {
        Verdict.KEEP: 0,
        Verdict.INCONCLUSIVE: 1,
        Verdict.PENDING: 1,
        Verdict.DROP: 3,
        Verdict.FAILED: 4,
    }
    rows = []
    for c in document.candidates:
        result = c.overall if prompt is None else c.results.get(prompt)
        if result is None or (
            result.speedup is None and result.verdict != Verdict.FAILED and result.predicted is None
        ):
            continue
        verdict = verdict_text(result)
        if c.out_after is not None and result.verdict in (Verdict.INCONCLUSIVE, Verdict.PENDING):
            why = _unsettled(result)
            verdict = f"{why + ' · ' if why else ''}out after round {c.out_after}"
            if c.rounds == 0:
                verdict = "not timed: predicted behind"
        cells = [
            c.label,
            fmt_speedup(result),
            fmt_predicted(result),
            fmt_ttft(result),
            fmt_price(result),
            "–" if result.acceptance is None else f"{result.acceptance:.0%}",
            "–"
            if result.mean_acceptance_length is None
            else f"{result.mean_acceptance_length:.1f}",
            str(result.rounds),
            verdict,
        ]
        rank = order.get(result.verdict, 5)
        if c.out_after is not None and rank == 1:
            rank = 2  # left out of the race: below those still in it
        rows.append((rank, -(result.speedup or 0.0), c, cells))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(c, cells) for _, _, c, cells in rows]


def verdict_text(result: PromptResult) -> str:
    """The verdict cell, with why an inconclusive one is open as compare's reason says it:
    'keep', 'drop · net loss', 'inconclusive · too noisy', 'inconclusive · one round'."""
    why = _unsettled(result) if result.verdict == Verdict.INCONCLUSIVE else None
    text = f"{result.verdict}{' · ' + why if why else ''}"
    return text + (" · net loss" if result.net_loss else "")


def _unsettled(result: PromptResult) -> str | None:
    """Why ``result`` is not settled ('a tie', 'too noisy', 'one round', ...), or None."""
    if result.unsettled is not None:
        return str(result.unsettled)
    # A file written before the judge said why kept it in the reason's first words.
    return str(Unsettled.TIE) if result.reason.startswith("a tie") else None


def noise_line(document: TuneDocument) -> str | None:
    """'noise floor ±3% (every config against itself, round to round)', once measured."""
    noise = max((r.noise_floor for r in document.compare.summary if r.noise_floor), default=None)
    if noise is None:
        return None
    text = f"noise floor ±{noise:.0%} (every config against itself, round to round)"
    return text + (": too noisy to call anything" if noise > TOO_NOISY else "")


def cost_line(document: TuneDocument) -> str:
    """'cost model: decode 24 ms + 3.1 ms per drafted token (ngram), median error 4 %; round
    one ranked by prediction'."""
    model = document.cost_model
    how = f"round one ranked by {document.ranked_by}"
    if model is None:
        return f"cost model: not fitted yet; {how}"
    parts = [f"decode {model.decode_ms:.3g} ms"]
    for key, value in model.parameters.items():
        if key.startswith("drafted_ms."):
            parts.append(f"{value:.3g} ms per drafted token ({key.removeprefix('drafted_ms.')})")
        elif key.startswith("step_ms."):
            parts.append(f"{value:.3g} ms per step ({key.removeprefix('step_ms.')})")
    error = model.median_abs_error
    tail = f", median error {error:.0%}" if error is not None else ""
    return f"cost model: {' + '.join(parts)}{tail}; {how}"


def replica_line(document: TuneDocument) -> str | None:
    """'round one: 5 of 25 candidates ran, 20 replayed from the baseline's tokens (replicas
    checked on real runs: ngram-simple 5/5 exact, ...)', when any candidate is replayed."""
    replayed = [c for c in document.space if c.replayed]
    if not replayed:
        return None
    plan = document.compare.plan
    # Not the chains made after round one (`tune.chains`): they were no round-one candidate.
    first = [c for c in document.space if "," not in c.type or plan.runs_in(c.text, 1)]
    ran = sum(1 for c in first if plan.runs_in(c.text, 1) and not c.replayed)
    checks = ", ".join(
        f"{r.type}: no run to check it on, its candidates run instead"
        if not r.runs
        else f"{r.type} {r.exact}/{r.runs} exact"
        + ("" if r.used else ": not used, its candidates run instead")
        for r in document.replicas
    )
    text = (
        f"round one: {ran} of {len(first)} candidates ran, {len(replayed)} replayed "
        "from the baseline's tokens by drafter replicas"
    )
    return text + (f" (checked on real runs: {checks})" if checks else " (not checked yet)")


def status_line(document: TuneDocument) -> str:
    """'finished in 412 s of a 600 s budget' / 'budget spent (600 s): ...'."""
    used = f"{document.elapsed_s:.0f} s of a {document.budget_s:.0f} s budget"
    if document.complete:
        return f"race finished: {used}"
    if document.stopped == "budget":
        return f"budget spent: {used}; not everything is settled"
    if document.stopped == "interrupted":
        return f"interrupted after {used}; --resume continues"
    return f"running: {used}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(document: TuneDocument) -> str:
    """The report: status, winners with their command lines, leaderboards, curves, hints."""
    compare = document.compare
    plan = compare.plan
    lines = [
        "# spectui tune",
        "",
        f"- binary: `{compare.binary.path}` ({compare.binary.version or 'unknown version'})",
        f"- model: `{compare.model.path}`",
        f"- {status_line(document)}; {plan.reps} round(s), {len(compare.runs)} runs",
        f"- memory budget: {plan.memory_budget.describe(gpu=False)}",
        f"- {noise_line(document) or 'noise floor: not measured yet'}",
        f"- {cost_line(document)}",
        *([f"- {line}"] if (line := replica_line(document)) else []),
        "- rule (compare's, per prompt and for every prompt pooled): a keep is faster beyond the "
        "noise floor (95 % bootstrap interval of paired speedups), in at least "
        f"{MIN_KEEP_ROUNDS} rounds, within the memory budget, with answers the rule accepts "
        "(unchanged, changed only at a near-tie, or passed by the prompt's checker); one round "
        f"settles nothing, and runs that swing more than ±{TOO_NOISY:.0%} between rounds are "
        "too noisy to call",
        "",
        "## Winners",
        "",
    ]
    for key, winner in document.winners.items():
        if winner is None:
            lines.append(f"- `{key}`: nothing beats the baseline")
        else:
            lines.append(f"- `{key}`: **{winner.config}** {winner.speedup or 0:.2f}x")
            lines += ["", "  ```sh", "  " + shlex.join(winner.args), "  ```", ""]
    lines += ["", "## Settled", ""] + [f"- {line}" for line in document.settled]
    for prompt in [None, *(p.key for p in plan.prompts)]:
        lines += ["", f"## Leaderboard: {prompt or 'overall'}", ""]
        lines.append("| " + " | ".join(LEADERBOARD_COLUMNS) + " |")
        lines.append("|" + "---|" * len(LEADERBOARD_COLUMNS))
        for _, cells in leaderboard(document, prompt):
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    if document.curves:
        lines += ["", "## Knob curves (best overall speedup at each value)", ""]
        for curve in document.curves:
            points = ", ".join(f"{p.value:g}: {p.speedup:.2f}x" for p in curve.points)
            lines.append(f"- {curve.type} `{curve.knob}`: {points}")
    if document.hints:
        lines += ["", "## Hints", ""] + [f"- {h}" for h in document.hints]
    if document.skipped:
        lines += ["", "## Skipped", ""] + [f"- {s.type}: {s.reason}" for s in document.skipped]
    return "\n".join(lines) + "\n"
