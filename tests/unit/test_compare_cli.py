"""The compare command's views: the Rich table, log lines, and the plotext chart."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from spectui.core.compare.runner import RunFinished
from spectui.core.compare.store import CompareDocument
from spectui.ui.console.compare import chart_text, run_line, summary_table

from .compare_helpers import document, plan, record


def _finished(tmp_path: Path) -> CompareDocument:
    p = plan(("none", "ngram-simple"), ("a", "b"), reps=1)
    records = [
        record("none", "a", 1, seq=1, total_ms=1000),
        record("none", "b", 1, seq=2, total_ms=1000),
        record("ngram-simple", "a", 1, seq=4, total_ms=500, tps=20.0),
        record("ngram-simple", "b", 1, seq=5, total_ms=1500, tps=7.0),
    ]
    return document(p).updated(records, [], [])


def test_summary_table_shows_every_config_and_prompt(tmp_path: Path) -> None:
    console = Console(record=True, width=160)
    console.print(summary_table(_finished(tmp_path)))
    text = console.export_text()
    assert "ngram-simple" in text and "2.00x" in text and "0.67x" in text
    assert "baseline" in text and "inconclusive" in text  # one round settles nothing


def test_chart_has_both_panels_and_no_colour_when_asked(tmp_path: Path) -> None:
    text = chart_text(_finished(tmp_path), width=90, colour=False)
    assert "tokens/s (median" in text and "TTFT ms (median" in text
    assert "ngram-simple" in text
    assert "\x1b[" not in text


def test_run_line_for_logs() -> None:
    ok = record("ngram-simple", "a", 2, seq=7, tps=41.75, check_status="passed")
    ok = ok.model_copy(update={"drafted": 10, "accepted": 9, "identical_to_baseline": True})
    line = run_line(RunFinished(record=ok, done=8, total=15))
    assert line == (
        "[8/15] round 2 · ngram-simple · a: 10 tokens, 41.8 tok/s, TTFT 100 ms, "
        "accepted 9/10, same as baseline, check passed"
    )
    failed = record("none", "a", 0, warmup=True, status="failed")
    assert run_line(RunFinished(record=failed, done=1, total=15)).endswith(
        "warm-up · none · a: failed: boom"
    )


def test_labels_with_brackets_print_as_written() -> None:
    from spectui.core.compare.models import CompareConfig
    from spectui.core.llama.specconfig import SpecConfig

    p = plan(("none",), ("a",), reps=1)
    spec = SpecConfig(types=("draft-simple",), draft_model=Path("/m/x.gguf"))
    drafting = CompareConfig(name="draft-simple -md /m/x.gguf", spec=spec)
    p = p.model_copy(update={"configs": (*p.configs, drafting)})
    console = Console(record=True, width=160)
    console.print(summary_table(document(p).updated([], [], [])))
    assert "draft-simple [x.gguf]" in console.export_text()
