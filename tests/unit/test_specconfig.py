"""Spec configs: reading what users type, checking it against a binary, and building argv."""

from __future__ import annotations

from pathlib import Path

import pytest

from spectui.core.errors import SpecConfigError
from spectui.core.llama.binary import Capabilities, parse_help
from spectui.core.llama.specconfig import SpecConfig, replace_spec_args

FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.fixture(scope="module")
def caps() -> Capabilities:
    return parse_help((FIXTURES / "help.txt").read_text())


@pytest.fixture(scope="module")
def old_caps() -> Capabilities:
    return parse_help((FIXTURES / "help-old.txt").read_text())


@pytest.fixture
def draft(tmp_path: Path) -> Path:
    path = tmp_path / "draft.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(24))
    return path


# --- parse --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "types"),
    [
        ("none", ("none",)),
        ("ngram-simple", ("ngram-simple",)),
        ("ngram-mod,ngram-simple", ("ngram-mod", "ngram-simple")),
        ("--spec-type ngram-cache", ("ngram-cache",)),
        ("--spec-type=ngram-map-k", ("ngram-map-k",)),
    ],
)
def test_parse_types(text: str, types: tuple[str, ...]) -> None:
    assert SpecConfig.parse(text).types == types


@pytest.mark.parametrize("flag", ["--draft-model", "--spec-draft-model", "-md"])
def test_parse_draft_model_names(flag: str) -> None:
    spec = SpecConfig.parse(f"draft-simple {flag} 'my models/d.gguf' --spec-draft-n-max 4")
    assert spec.types == ("draft-simple",)
    assert spec.draft_model == Path("my models/d.gguf")
    assert spec.draft_n_max == 4
    assert spec.extra_args == ()


def test_parse_limits_and_extras() -> None:
    spec = SpecConfig.parse(
        "ngram-simple --spec-draft-n-min 1 --spec-ngram-simple-size-n 3 --spec-default "
        "--spec-draft-p-min=-1"
    )
    assert spec.draft_n_min == 1
    assert spec.extra_args == (
        "--spec-ngram-simple-size-n",
        "3",
        "--spec-default",
        "--spec-draft-p-min",
        "-1",
    )


