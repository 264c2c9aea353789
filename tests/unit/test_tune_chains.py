"""Tune's chains: made after round one from its best n-gram candidates with the model drafter,
raced from round two (a scripted engine whose speed follows each config's knobs; no server)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from helpers.engines import ScriptedEngine
from spectui.core.compare.costmodel import PredictedSpeedup
from spectui.core.compare.models import CompareConfig
from spectui.core.compare.setup import parse_configs
from spectui.core.compare.summary_row import SummaryRow
from spectui.core.llama.binary import parse_help
from spectui.core.llama.specconfig import SpecConfig
from spectui.core.tune.chains import chain_config, chain_picks, with_chains
from spectui.core.tune.export import replica_line
from spectui.core.tune.models import CandidateResult, PromptResult, TuneDocument
from spectui.core.tune.runner import TuneFinished, TuneRunner, new_document
from spectui.core.tune.space import Candidate, ModelFacts, build_space, chain_of

from .compare_helpers import document, plan

SIZE_N = "--spec-ngram-simple-size-n"
SPACE = [
    Candidate(type="ngram-simple", knobs={SIZE_N: 12}, text="ngram-simple"),
    Candidate(type="ngram-simple", knobs={SIZE_N: 4}, text=f"ngram-simple {SIZE_N} 4"),
    Candidate(type="ngram-mod", knobs={}, text="ngram-mod"),
    Candidate(type="ngram-cache", knobs={}, text="ngram-cache"),
    Candidate(type="draft-simple", knobs={"--spec-draft-n-max": 3}, text="draft-simple"),
    Candidate(
        type="draft-simple",
        knobs={"--spec-draft-n-max": 8},
        text="draft-simple --spec-draft-n-max 8",
    ),
]
BEST_CHAIN = f"ngram-simple,draft-simple {SIZE_N} 4 --spec-draft-n-max 8"
NEXT_CHAIN = "ngram-mod,draft-simple --spec-draft-n-max 8"
SPEEDS = {
    "none": 1000.0,
    "ngram-simple": 900.0,
    f"ngram-simple {SIZE_N} 4": 600.0,  # the best n-gram candidate: its knobs go in the chain
    "ngram-mod": 800.0,
    "ngram-cache": 1400.0,
    "draft-simple": 900.0,
    "draft-simple --spec-draft-n-max 8": 700.0,
    BEST_CHAIN: 400.0,
    NEXT_CHAIN: 650.0,
}
"""Total ms of a run per config (its types and knobs)."""


@dataclass
class KnobEngine(ScriptedEngine):
    """A scripted engine whose speed is the config's own: its types and every knob."""

    def _kind(self, spec: SpecConfig) -> str:
        knobs = [str(spec.draft_n_max)] if spec.draft_n_max is not None else []
        if knobs:
            knobs.insert(0, "--spec-draft-n-max")
        extra = [*spec.extra_args, *knobs]
        return " ".join([",".join(spec.types), *extra])


def _config(text: str) -> CompareConfig:
    spec = SpecConfig.parse(text)
    args = ("--spec-type", ",".join(spec.types), *text.split()[1:])
    return CompareConfig(name=text, spec=spec, args=args)


def _document() -> TuneDocument:
    p = plan(("none",), ("a",), reps=1)
    p = p.model_copy(
        update={"configs": tuple(_config(t) for t in ["none", *(c.text for c in SPACE)])}
    )
    return new_document(
        document(p),
        budget_s=600.0,
        launch=["llama-server", "-m", "m.gguf"],
        skipped=[],
        space=SPACE,
    )


async def _tune(doc: TuneDocument, engine: ScriptedEngine, out: Path) -> TuneDocument:
    final = None
    async for event in TuneRunner(engine, doc, outputs=[out]).run():
        if isinstance(event, TuneFinished):
            final = event.document
    assert final is not None
    return final


async def test_chains_of_round_ones_best_ngram_candidates_race_from_round_two(
    tmp_path: Path,
) -> None:
    engine = KnobEngine(speeds=SPEEDS)
    doc = await _tune(_document(), engine, tmp_path / "t.json")
    active = doc.compare.plan.active
    assert active is not None and len(active) >= 2
    # Round one had no chain; round two measures the two made from its ranking.
    assert not any("," in name for name in active[0])
    assert {BEST_CHAIN, NEXT_CHAIN} <= set(active[1])
    chains = [c for c in doc.space if "," in c.type]
    assert [c.text for c in chains] == [BEST_CHAIN, NEXT_CHAIN]
    # Each n-gram member with its best knobs, and the model drafter's best: ngram-simple at
    # its defaults and ngram-cache (the slowest) head no chain.
    config = doc.compare.plan.config(BEST_CHAIN)
    assert config.args == (
        "--spec-type", "ngram-simple,draft-simple", "--spec-draft-n-max", "8", SIZE_N, "4",
    )  # fmt: skip
    assert config.spec.types == ("ngram-simple", "draft-simple")
    ran = [kind for what, kind, _ in engine.log if what == "run"]
    first_chain = ran.index(BEST_CHAIN)
    assert all("," not in kind for kind in ran[:first_chain])
    assert ran.count(BEST_CHAIN) == doc.compare.plan.planned_rounds(BEST_CHAIN)
    results = {c.config: c for c in doc.candidates}
    assert results[BEST_CHAIN].rounds >= 1 and results[BEST_CHAIN].label == (
        "ngram-simple,draft-simple (size-n 4, n-max 8)"
    )
    winner = doc.winners["overall"]
    assert winner is not None and winner.config == BEST_CHAIN
    assert doc.complete
    # The document reads back, chains and all; adding chains again adds nothing.
    again = TuneDocument.model_validate_json((tmp_path / "t.json").read_text())
    assert again == doc
    assert with_chains(again) is again
    # The report counts round one's candidates without the chains made after it.
    space = [c.model_copy(update={"replayed": c.text == "ngram-mod"}) for c in doc.space]
    line = replica_line(doc.model_copy(update={"space": space}))
    assert line is not None and "5 of 6 candidates ran, 1 replayed" in line


