"""Changed answers, explained (issue #21 §4) and noise that is honest (§5), on recorded runs.

The timings are those of the decision-rule tests (a 2-core VM, Gemma 3 270M, table-row): the
baseline ±2-4 % round to round, ngram-mod ~2.2x. The answers are built token by token so the
divergence lands on a known token; the baseline's odds there come from a recorded probe (the
real server's ``completion_probabilities``, `tests/fixtures/completion-n-probs.json`) or are set.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import httpx
import pytest

from spectui.core.compare.checkers import Checker
from spectui.core.compare.divergence import (
    NEAR_TIE_MAX_LOGIT_GAP,
    HttpProber,
    ProbeError,
    ProbeRequest,
    classify,
    parse_probabilities,
    with_evidence,
)
from spectui.core.compare.models import ComparePlan
from spectui.core.compare.records import RunRecord
from spectui.core.compare.summary import annotate, report_rows
from spectui.core.compare.summary_row import SummaryRow
from spectui.core.compare.textdiff import TokenProb

from .compare_helpers import plan, record

FIXTURES = Path(__file__).parent.parent / "fixtures"
BASE_MS = [3010.0, 2950.0, 3080.0]
FAST_MS = [1350.0, 1322.0, 1381.0]
BASELINE_TOKENS = ["| 6 ", "| Farah ", "| engineer ", "| Dublin ", "|"]
"""The baseline's answer, token by token."""
NEAR_TIE = [TokenProb(token="| engineer ", prob=0.41), TokenProb(token="| Engineer ", prob=0.40)]
SURE = [TokenProb(token="| engineer ", prob=0.92), TokenProb(token="| Engineer ", prob=0.03)]


def _plan(*, check: Checker | None = None, strict: bool = False) -> ComparePlan:
    p = plan(
        ("none", "ngram-mod"),
        ("table-row",),
        reps=3,
        checks={"table-row": check} if check else None,
    )
    return p.model_copy(update={"identical_answers": strict})


def _runs(
    cfg_tokens: list[str],
    *,
    top: list[TokenProb] | None = None,
    cfg_ms: list[float] = FAST_MS,
    base_ms: list[float] = BASE_MS,
    base_check: str | None = None,
    cfg_check: str | None = None,
) -> list[RunRecord]:
    """Three rounds; the candidate answers ``cfg_tokens``; ``top``: the probe's answer."""
    out = []
    for round_, (b, c) in enumerate(zip(base_ms, cfg_ms, strict=True), start=1):
        out.append(
            record("none", "table-row", round_, seq=10 * round_, total_ms=b,
                   tokens_text=BASELINE_TOKENS, check_status=base_check)
        )  # fmt: skip
        out.append(
            record("ngram-mod", "table-row", round_, seq=10 * round_ + 1, total_ms=c,
                   tokens_text=cfg_tokens, check_status=cfg_check)
        )  # fmt: skip
    if top is None:
        return out
    # What the runner does after its probe: the evidence on each changed run's divergence.
    p = _plan()
    probed = []
    for r in annotate(p, out):
        if r.divergence is not None and r.config != "none":
            r = r.model_copy(update={"divergence": with_evidence(r.divergence, top)})
        probed.append(r)
    return probed


def _row(p: ComparePlan, records: list[RunRecord]) -> SummaryRow:
    return next(r for r in report_rows(p, records) if r.config == "ngram-mod")


CHANGED = ["| 6 ", "| Farah ", "| Engineer ", "| Dublin ", "|"]
"""The candidate's answer: the other side of the baseline's near-tie at token 2."""
WRONG = ["| 6 ", "| Farah ", "| pilot ", "| Dublin ", "|"]


# --- the rule's decisions -------------------------------------------------------------------


def test_identical_answers_are_kept() -> None:
    row = _row(_plan(), _runs(BASELINE_TOKENS))
    assert row.verdict == "keep"
    assert row.reason.endswith("same answers")
    assert row.divergence_note is None


def test_a_change_at_a_near_tie_is_a_caveat_with_the_verdict_not_a_drop() -> None:
    row = _row(_plan(), _runs(CHANGED, top=NEAR_TIE))
    assert row.verdict == "keep"
    assert (row.near_tie_changes, row.divergent_changes, row.compared) == (3, 0, 3)
    assert row.divergence_note == (
        "answer differs from token 2 (3 runs), at a near-tie 0.41/0.40 — read both"
    )
    assert row.reason.startswith("2.23x faster")
    assert row.reason.endswith("no extra memory, " + row.divergence_note)


