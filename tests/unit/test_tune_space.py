"""The tune space from a real ``--help`` capture, and the one-line type explanations (§3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spectui.core.drafters.settings import help_defaults
from spectui.core.llama.binary import parse_help
from spectui.core.llama.doctor import DoctorReport, _warnings, format_doctor
from spectui.core.llama.gguf_meta import gguf_metadata, mtp_layers
from spectui.core.llama.specconfig import SPEC_TYPE_INFO, SpecConfig, explain_type, type_problem
from spectui.core.tune.space import ModelFacts, build_space, knob_values

HELP = (Path(__file__).parent.parent / "fixtures" / "help.txt").read_text()
CAPS = parse_help(HELP)


def test_defaults_come_from_the_help() -> None:
    defaults = help_defaults(HELP)
    assert defaults["--spec-draft-n-max"] == "3"
    assert defaults["--spec-ngram-mod-n-match"] == "24"
    assert defaults["--spec-ngram-simple-size-m"] == "48"
    assert defaults["--draft-p-min"] == defaults["--spec-draft-p-min"]  # every name of the entry


def test_knob_ranges_start_at_the_help_default() -> None:
    values = knob_values("draft-simple", CAPS, help_defaults(HELP))
    assert values["--spec-draft-n-max"][0] == 3
    assert set(values["--spec-draft-n-max"]) == {2, 3, 4, 8, 16}
    # A build that moved the default moves the grid with it.
    moved = HELP.replace("speculative decoding (default: 3)", "speculative decoding (default: 6)")
    assert knob_values("draft-simple", CAPS, help_defaults(moved))["--spec-draft-n-max"][0] == 6


def test_without_a_draft_model_only_ngram_types_run() -> None:
    candidates, skipped = build_space(CAPS, HELP, ModelFacts(mtp_layers=0))
    assert {c.type for c in candidates} == {
        "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache",
    }  # fmt: skip
    reasons = {s.type: s.reason for s in skipped}
    assert reasons["draft-simple"].startswith("needs a draft GGUF with the same vocabulary")
    assert reasons["draft-mtp"] == "needs a model with MTP layers — this model has none"
    assert "EAGLE-3" in reasons["draft-eagle3"]
    # Every candidate parses as a compare config and validates against this binary.
    for candidate in candidates:
        SpecConfig.parse(candidate.text).to_args(CAPS)


def test_draft_types_need_a_matching_drafter(tmp_path: Path) -> None:
    draft = tmp_path / "d.gguf"
    draft.write_bytes(b"GGUF" + bytes(28))
    facts = ModelFacts(draft_model=draft, draft_architecture="gemma3", mtp_layers=2)
    candidates, skipped = build_space(CAPS, HELP, facts)
    types = {c.type for c in candidates}
    assert {"draft-simple", "draft-mtp"} <= types
    reasons = {s.type: s.reason for s in skipped}
    assert reasons["draft-eagle3"].endswith("d.gguf is a 'gemma3' model")
    assert "draft-dflash" in reasons and "draft-dspark" in reasons
    eagle = ModelFacts(draft_model=draft, draft_architecture="eagle3", mtp_layers=0)
    assert "draft-eagle3" in {c.type for c in build_space(CAPS, HELP, eagle)[0]}


def test_types_narrow_the_space_and_unknown_ones_are_skipped() -> None:
    candidates, skipped = build_space(CAPS, HELP, ModelFacts(), ["ngram-mod", "ngram-magic"])
    assert {c.type for c in candidates} == {"ngram-mod"}
    assert [s.type for s in skipped] == ["ngram-magic"]
    # A maximum below the help's minimum brings the minimum down with it.
    small = next(c for c in candidates if c.knobs["--spec-ngram-mod-n-max"] == 16)
    assert "--spec-ngram-mod-n-min 16" in small.text


def test_every_listed_type_has_a_one_line_explanation() -> None:
    for name in CAPS.spec_types:
        line = explain_type(name)
        assert line and "\n" not in line
        assert "no description" not in line
    assert explain_type("ngram-simple").startswith("copies the continuation")
    assert explain_type("draft-mtp", mtp_layers=0).endswith("this model has none")
    assert "spectui has no description" in explain_type("draft-future")


def test_help_narrows_the_table_but_never_widens_it() -> None:
    listed = set(CAPS.spec_types)
    assert listed <= set(SPEC_TYPE_INFO)  # every listed type is described
    old = parse_help((Path(__file__).parent.parent / "fixtures" / "help-old.txt").read_text())
    candidates, _ = build_space(old, HELP, ModelFacts())
    assert {c.type for c in candidates} <= set(old.spec_types)


@pytest.mark.parametrize(
    ("name", "given", "problem"),
    [
        (
            "draft-simple",
            {},
            "needs a draft GGUF with the same vocabulary (--draft-model): none given",
        ),
        ("draft-simple", {"draft_model": Path("d.gguf")}, None),
        ("ngram-mod", {}, None),
        ("draft-mtp", {"mtp_layers": 1}, None),
    ],
)
def test_type_problem(name: str, given: dict[str, object], problem: str | None) -> None:
    assert type_problem(name, **given) == problem  # type: ignore[arg-type]  # each case's keywords


def test_doctor_warns_about_a_draft_model_with_spec_type_none() -> None:
    warnings = _warnings("none", Path("/m/draft.gguf"))
    assert warnings == [
        "a draft model (draft.gguf) is set but --spec-type is none: it is not loaded; pick a "
        "draft type (draft-simple) to use it"
    ]
    assert _warnings("draft-simple", Path("/m/draft.gguf")) == []
    assert _warnings(None, None) == []
    report = DoctorReport(
        binary=Path("/bin/llama-server"),
        binary_source="PATH",
        spec_types=("none", "ngram-mod"),
        type_notes=(("ngram-mod", explain_type("ngram-mod")),),
        warnings=tuple(warnings),
    )
    text = format_doctor(report)
    assert "  ngram-mod" in text and "copies long n-gram matches" in text
    assert "!! a draft model (draft.gguf) is set" in text


def test_gguf_metadata_of_a_tiny_file(tmp_path: Path) -> None:
    import struct

    def kv_string(key: str, value: str) -> bytes:
        k, v = key.encode(), value.encode()
        return struct.pack("<Q", len(k)) + k + struct.pack("<I", 8) + struct.pack("<Q", len(v)) + v

    def kv_u32(key: str, value: int) -> bytes:
        k = key.encode()
        return struct.pack("<Q", len(k)) + k + struct.pack("<I", 4) + struct.pack("<I", value)

    body = kv_string("general.architecture", "glm4moe") + kv_u32("glm4moe.nextn_predict_layers", 1)
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + body)
    meta = gguf_metadata(path)
    assert meta["general.architecture"] == "glm4moe"
    assert mtp_layers(meta) == 1
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + body[:10])
    from spectui.core.errors import ModelError

    with pytest.raises(ModelError, match="damaged or truncated"):
        gguf_metadata(path)


def test_every_types_defaults_come_first() -> None:
    candidates, _ = build_space(CAPS, HELP, ModelFacts())
    types = {c.type for c in candidates}
    assert [c.text for c in candidates[: len(types)]] == [
        "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache",
    ]  # fmt: skip


async def test_the_spec_picker_explains_the_highlighted_type() -> None:
    from textual.app import App
    from textual.widgets import Label, OptionList

    from spectui.ui.screens.spec_picker import SpecPickerScreen

    picker = SpecPickerScreen(CAPS.spec_types, SpecConfig(types=("ngram-mod",)), None, mtp_layers=0)
    app: App[None] = App()
    async with app.run_test() as pilot:
        await app.push_screen(picker)
        await pilot.pause()
        help_text = str(picker.query_one("#type-help", Label).render())
        assert help_text.startswith("copies long n-gram matches")
        options = picker.query_one(OptionList)
        options.highlighted = list(CAPS.spec_types).index("draft-mtp")
        await pilot.pause()
        assert str(picker.query_one("#type-help", Label).render()).endswith("this model has none")


def test_candidate_labels_name_the_moved_knobs() -> None:
    candidates, _ = build_space(CAPS, HELP, ModelFacts(draft_model=Path("d.gguf")))
    labels = {c.text: c.label for c in candidates}
    assert labels["ngram-mod"] == "ngram-mod"
    assert labels["ngram-mod --spec-ngram-mod-n-match 12"] == "ngram-mod (n-match 12)"
    assert labels["draft-simple --spec-draft-n-max 4"] == "draft-simple (n-max 4)"
    assert len(set(labels.values())) == len(labels)  # every candidate tells apart