def _result(text: str, measured: float | None, predicted: float | None = None) -> CandidateResult:
    guess = (
        PredictedSpeedup(speedup=predicted, low=predicted, high=predicted) if predicted else None
    )
    overall = PromptResult(speedup=measured, predicted=guess)
    return CandidateResult(config=text, label=text, type=text.split()[0], args=[], overall=overall)


def test_the_ranking_is_by_prediction_where_there_is_one() -> None:
    results = [
        _result("ngram-simple", 1.1, predicted=1.5),
        _result(f"ngram-simple {SIZE_N} 4", 1.3, predicted=1.2),
        _result("ngram-mod", 1.2, predicted=1.4),
        _result("ngram-cache", 2.0),  # only measured: unranked by prediction
        _result("draft-simple", 1.0),
    ]
    picks = chain_picks(SPACE, results, [], by_prediction=True)
    assert [(n.text, m.text) for _, n, m in picks] == [
        ("ngram-simple", "draft-simple"),  # model drafter: its defaults (none predicted)
        ("ngram-mod", "draft-simple"),
    ]
    assert picks[0][0].text == "ngram-simple,draft-simple"
    # Ranked by timings, the measured speedups count: ngram-cache leads, then size-n 4.
    picks = chain_picks(SPACE, results, [], by_prediction=False)
    assert [n.text for _, n, _ in picks] == ["ngram-cache", f"ngram-simple {SIZE_N} 4"]


def test_no_model_drafter_no_chain_and_an_unranked_space_none_either() -> None:
    ngrams = [c for c in SPACE if c.type.startswith("ngram")]
    results = [_result(c.text, 1.5) for c in ngrams]
    assert chain_picks(ngrams, results, []) == []
    assert chain_picks(SPACE, [_result("draft-simple", 1.2)], []) == []


def test_a_plan_past_round_one_is_left_alone() -> None:
    doc = _document()
    later = doc.compare.model_copy(update={"plan": doc.compare.plan.model_copy(update={"reps": 2})})
    moved = doc.model_copy(update={"compare": later})
    assert with_chains(moved) is moved


HELP = (Path(__file__).parent.parent / "fixtures" / "help.txt").read_text()


def test_the_first_rounds_space_has_no_chain_and_a_chain_of_its_points_launches() -> None:
    caps = parse_help(HELP)
    candidates, _ = build_space(caps, HELP, ModelFacts(mtp_layers=1))
    assert not [c for c in candidates if "," in c.type]
    mod = next(c for c in candidates if c.type == "ngram-mod" and " --" in c.text)
    mtp = next(c for c in candidates if c.type == "draft-mtp" and " --" in c.text)
    chain = chain_of(mod, mtp)
    assert chain.type == "ngram-mod,draft-mtp" and chain.knobs == {**mod.knobs, **mtp.knobs}
    assert chain.settings["--spec-ngram-mod-n-match"] == mod.settings["--spec-ngram-mod-n-match"]
    # As compare reads and launches it, and as the chain's config is put together from its
    # members' configs: the same arguments, in another order.
    (_, mod_config, mtp_config, chain_config_) = parse_configs(
        ["none", mod.text, mtp.text, chain.text], caps
    )
    made = chain_config(chain, mod_config, mtp_config)
    assert made is not None and made.name == chain_config_.name
    assert made.spec == chain_config_.spec
    assert _flag_pairs(made.args) == _flag_pairs(chain_config_.args)
    assert not chain.replayed and chain.predicted_from is None


def _flag_pairs(args: tuple[str, ...]) -> set[tuple[str, str]]:
    return set(zip(args[::2], args[1::2], strict=True))


def test_a_member_that_failed_heads_no_chain() -> None:
    results = [_result("ngram-simple", 1.5), _result("ngram-mod", 1.2), _result("draft-simple", 1)]
    failed = SummaryRow(config="ngram-simple", prompt="a", runs=1, planned=1, failed=1)
    failed = failed.model_copy(update={"verdict": "failed"})
    assert [n.text for _, n, _ in chain_picks(SPACE, results, [failed])] == ["ngram-mod"]