def test_the_same_change_where_the_baseline_was_sure_drops_it() -> None:
    row = _row(_plan(), _runs(CHANGED, top=SURE))
    assert row.verdict == "drop"
    assert row.divergent_changes == 3
    assert row.reason.startswith("3 of 3 answers differ from the baseline (at token 2:")
    assert "(divergent 0.92/0.03)" in row.reason
    assert "2.23x faster" in row.reason  # the speed is still said


def test_an_unexplained_change_drops_it() -> None:
    # No probe (no server to ask, or it failed): nothing shows the change is harmless.
    row = _row(_plan(), _runs(CHANGED))
    assert row.verdict == "drop"
    assert row.divergent_changes == 3 and row.near_tie_changes == 0


def test_a_near_tie_that_the_response_did_not_take_is_divergent() -> None:
    # The baseline hesitated between 'engineer' and 'Engineer'; the response said 'pilot'.
    row = _row(_plan(), _runs(WRONG, top=NEAR_TIE))
    assert row.verdict == "drop"
    assert "(divergent 0.41/0.40)" in row.reason


def test_a_failed_checker_drops_it_even_at_a_near_tie() -> None:
    check = Checker(regex=r"engineer")
    row = _row(
        _plan(check=check), _runs(CHANGED, top=NEAR_TIE, base_check="passed", cfg_check="failed")
    )
    assert row.verdict == "drop"
    assert row.reason.startswith("checker failed on 3 of 3 runs (baseline: 0 of 3)")


def test_a_checker_that_passes_vouches_for_a_changed_answer() -> None:
    # Correctness is the prompt's checker when it has one: sure or not, the answer passes.
    check = Checker(regex=r"Farah")
    runs = _runs(CHANGED, top=SURE, base_check="passed", cfg_check="passed")
    row = _row(_plan(check=check), runs)
    assert row.verdict == "keep"
    assert row.vouched_changes == 3 and row.divergent_changes == 0
    assert (
        row.divergence_note
        == "answer differs from token 2 (3 runs), but passes its checker — read both"
    )


def test_a_checker_the_baseline_fails_too_says_nothing_and_the_odds_decide() -> None:
    check = Checker(json_fields=("name",))
    runs = _runs(CHANGED, top=NEAR_TIE, base_check="failed", cfg_check="failed")
    assert _row(_plan(check=check), runs).verdict == "keep"
    runs = _runs(CHANGED, top=SURE, base_check="failed", cfg_check="failed")
    assert _row(_plan(check=check), runs).verdict == "drop"


def test_identical_answers_asked_restores_the_strict_rule() -> None:
    row = _row(_plan(strict=True), _runs(CHANGED, top=NEAR_TIE))
    assert row.verdict == "drop"
    assert "3 of 3 answers differ from the baseline" in row.reason
    assert "identical answers asked" in row.reason
    assert _row(_plan(strict=True), _runs(BASELINE_TOKENS)).verdict == "keep"


def test_a_near_tie_caveat_rides_along_with_a_tie_too() -> None:
    row = _row(_plan(), _runs(CHANGED, top=NEAR_TIE, cfg_ms=[3270.0, 2710.0, 3050.0]))
    assert row.verdict == "inconclusive"
    assert row.reason.startswith("a tie:")
    assert row.reason.endswith("at a near-tie 0.41/0.40 — read both")


# --- noise: every config's spread (§5) -------------------------------------------------------

# The run on a loaded machine: ngram-mod at 0.21x, 0.39x, 1.52x of a steady baseline.
NOISY_MS = [14330.0, 7560.0, 2026.0]


def test_a_candidate_whose_own_runs_swing_is_too_noisy_to_call() -> None:
    row = _row(_plan(), _runs(BASELINE_TOKENS, cfg_ms=NOISY_MS))
    assert row.speedup_vs_baseline == pytest.approx(0.39, abs=0.01)
    assert (round(row.speedup_min or 0, 2), round(row.speedup_max or 0, 2)) == (0.21, 1.52)
    assert row.config_noise is not None and row.config_noise > 1
    assert row.speed_call == "unclear" and row.rounds_needed is None
    assert row.verdict == "inconclusive"
    assert row.reason.startswith("too noisy to call: 0.39x (0.21–1.52, 3 rounds, noise ±")
    assert "this config's own runs changed ±" in row.reason
    assert "more round" not in row.reason


