"""Server payload models parse the real captures."""

from __future__ import annotations

import json

from helpers.sse import FIXTURES
from spectui.core.llama.protocol import ErrorBody, Props, ServerMetrics, Slot


def test_metrics_histogram_and_counters() -> None:
    metrics = ServerMetrics.parse((FIXTURES / "metrics-after-ngram-simple-2.prom").read_text())
    assert metrics.spec_steps == 20
    assert metrics.spec_drafted == 155
    assert metrics.spec_accepted == 46
    assert metrics.accepted_per_position == [14, 10, 5, 5, 5, 4, 2, 1]
    assert metrics.value("llamacpp:tokens_predicted_total") == 120


def test_metrics_without_spec_counters() -> None:
    metrics = ServerMetrics.parse("# HELP x\nllamacpp:tokens_predicted_total 3\n")
    assert metrics.spec_steps == 0
    assert metrics.accepted_per_position == []


def test_props_and_slots() -> None:
    props = Props.model_validate_json((FIXTURES / "props.json").read_text())
    assert props.model_path == "models/gemma-3-270m-q4_k_m.gguf"
    assert props.endpoint_metrics is True
    slots = [Slot.model_validate(s) for s in json.loads((FIXTURES / "slots.json").read_text())]
    # /props claims 'none' while the slot really runs ngram-simple: the slot is the truth.
    assert props.default_generation_settings is not None
    assert props.default_generation_settings.params["speculative.types"] == "none"
    assert slots[0].speculative is True
    assert slots[0].spec_types == ["none", "ngram-simple"]


def test_error_bodies() -> None:
    for name, code in [("error-404.http", 404), ("error-bad-prompt.http", 400)]:
        body = (FIXTURES / name).read_text().split("\n\n", 1)[1]
        assert ErrorBody.model_validate_json(body).error.code == code
