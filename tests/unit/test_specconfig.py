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