def test_a_swinging_candidate_that_wins_every_round_is_still_a_call() -> None:
    # 1.77x to 2.27x: its own runs swing ±29 %, but no round is anywhere near a tie.
    row = _row(_plan(), _runs(BASELINE_TOKENS, cfg_ms=[1700.0, 1300.0, 1650.0]))
    assert row.config_noise is not None and row.config_noise > 0.25
    assert row.speed_call == "faster"


def test_the_noise_floor_pools_every_configs_rounds() -> None:
    steady = _row(_plan(), _runs(BASELINE_TOKENS))
    noisy = _row(_plan(), _runs(BASELINE_TOKENS, cfg_ms=[2600.0, 3040.0, 2680.0]))
    assert steady.noise_floor == pytest.approx(0.03, abs=0.01)
    assert noisy.noise_floor is not None and noisy.noise_floor > 0.07  # its ±14 % counts


# --- the evidence: classification, the server's answer, the probe --------------------------


@pytest.mark.parametrize(
    ("probs", "response", "kind"),
    [
        ((0.41, 0.40), "b", "near-tie"),
        ((0.092, 0.086), "b", "near-tie"),  # json-rewrite's flip, sequential (gap 0.065)
        ((0.089, 0.074), "b", "near-tie"),  # the same, batched as the probe sees it (0.18)
        ((0.40, 0.30), "b", "near-tie"),  # gap 0.29
        ((0.40, 0.29), "b", "divergent"),  # gap 0.32
        ((0.10, 0.04), "b", "divergent"),  # 0.06 apart, but a whole logit
        ((0.41, 0.40), "c", "divergent"),  # the response took neither side
        ((0.41, 0.40), None, "near-tie"),  # unknown response token: the top two decide
        ((0.41,), "b", "divergent"),
    ],
)
def test_classify(probs: tuple[float, ...], response: str | None, kind: str) -> None:
    top = [TokenProb(token=t, prob=p) for t, p in zip("ab", probs, strict=False)]
    assert classify(top, "a", response) == kind


def test_the_margin_is_a_logit_gap() -> None:
    assert pytest.approx(0.3) == NEAR_TIE_MAX_LOGIT_GAP


def test_probabilities_from_the_real_servers_answer() -> None:
    body = json.loads((FIXTURES / "completion-n-probs.json").read_text())
    top = parse_probabilities(body)
    assert [t.token for t in top] == [" Portugal", " The", " Answer", " Portuguese", " Capital"]
    assert top[0].prob == pytest.approx(0.474, abs=0.001)
    assert all(a.prob >= b.prob for a, b in itertools.pairwise(top))


def test_probabilities_in_the_other_shapes_and_none() -> None:
    post = {"completion_probabilities": [{"top_probs": [{"token": "a", "prob": 0.6}]}]}
    old = {"completion_probabilities": [{"probs": [{"tok_str": "a", "prob": 0.6}]}]}
    assert parse_probabilities(post) == parse_probabilities(old) == [TokenProb(token="a", prob=0.6)]
    with pytest.raises(ProbeError, match="no completion_probabilities"):
        parse_probabilities({"content": "x"})


async def test_the_probe_asks_for_one_token_after_the_prompt_and_the_prefix() -> None:
    seen: list[tuple[str, dict[str, object]]] = []
    answer = json.loads((FIXTURES / "completion-n-probs.json").read_text())

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((request.url.path, body))
        if request.url.path == "/tokenize":
            ids = [2, 10, 11] if body["add_special"] else [20, 21]
            return httpx.Response(200, json={"tokens": ids})
        return httpx.Response(200, json=answer)

    prober = HttpProber(lambda: "http://127.0.0.1:9", transport=httpx.MockTransport(handler))
    top = await prober.top_candidates(ProbeRequest(prompt="Q: x\nA:", prefix=" Lis"))
    assert top[0].token == " Portugal"
    assert seen[0] == ("/tokenize", {"content": "Q: x\nA:", "add_special": True})
    assert seen[1] == ("/tokenize", {"content": " Lis", "add_special": False})
    path, body = seen[2]
    assert path == "/completion"
    assert body["prompt"] == [2, 10, 11, 20, 21]  # prompt and prefix tokenised apart
    assert (body["n_predict"], body["temperature"], body["stream"]) == (1, 0, False)
    assert body["n_probs"] == 5