def test_parse_uses_the_remembered_draft_model_unless_given(tmp_path: Path) -> None:
    remembered = tmp_path / "remembered.gguf"
    assert SpecConfig.parse("draft-simple", draft_model=remembered).draft_model == remembered
    spec = SpecConfig.parse("draft-simple -md other.gguf", draft_model=remembered)
    assert spec.draft_model == Path("other.gguf")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ngram-simple --ctx-size 8192", "may only change --spec-"),
        ("ngram-simple -c 8192", "may only change --spec-"),
        ("ngram-simple stray", "unexpected 'stray'"),
        ("", "empty"),
        ("--spec-draft-n-max 4", "names no spec type"),
        ("draft-simple -md", "needs a value"),
        ("ngram-simple --spec-draft-n-max four", "whole number"),
        ("ngram-simple --spec-draft-n-max -2", "0 or more"),
        ("ngram-simple 'unclosed", "cannot read"),
        (",", "no spec type"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(SpecConfigError, match=message) as caught:
        SpecConfig.parse(text)
    assert "\n" not in str(caught.value)


# --- validate_for / to_args ---------------------------------------------------------------------


def test_to_args_uses_canonical_names(caps: Capabilities, draft: Path) -> None:
    spec = SpecConfig.parse(f"draft-simple -md {draft} --spec-draft-n-max 4 --spec-draft-n-min 1")
    args = spec.to_args(caps)
    assert args == [
        "--spec-type",
        "draft-simple",
        "--spec-draft-model",
        str(draft),
        "--spec-draft-n-max",
        "4",
        "--spec-draft-n-min",
        "1",
    ]
    assert not set(args) & caps.removed_flags


def test_to_args_renames_aliases_in_extras(caps: Capabilities, draft: Path) -> None:
    spec = SpecConfig(types=("draft-simple",), draft_model=draft, extra_args=("-ngld", "99"))
    assert spec.to_args(caps)[-2:] == ["--spec-draft-ngl", "99"]


def test_draft_model_is_passed_only_to_draft_types(caps: Capabilities, draft: Path) -> None:
    assert SpecConfig(types=("ngram-simple",), draft_model=draft).to_args(caps) == [
        "--spec-type",
        "ngram-simple",
    ]
    assert SpecConfig(types=("draft-mtp",)).to_args(caps) == ["--spec-type", "draft-mtp"]


def test_unsupported_type_lists_the_supported_ones(old_caps: Capabilities) -> None:
    with pytest.raises(
        SpecConfigError, match=r"'ngram-mod'.*\(it supports: none, ngram-simple, ngram-cache\)"
    ):
        SpecConfig.parse("ngram-mod").validate_for(old_caps)


def test_draft_type_needs_a_draft_model(caps: Capabilities) -> None:
    with pytest.raises(SpecConfigError, match="'draft-eagle3' needs a draft model"):
        SpecConfig.parse("draft-eagle3").validate_for(caps)


def test_missing_draft_model_file(caps: Capabilities, tmp_path: Path) -> None:
    missing = tmp_path / "gone.gguf"
    with pytest.raises(SpecConfigError, match=f"draft model {missing}: no such file"):
        SpecConfig(types=("draft-simple",), draft_model=missing).validate_for(caps)


def test_draft_model_that_is_not_gguf(caps: Capabilities, tmp_path: Path) -> None:
    bogus = tmp_path / "model.bin"
    bogus.write_bytes(b"PK\x03\x04whatever")
    with pytest.raises(SpecConfigError, match="zip archive"):
        SpecConfig(types=("draft-simple",), draft_model=bogus).validate_for(caps)


def test_removed_flag_names_its_replacement(caps: Capabilities) -> None:
    spec = SpecConfig.parse("ngram-simple --spec-ngram-size-n 3")
    with pytest.raises(
        SpecConfigError, match=r"removed.*use the respective --spec-ngram-\*-size-n"
    ):
        spec.to_args(caps)


def test_same_flag_passes_on_a_binary_that_has_it(old_caps: Capabilities) -> None:
    spec = SpecConfig.parse("ngram-simple --spec-ngram-size-n 3")
    assert spec.to_args(old_caps) == ["--spec-type", "ngram-simple", "--spec-ngram-size-n", "3"]


def test_removed_alias_in_extras_is_rejected(caps: Capabilities) -> None:
    spec = SpecConfig(types=("ngram-mod",), extra_args=("--draft-max", "8"))
    with pytest.raises(
        SpecConfigError, match=r"--draft-max has been removed.*use --spec-draft-n-max"
    ):
        spec.validate_for(caps)


def test_unlisted_flag_is_rejected(caps: Capabilities) -> None:
    with pytest.raises(SpecConfigError, match="--spec-bogus is not an option"):
        SpecConfig.parse("ngram-simple --spec-bogus 1").validate_for(caps)


def test_value_flag_without_value_is_rejected(caps: Capabilities) -> None:
    # Without the help, parse cannot know that this flag wants a value; the check can.
    spec = SpecConfig.parse("ngram-simple --spec-ngram-simple-size-n")
    with pytest.raises(SpecConfigError, match="--spec-ngram-simple-size-n needs a value"):
        spec.validate_for(caps)


def test_field_flag_in_extras_is_rejected(caps: Capabilities) -> None:
    spec = SpecConfig(types=("ngram-simple",), extra_args=("--spec-type", "ngram-mod"))
    with pytest.raises(SpecConfigError, match="belongs in the spec config itself"):
        spec.validate_for(caps)


def test_limits_need_the_flags(old_caps: Capabilities) -> None:
    with pytest.raises(SpecConfigError, match="no --spec-draft-n-max"):
        SpecConfig(types=("ngram-simple",), draft_n_max=4).validate_for(old_caps)


def test_binary_without_spec_type() -> None:
    bare = parse_help("--draft-max N                           tokens to draft\n")
    assert SpecConfig().to_args(bare) == []
    with pytest.raises(SpecConfigError, match="no --spec-type"):
        SpecConfig(types=("ngram-simple",)).to_args(bare)


def test_empty_types_are_rejected(caps: Capabilities) -> None:
    with pytest.raises(SpecConfigError, match="no spec type"):
        SpecConfig(types=()).validate_for(caps)


# --- from_args / replace_spec_args --------------------------------------------------------------

ADOPTED = [
    "/opt/llama/llama-server",
    "-m",
    "target.gguf",
    "--spec-type",
    "draft-simple",
    "-md",
    "d.gguf",
    "--draft-max",
    "8",
    "-ngld",
    "99",
    "--no-spec-draft-backend-sampling",
    "--port",
    "8080",
    "-c",
    "4096",
]


def test_from_args_reads_legacy_names() -> None:
    spec = SpecConfig.from_args(ADOPTED)
    assert spec is not None
    assert spec.types == ("draft-simple",)
    assert spec.draft_model == Path("d.gguf")
    assert spec.draft_n_max == 8
    # Without the help, '-ngld' cannot be known as a spec flag; '--no-spec-*' can.
    assert spec.extra_args == ("--no-spec-draft-backend-sampling",)


def test_from_args_with_caps_renames_aliases(caps: Capabilities) -> None:
    spec = SpecConfig.from_args(ADOPTED, caps)
    assert spec is not None
    assert spec.extra_args == ("--spec-draft-ngl", "99", "--no-spec-draft-backend-sampling")


def test_from_args_without_spec_flags() -> None:
    assert SpecConfig.from_args(["llama-server", "-m", "x.gguf", "--port", "8080"]) is None


def test_round_trip(caps: Capabilities, draft: Path) -> None:
    spec = SpecConfig.parse(f"draft-simple -md {draft} --spec-draft-n-max 4 --spec-draft-p-min 0.5")
    argv = ["llama-server", "-m", "t.gguf", *spec.to_args(caps)]
    assert SpecConfig.from_args(argv, caps) == spec


def test_replace_spec_args_strips_every_alias(caps: Capabilities) -> None:
    argv = [*ADOPTED, "--spec-ngram-size-n", "3", "--draft-p-min=0.5", "--spec-default"]
    new = SpecConfig.parse("ngram-simple --spec-ngram-simple-size-n 3")
    assert replace_spec_args(argv, new, caps) == [
        "/opt/llama/llama-server",
        "-m",
        "target.gguf",
        "--port",
        "8080",
        "-c",
        "4096",
        "--spec-type",
        "ngram-simple",
        "--spec-ngram-simple-size-n",
        "3",
    ]


def test_replace_spec_args_refuses_what_the_binary_cannot_run(caps: Capabilities) -> None:
    argv = list(ADOPTED)
    with pytest.raises(SpecConfigError):
        replace_spec_args(argv, SpecConfig.parse("ngram-bogus"), caps)
    assert argv == ADOPTED


def test_synthetic_acceptance_is_labelled_and_passed_through(caps: Capabilities) -> None:
    spec = SpecConfig.parse("draft-simple --spec-synth-len 3 --spec-draft-n-max 4")
    assert spec.synthetic
    assert spec.label == "SYNTHETIC draft-simple (n-max 4, synth len 3)"  # never taken for real
    assert not SpecConfig.parse("ngram-simple --spec-ngram-size-n 3").synthetic
    assert "SYNTHETIC" not in SpecConfig.parse("ngram-simple --spec-ngram-size-n 3").label
    args = SpecConfig.parse("ngram-simple --spec-synth-len 2.5").to_args(caps)
    assert args[-2:] == ["--spec-synth-len", "2.5"]  # the captured --help lists it


# --- what each type needs, from the GGUF headers (#28 item 4) ---------------------------------


def test_header_facts_of_targets_and_drafters(tmp_path: Path) -> None:
    from helpers.gguf_files import dflash, eagle3, target
    from spectui.core.llama.gguf_meta import gguf_facts

    qwen = gguf_facts(target(tmp_path / "q.gguf", "qwen35", mtp_layers=1))
    assert (qwen.architecture, qwen.mtp_layers, qwen.nextn_tensors) == ("qwen35", 1, True)
    gemma = gguf_facts(target(tmp_path / "g.gguf", "gemma3"))
    assert (gemma.mtp_layers, gemma.nextn_tensors, gemma.mtp_key) == (
        0, False, "gemma3.nextn_predict_layers",
    )  # fmt: skip
    assert gguf_facts(eagle3(tmp_path / "e.gguf")).target_layers == 3
    assert gguf_facts(dflash(tmp_path / "s.gguf", markov=True)).markov_head
    assert not gguf_facts(dflash(tmp_path / "f.gguf", markov=False)).markov_head


@pytest.mark.parametrize(
    ("name", "target_arch", "mtp", "drafter", "reason"),
    [
        ("draft-mtp", "qwen35", 1, None, None),
        ("draft-mtp", "gemma3", None, None, "no MTP layers in this GGUF (t.gguf: "
         "gemma3.nextn_predict_layers is 0 or absent)"),
        ("draft-mtp", "qwen35", 0, None, "no MTP layers in this GGUF"),
        ("draft-mtp", "llama", 1, None, "llama.cpp builds no MTP graph for arch 'llama'"),
        ("draft-eagle3", "qwen35", None, None, "needs an EAGLE-3 drafter (arch eagle3) trained "
         "for this model (--draft-model): none given"),
        ("draft-eagle3", "qwen35", None, "eagle3", None),
        ("draft-eagle3", "llama", None, "eagle3", None),
        ("draft-eagle3", "gemma3", None, "eagle3", "an EAGLE-3 drafter needs a target that "
         "exposes its hidden states: arch 'gemma3' (t.gguf) does not"),
        ("draft-eagle3", "qwen35", None, "eagle3-2", "reads 2 target layers; an EAGLE-3 "
         "drafter reads exactly 3"),
        ("draft-eagle3", "qwen35", None, "dflash", "is arch 'dflash', not an EAGLE-3 drafter"),
        ("draft-dflash", "qwen35", None, "dflash", None),
        ("draft-dflash", "qwen35", None, "dspark", None),
        ("draft-dflash", "qwen35", None, "eagle3", "is arch 'eagle3', not a DFlash/DSpark"),
        ("draft-dflash", "gemma3", None, "dflash", "a DFlash/DSpark drafter needs a target"),
        ("draft-dspark", "qwen35", None, "dspark", None),
        ("draft-dspark", "qwen35", None, "dflash", "has no Markov head (markov_w1): a DFlash "
         "drafter, use draft-dflash"),
        ("draft-simple", "gemma3", None, "gemma3", None),
        ("draft-simple", "qwen35", None, "eagle3", "is an EAGLE-3 drafter (arch eagle3), not a "
         "standalone draft model"),
        ("ngram-mod", "gemma3", None, None, None),
        ("none", "gemma3", None, None, None),
    ],
)  # fmt: skip
def test_each_types_needs_from_the_headers(
    tmp_path: Path,
    name: str,
    target_arch: str,
    mtp: int | None,
    drafter: str | None,
    reason: str | None,
) -> None:
    from helpers.gguf_files import dflash, eagle3, target
    from spectui.core.llama.gguf_meta import gguf_facts
    from spectui.core.llama.spectypes import type_reason

    facts = gguf_facts(target(tmp_path / "t.gguf", target_arch, mtp))
    draft_path = tmp_path / "d.gguf"
    if drafter == "eagle3":
        eagle3(draft_path)
    elif drafter == "eagle3-2":
        eagle3(draft_path, target_layers=2)
    elif drafter in ("dflash", "dspark"):
        dflash(draft_path, markov=drafter == "dspark")
    elif drafter is not None:
        target(draft_path, drafter)
    draft = gguf_facts(draft_path) if drafter else None
    found = type_reason(
        name, target=facts, draft=draft, draft_model=draft_path if drafter else None
    )
    if reason is None:
        assert found is None
    else:
        assert found is not None and reason in found
        assert "\n" not in found


@pytest.mark.parametrize(
    ("types", "reason"),
    [
        (("ngram-mod", "draft-mtp"), None),
        (("ngram-simple", "ngram-mod", "draft-eagle3"), None),
        (("ngram-mod", "ngram-mod"), "'ngram-mod' is named twice"),
        (("none", "ngram-mod"), "'none' cannot be part of a chain"),
        (("draft-simple", "draft-eagle3"), "would share llama-server's one draft model"),
        (("draft-mtp", "draft-dflash"), "draft-mtp and draft-dflash cannot share"),
    ],
)
def test_chains_that_cannot_run_together(types: tuple[str, ...], reason: str | None) -> None:
    from spectui.core.llama.spectypes import chain_reason

    found = chain_reason(types)
    assert found is None if reason is None else reason in (found or "")


def test_validation_reads_the_target_and_the_draft_model(
    caps: Capabilities, tmp_path: Path
) -> None:
    from helpers.gguf_files import dflash, eagle3, target

    gemma = target(tmp_path / "gemma.gguf", "gemma3")
    qwen = target(tmp_path / "qwen.gguf", "qwen35", mtp_layers=1)
    with pytest.raises(SpecConfigError, match=r"'draft-mtp' cannot run here: no MTP layers"):
        SpecConfig(types=("draft-mtp",)).validate_for(caps, gemma)
    SpecConfig(types=("ngram-mod", "draft-mtp")).validate_for(caps, qwen)
    SpecConfig(types=("draft-mtp",)).validate_for(caps)  # no model given: not checked
    drafter = eagle3(tmp_path / "eagle.gguf")
    with pytest.raises(SpecConfigError, match="exposes its hidden states"):
        SpecConfig(types=("draft-eagle3",), draft_model=drafter).to_args(caps, gemma)
    wrong = dflash(tmp_path / "flash.gguf", markov=False)
    with pytest.raises(SpecConfigError, match="not an EAGLE-3 drafter"):
        SpecConfig(types=("draft-eagle3",), draft_model=wrong).validate_for(caps, qwen)
    args = SpecConfig(types=("draft-eagle3",), draft_model=drafter).to_args(caps, qwen)
    assert args[:2] == ["--spec-type", "draft-eagle3"]


def test_a_chain_naming_an_unknown_type_says_so(caps: Capabilities) -> None:
    with pytest.raises(SpecConfigError) as error:
        SpecConfig.parse("ngram-mod,ngram-magic").validate_for(caps)
    message = str(error.value)
    assert "'ngram-magic' in the chain 'ngram-mod,ngram-magic' is not supported" in message
    assert "ngram-simple" in message  # the types it does support
    with pytest.raises(SpecConfigError, match="would share llama-server's one draft model"):
        SpecConfig.parse("draft-simple,draft-dflash").validate_for(caps)
