"""`spectui tune --concurrency 2` against the real llama-server with Gemma 3 270M: the step-cost
model is fitted on the runs at 2 streams (each run's batches priced with the other slot's
tokens), and every candidate reports its predicted speedup beside the measured one. No timing
is asserted: which is faster, and by how much, is the machine's business."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli import spectui
from spectui.commands.tune import load_tune

from .outside import FAST, ServerWatch

pytestmark = pytest.mark.server


def test_tune_at_two_streams_reports_predicted_and_measured_per_candidate(
    tmp_path: Path, gemma_model: Path, llama_binary: Path, watch: ServerWatch
) -> None:
    out = tmp_path / "t.json"
    result = spectui(
        "tune", "--model", str(gemma_model), "--server-bin", str(llama_binary),
        "--prompts", "builtin:table-row", "--types", "ngram-mod,ngram-simple",
        "--grid", "defaults", "--concurrency", "2", "--budget", "20m",
        "--json", str(out), "--no-chart", "--n-predict", "48", "--ctx-size", "1024",
        "--", *FAST,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = load_tune(out)
    runs = [r for r in doc.compare.runs if r.ok and not r.warmup]
    assert runs and {r.level for r in runs} == {2}
    model = doc.cost_model
    assert model is not None and model.levels == [2]
    # Every counted run is priced, in its own terms, beside what it measured.
    assert all(r.predicted_tokens_per_second and r.tokens_per_second for r in runs)
    assert len(doc.candidates) == 2
    for candidate in doc.candidates:
        assert candidate.overall.predicted is not None, candidate.config
        assert candidate.overall.speedup is not None, candidate.config
        predicted = candidate.overall.predicted
        assert predicted.low <= predicted.speedup <= predicted.high
    # The file says the same to a reader of the JSON.
    data = json.loads(out.read_text())
    assert data["cost_model"]["levels"] == [2]
    assert watch.most == 1