async def test_a_probe_that_fails_says_why_in_one_line() -> None:
    prober = HttpProber(
        lambda: "http://127.0.0.1:9",
        transport=httpx.MockTransport(lambda _: httpx.Response(503, text="loading")),
    )
    with pytest.raises(ProbeError, match=r"^/tokenize: HTTP 503$"):
        await prober.top_candidates(ProbeRequest(prompt="x", prefix=""))


def test_the_evidence_survives_re_annotation() -> None:
    # The document is re-annotated after every run and on --resume: the probe is not redone.
    runs = _runs(CHANGED, top=NEAR_TIE)
    again = annotate(_plan(), runs)
    changed = [r for r in again if r.divergence is not None]
    assert changed and all(r.divergence and r.divergence.kind == "near-tie" for r in changed)
    d = changed[0].divergence
    assert d is not None
    assert (d.token, d.baseline_token, d.response_token) == (2, "| engineer ", "| Engineer ")
    assert d.baseline_top == NEAR_TIE


# --- a comparison recorded on a loaded machine (the one #19 saw fail) ------------------------


def test_a_comparison_recorded_under_load_is_too_noisy_and_memory_still_decides() -> None:
    # Recorded with tests/integration's command (ngram-mod and a tie vs none, table-row, 3
    # rounds, 64 tokens) while ~6 other test suites shared the 2 cores: ngram-mod ran at 7.3,
    # 2.0 and 5.0 tok/s in its three rounds.
    from spectui.core.compare.budget import MemoryBudget
    from spectui.core.compare.store import load_document

    doc = load_document(FIXTURES / "compare-loaded-machine.json")
    rows = {r.config: r for r in report_rows(doc.plan, doc.runs)}
    mod, tie = rows["ngram-mod"], rows["none --spec-ngram-mod-n-match 12"]
    assert (mod.speedup_low or 0) < 1 < (mod.speedup_high or 0)
    assert mod.verdict == tie.verdict == "inconclusive"
    assert mod.reason.startswith("too noisy to call: 2.78x (0.86–4.52, 3 rounds, noise ±111%)")
    assert "this config's own runs changed ±147% between rounds" in mod.reason
    assert tie.reason.startswith("too noisy to call: 0.94x")
    # Memory is a price whatever the noise: under a 16 MiB budget ngram-mod goes, and says why.
    tight = doc.plan.model_copy(
        update={"memory_budget": MemoryBudget.parse("16MiB", ram_total_bytes=24 * 2**30)}
    )
    rejudged = next(r for r in report_rows(tight, doc.runs) if r.config == "ngram-mod")
    assert rejudged.verdict == "drop"
    assert rejudged.reason.endswith("but +98 MiB RSS (+28%) is over the memory budget of 16 MiB")


def test_reports_show_the_evidence_and_the_rule() -> None:
    from spectui.core.compare.export import fmt_identical, to_csv, to_markdown

    from .compare_helpers import document

    p = _plan()
    doc = document(p).updated(_runs(CHANGED, top=NEAR_TIE), [], [])
    markdown = to_markdown(doc)
    assert "near-tie (within 0.3 logit" in markdown
    assert "(near-tie 0.41/0.40); the baseline's candidates there: '| engineer ' 0.41" in markdown
    assert "at token 2: after" in to_csv(doc)
    row = next(r for r in doc.summary if r.config == "ngram-mod")
    assert fmt_identical(row) == "0/3 +3 tie"
    strict = document(p.model_copy(update={"identical_answers": True})).updated([], [], [])
    assert "identical to the baseline's at temperature 0, or the config is dropped" in (
        to_markdown(strict)
    )


async def test_a_chat_runs_probe_goes_through_the_models_template() -> None:
    paths: list[str] = []
    answer = json.loads((FIXTURES / "completion-n-probs.json").read_text())

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        paths.append(request.url.path)
        if request.url.path == "/apply-template":
            assert body == {"messages": [{"role": "user", "content": "Hi"}]}
            return httpx.Response(200, json={"prompt": "<start_of_turn>user\nHi<end_of_turn>\n"})
        if request.url.path == "/tokenize":
            # The template holds its own special tokens: none are added to it.
            assert body["add_special"] is False
            return httpx.Response(200, json={"tokens": [1, 2]})
        return httpx.Response(200, json=answer)

    prober = HttpProber(lambda: "http://127.0.0.1:9", transport=httpx.MockTransport(handler))
    await prober.top_candidates(ProbeRequest(prompt="Hi", prefix="Hel", chat=True))
    assert paths == ["/apply-template", "/tokenize", "/tokenize", "/completion"]
