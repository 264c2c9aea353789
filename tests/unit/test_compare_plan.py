"""Compare plan: the alternating schedule, warm-ups, and configs checked for fairness."""

from __future__ import annotations

from pathlib import Path

import pytest

from spectui.core.compare.setup import CompareSetupError, parse_configs
from spectui.core.errors import SpecConfigError
from spectui.core.llama.binary import Capabilities, parse_help

from .compare_helpers import help_caps_path, plan


@pytest.fixture(scope="module")
def help_caps() -> Capabilities:
    return parse_help(help_caps_path().read_text())


@pytest.fixture
def draft(tmp_path: Path) -> Path:
    path = tmp_path / "draft.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(24))
    return path


def test_rounds_alternate_configs_and_warmups_come_first() -> None:
    jobs = plan(("none", "ngram-simple", "ngram-mod"), ("a", "b"), reps=2).jobs()
    order = [(j.round, j.config, j.prompt, j.warmup) for j in jobs]
    assert order == [
        (0, "none", "a", True),
        (1, "none", "a", False),
        (1, "none", "b", False),
        (0, "ngram-simple", "a", True),
        (1, "ngram-simple", "a", False),
        (1, "ngram-simple", "b", False),
        (0, "ngram-mod", "a", True),
        (1, "ngram-mod", "a", False),
        (1, "ngram-mod", "b", False),
        (2, "none", "a", False),
        (2, "none", "b", False),
        (2, "ngram-simple", "a", False),
        (2, "ngram-simple", "b", False),
        (2, "ngram-mod", "a", False),
        (2, "ngram-mod", "b", False),
    ]
    assert [j.seq for j in jobs] == list(range(len(jobs)))
    # One server start per config per round: the segment changes exactly when the config does.
    segments = [j.segment for j in jobs]
    assert segments == sorted(segments)
    assert len(set(segments)) == 3 * 2


def test_config_blocks_never_repeat_within_a_round() -> None:
    jobs = [j for j in plan(reps=3).jobs() if not j.warmup]
    for round_ in (1, 2, 3):
        blocks: list[str] = []
        for job in (j for j in jobs if j.round == round_):
            if not blocks or blocks[-1] != job.config:
                blocks.append(job.config)
        assert blocks == ["none", "ngram-simple", "ngram-mod"]


def test_request_is_the_same_for_every_config() -> None:
    p = plan()
    assert p.request(p.prompts[0]).temperature == 0
    assert p.request(p.prompts[0]) == p.request(p.prompts[0])


def test_baseline_is_added_and_put_first(help_caps: Capabilities) -> None:
    configs = parse_configs(["ngram-mod", "ngram-simple"], help_caps)
    assert [c.name for c in configs] == ["none", "ngram-mod", "ngram-simple"]
    assert configs[0].is_baseline
    configs = parse_configs(["ngram-mod", "none"], help_caps)
    assert [c.name for c in configs] == ["none", "ngram-mod"]


def test_config_args_are_canonical(help_caps: Capabilities, draft: Path) -> None:
    (_, cfg) = parse_configs([f"draft-simple -md {draft} --draft-max 4"], help_caps)
    assert cfg.args == (
        "--spec-type",
        "draft-simple",
        "--spec-draft-model",
        str(draft),
        "--spec-draft-n-max",
        "4",
    )
    assert cfg.label == "draft-simple (n-max 4) [draft.gguf]"


def test_default_draft_model_only_for_draft_types(help_caps: Capabilities, draft: Path) -> None:
    (_, ngram, drafting) = parse_configs(
        ["ngram-simple", "draft-simple"], help_caps, draft_model=draft
    )
    assert ngram.spec.draft_model is None
    assert drafting.spec.draft_model == draft


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ngram-simple --ctx-size 8192", "--ctx-size is not a spec flag"),
        ("ngram-simple -m other.gguf", "-m is not a spec flag"),
        ("ngram-frobnicate", "spec type 'ngram-frobnicate' is not supported"),
        ("draft-simple", "needs a draft model"),
        ("", "empty spec config"),
    ],
)
def test_unfair_or_unknown_configs_are_refused(
    help_caps: Capabilities, text: str, message: str
) -> None:
    with pytest.raises(SpecConfigError, match=message) as error:
        parse_configs([text], help_caps)
    assert "\n" not in str(error.value)
    assert str(error.value).startswith(f"config {text!r}")


def test_the_same_config_twice_is_refused(help_caps: Capabilities) -> None:
    with pytest.raises(CompareSetupError, match="launch the same server"):
        parse_configs(["ngram-simple", "--spec-type ngram-simple"], help_caps)
